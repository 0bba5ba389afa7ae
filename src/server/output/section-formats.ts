/**
 * Tool-call formats whose calls stand between an opening and a closing marker (MiniMax, DeepSeek's DSML,
 * Kimi K3, Seed-OSS, Hy3, MiniCPM5, Solar Open, Functionary v3.1, GigaChat 3 and 3.1, Nemotron Nano 2,
 * MiniMax M1 and Apriel, Command R7B and R+, Apertus, LFM2): how a template tells each, its markers, and its
 * calls' names and arguments as written (tool-call-formats.ts shapes them into calls).
 */
import { jsonObjectsIn, parseJsonLenient } from "../../tool-calls/json-objects.js";
import { parsePythonCallList } from "../../tool-calls/python-call.js";

/** A parameter written as bare text, read as its tool's schema types it. */
export type Typed = (tool: string, key: string, text: string) => unknown;
/** A call as the output writes it: where the text before it ends, its name, its arguments. */
export interface WrittenCall {
  readonly at: number;
  readonly name: unknown;
  readonly args: unknown;
}
/** Name and arguments of each call a section holds; `typed` reads a parameter written as bare text. */
type SectionReader = (body: string, typed: Typed) => [unknown, unknown][];

/** A format whose calls stand between an opening and a closing marker, read by `read`. */
interface SectionFormat {
  /** what in a template's text tells the format */
  readonly detect: string;
  /** the markers a section opens and closes with (more than one pair: the format's later versions) */
  readonly sections: readonly (readonly [open: string, close: string])[];
  /** more markers a vocabulary may hold as control tokens, to be kept in the text */
  readonly preserved?: readonly string[];
  readonly read: SectionReader;
}

/** `<invoke name="f"><parameter name="k">v</parameter></invoke>`, each tag after `prefix`. */
export function invokeReader(prefix: string): SectionReader {
  const invoke = new RegExp(`<${prefix}invoke name="([^"]+)">([\\s\\S]*?)(?:</${prefix}invoke>|$)`, "g");
  const parameter = new RegExp(
    `<${prefix}parameter name="([^"]+)"(?: string="(true|false)")?>([\\s\\S]*?)(?:</${prefix}parameter>|$)`,
    "g",
  );
  return (body, typed) =>
    [...body.matchAll(invoke)].map(([, name, params]) => {
      const args: Record<string, unknown> = {};
      for (const [, key, string, text] of params!.matchAll(parameter)) {
        // DSML says whether a value is a string; MiniMax leaves it to the schema (strings bare, the rest JSON)
        args[key!] =
          string === "true"
            ? text
            : string === "false"
              ? (parseJsonLenient(text!) ?? text)
              : typed(name!, key!, text!);
      }
      return [name, args];
    });
}

/** `<function=f><parameter=k>v</parameter></function>` (Qwen3-Coder's XML), values typed by the schema. */
function functionTagReader(): SectionReader {
  const fn = /<function=([^>\s]+)>([\s\S]*?)(?:<\/function>|$)/g;
  const parameter = /<parameter=([^>\s]+)>\n?([\s\S]*?)\n?(?:<\/parameter>|$)/g;
  return (body, typed) =>
    [...body.matchAll(fn)].map(([, name, params]) => [
      name,
      Object.fromEntries(
        [...params!.matchAll(parameter)].map(([, key, text]) => [key, typed(name!, key!, text!)]),
      ),
    ]);
}

/** JSON objects in a section, each a call read by `call` (its name and arguments). */
function jsonReader(call: (object: Record<string, unknown>) => [unknown, unknown]): SectionReader {
  return (body) => [...jsonObjectsIn(body)].map(call);
}

/** Each call as `open`name`separator`arguments`close`, its arguments read by `args`. */
function callReader(
  [open, separator, close]: readonly [string, string, string],
  args: (text: string, name: string, typed: Typed) => unknown,
): SectionReader {
  const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const block = new RegExp(
    `${literal(open)}([^<>"]+?)${literal(separator)}([\\s\\S]*?)(?:${literal(close)}|$)`,
    "g",
  );
  return (body, typed) =>
    [...body.matchAll(block)].map(([, name, text]) => [name, args(text!, name!, typed)]);
}

/** Parameters as `key`/`value` tag pairs (GLM's, Hy3's), each value typed by the schema. */
function keyValueArgs([key, value]: readonly [string, string]) {
  const pair = new RegExp(
    `<${key}>([\\s\\S]*?)</${key}>\\s*<${value}>(?:<!\\[CDATA\\[([\\s\\S]*?)\\]\\]>|([\\s\\S]*?))(?:</${value}>|$)`,
    "g",
  );
  return (text: string, name: string, typed: Typed) =>
    Object.fromEntries(
      [...text.matchAll(pair)].map(([, k, cdata, raw]) => [
        k!.trim(),
        cdata === undefined ? typed(name, k!.trim(), raw!) : cdata,
      ]),
    );
}

/** Parameters as `<tag name="key">value</tag>` (a value may be a CDATA block), typed by the schema. */
function namedParamArgs(tag: string) {
  const param = new RegExp(
    `<${tag} name="([^"]+)">(?:<!\\[CDATA\\[([\\s\\S]*?)\\]\\]>|([\\s\\S]*?))(?:</${tag}>|$)`,
    "g",
  );
  return (text: string, name: string, typed: Typed) =>
    Object.fromEntries(
      [...text.matchAll(param)].map(([, k, cdata, raw]) => [
        k,
        cdata === undefined ? typed(name, k!, raw!) : cdata,
      ]),
    );
}

const jsonArgs = (text: string) => parseJsonLenient(text.trim());

/** `{"name": ..., "arguments": {...}}` objects (most JSON formats) */
const nameAndArguments = jsonReader((o) => [o["name"], o["arguments"]]);
/** `{"tool_name": ..., "parameters": {...}}` objects (Cohere's) */
const toolNameAndParameters = jsonReader((o) => [o["tool_name"], o["parameters"]]);

/** MiniMax M3's namespace token, written before each of its tool tags. */
const MINIMAX_M3_NS = "]<]minimax[>[";

/** MiniMax M3: invoke blocks whose parameters are tags named by the parameter (`<path>a.py</path>`). */
function minimaxM3Reader(): SectionReader {
  const invoke = /<invoke name="([^"]+)">([\s\S]*?)(?:<\/invoke>|$)/g;
  const param = /<([A-Za-z_][\w.-]*)>([\s\S]*?)(?:<\/\1>|$)/g;
  return (body, typed) =>
    [...body.replaceAll(MINIMAX_M3_NS, "").matchAll(invoke)].map(([, name, params]) => [
      name,
      Object.fromEntries(
        [...params!.matchAll(param)].map(([, key, text]) => [key, typed(name!, key!, text!)]),
      ),
    ]);
}

/** Kimi K3: `<|open|>call tool="f" index="1"<|sep|>` with `<|open|>argument key="k" type="t"<|sep|>v<|close|>argument<|sep|>`. */
function kimiK3Reader(): SectionReader {
  const call = /<\|open\|>call tool="([^"]+)"[^<]*<\|sep\|>([\s\S]*?)(?:<\|close\|>call<\|sep\|>|$)/g;
  const argument =
    /<\|open\|>argument key="([^"]+)"[^<]*<\|sep\|>([\s\S]*?)(?:<\|close\|>argument<\|sep\|>|$)/g;
  // the type attribute is the model's; the schema's type decides, as llama.cpp reads it
  return (body, typed) =>
    [...body.matchAll(call)].map(([, name, args]) => [
      name,
      Object.fromEntries(
        [...args!.matchAll(argument)].map(([, key, text]) => [key, typed(name!, key!, text!)]),
      ),
    ]);
}

/** Formats whose calls stand between markers, by name. */
const SECTION_FORMATS = {
  // Kimi K3: <|open|>tools<|sep|> calls <|close|>tools<|sep|>; only <|open|>, <|close|>, <|sep|> are tokens
  "kimi-k3": {
    detect: "open_tag('call'",
    sections: [["<|open|>tools<|sep|>", "<|close|>tools<|sep|>"]],
    preserved: ["<|open|>", "<|close|>", "<|sep|>"],
    read: kimiK3Reader(),
  },
  // MiniMax M3: ]<]minimax[>[<tool_call> ]<]minimax[>[<invoke name="f"> ]<]minimax[>[<k>v]<]minimax[>[</k> ...
  "minimax-m3": {
    detect: MINIMAX_M3_NS,
    sections: [[`${MINIMAX_M3_NS}<tool_call>`, `${MINIMAX_M3_NS}</tool_call>`]],
    preserved: [MINIMAX_M3_NS, "<tool_call>", "</tool_call>"],
    read: minimaxM3Reader(),
  },
  // MiniMax M2: <minimax:tool_call><invoke name="f"><parameter name="k">v</parameter></invoke></minimax:tool_call>
  minimax: {
    detect: "<minimax:tool_call>",
    sections: [["<minimax:tool_call>", "</minimax:tool_call>"]],
    read: invokeReader(""),
  },
  // DeepSeek V3.2 (function_calls) and V4 (tool_calls): the same invoke blocks in DSML tags
  dsml: {
    detect: "｜DSML｜",
    sections: [
      ["<｜DSML｜function_calls>", "</｜DSML｜function_calls>"],
      ["<｜DSML｜tool_calls>", "</｜DSML｜tool_calls>"],
    ],
    read: invokeReader("｜DSML｜"),
  },
  // Seed-OSS: <seed:tool_call><function=f><parameter=k>v</parameter></function></seed:tool_call>
  seed: {
    detect: "<seed:tool_call>",
    sections: [["<seed:tool_call>", "</seed:tool_call>"]],
    read: functionTagReader(),
  },
  // Nemotron Nano 2: <TOOLCALL>[{"name": ..., "arguments": {...}}]</TOOLCALL>
  nemotron: {
    detect: "<TOOLCALL>",
    sections: [["<TOOLCALL>", "</TOOLCALL>"]],
    read: nameAndArguments,
  },
  // MiniMax M1: <tool_calls>\n{"name": ..., "arguments": {...}}\n</tool_calls>
  "minimax-m1": {
    detect: "<tool_calls>",
    sections: [["<tool_calls>", "</tool_calls>"]],
    read: nameAndArguments,
  },
  // Command R7B: <|START_ACTION|>[{"tool_call_id": ..., "tool_name": ..., "parameters": {...}}]<|END_ACTION|>
  "command-r": {
    detect: "<|START_ACTION|>",
    sections: [["<|START_ACTION|>", "<|END_ACTION|>"]],
    read: toolNameAndParameters,
  },
  // Command R+: Action:\n```json\n[{"tool_name": ..., "parameters": {...}}]``` (its template writes the newline as `\n`)
  "command-r-plus": {
    detect: "Action:\\n```json",
    sections: [["Action:\n```json", "```"]],
    read: toolNameAndParameters,
  },
  // Hunyuan (Hy3): GLM's key/value tags, each with `:opensource` (its template writes them with .format)
  hy3: {
    detect: "<tool_sep{}>",
    sections: [["<tool_calls:opensource>", "</tool_calls:opensource>"]],
    read: callReader(
      ["<tool_call:opensource>", "<tool_sep:opensource>", "</tool_call:opensource>"],
      keyValueArgs(["arg_key:opensource", "arg_value:opensource"]),
    ),
  },
  // MiniCPM5: <function name="f"><param name="k">v</param></function>, a value with <, & or a newline in CDATA
  minicpm5: {
    detect: '<param name="param-name">',
    sections: [['<function name="', "</function>"]],
    read: callReader(["", '">', "</function>"], namedParamArgs("param")),
  },
  // Solar Open: <|tool_calls|><|tool_call:begin|>id<|tool_call:name|>f<|tool_call:args|>{...}<|tool_call:end|><|calls|>
  solar: {
    detect: "<|tool_call:name|>",
    sections: [["<|tool_calls|>", "<|calls|>"]],
    read: callReader(["<|tool_call:name|>", "<|tool_call:args|>", "<|tool_call:end|>"], jsonArgs),
  },
  // Functionary v3.1: <function=f>{...}</function>
  functionary: {
    detect: "<function=example_function_name>{",
    sections: [["<function=", "</function>"]],
    read: callReader(["", ">", "</function>"], jsonArgs),
  },
  // GigaChat 3.1: <|function_call|>{"name": ..., "arguments": {...}}, one call a reply
  "gigachat-3.1": {
    detect: "<|function_call|>",
    sections: [["<|function_call|>", "<|message_sep|>"]],
    read: nameAndArguments,
  },
  // GigaChat 3: the reply ends and a "function call" turn holds the call (its markers are tokens with their
  // newlines), one call a reply
  gigachat: {
    detect: 'role_sep="<|role_sep|>',
    sections: [["<|message_sep|>\n\nfunction call<|role_sep|>\n", "<|message_sep|>"]],
    preserved: ["<|message_sep|>\n\n", "<|role_sep|>\n"],
    read: nameAndArguments,
  },
  // Apertus: <|tools_prefix|>[{"f": {...}}]<|tools_suffix|>
  apertus: {
    detect: "<|tools_prefix|>",
    sections: [["<|tools_prefix|>", "<|tools_suffix|>"]],
    read: jsonReader((o) => Object.entries(o)[0] ?? [null, null]),
  },
  // LFM2: <|tool_call_start|>[f(k='v'), g(n=2)]<|tool_call_end|>
  lfm2: {
    detect: "<|tool_call_start|>",
    sections: [["<|tool_call_start|>", "<|tool_call_end|>"]],
    read: (body) => (parsePythonCallList(body.trim()) ?? []).map((c) => [c.name, c.args]),
  },
} satisfies Record<string, SectionFormat>;

export type SectionFormatName = keyof typeof SECTION_FORMATS;

export function isSectionFormat(format: string): format is SectionFormatName {
  return Object.hasOwn(SECTION_FORMATS, format);
}

/** The section format a template's text teaches its model; null: none of them. */
export function sectionFormatOf(template: string): SectionFormatName | null {
  for (const [name, section] of Object.entries(SECTION_FORMATS) as [SectionFormatName, SectionFormat][]) {
    if (template.includes(section.detect)) return name;
  }
  return null;
}

/** The markers a vocabulary may hold as control tokens, to be kept in the text. */
export function sectionMarkers(format: SectionFormatName): string[] {
  const section: SectionFormat = SECTION_FORMATS[format];
  return [...section.sections.flat(), ...(section.preserved ?? [])];
}

/** Where a streamed output may open a section. */
export function sectionOpeners(format: SectionFormatName): string[] {
  return SECTION_FORMATS[format].sections.map(([open]) => open);
}

/** Each call written in the output's sections from `from` on, `at` where its section opens. */
export function readSections(
  output: string,
  from: number,
  format: SectionFormatName,
  typed: Typed,
): WrittenCall[] {
  const section: SectionFormat = SECTION_FORMATS[format];
  const calls: WrittenCall[] = [];
  let at = firstOpening(output, section, from);
  while (at !== null) {
    const [open, closeMarker] = at.section;
    const bodyStart = at.index + open.length;
    const close = output.indexOf(closeMarker, bodyStart);
    const body = output.slice(bodyStart, close === -1 ? output.length : close);
    for (const [name, args] of section.read(body, typed)) calls.push({ at: at.index, name, args });
    at = close === -1 ? null : firstOpening(output, section, close + closeMarker.length);
  }
  return calls;
}

/** The first section opened from `from` on: where, and its pair of markers. */
function firstOpening(
  output: string,
  format: SectionFormat,
  from: number,
): { index: number; section: readonly [string, string] } | null {
  let best: { index: number; section: readonly [string, string] } | null = null;
  for (const section of format.sections) {
    const index = output.indexOf(section[0], from);
    if (index !== -1 && (best === null || index < best.index)) best = { index, section };
  }
  return best;
}
