/**
 * How a model writes tool calls, told from its chat template's text, and the parser for each way.
 * Hermes/Qwen `<tool_call>` JSON and Llama 3.1 JSON / `<|python_tag|>` are what `parseToolCalls`
 * already reads; Mistral, DeepSeek, Kimi, GLM, Gemma 4 and the section formats below (MiniMax, DeepSeek's
 * DSML, MiniMax M3, Kimi K3, Seed-OSS, Hy3, MiniCPM5, Solar Open, Functionary v3.1, Nemotron, LFM2, Apertus, Command R7B and R+) write calls their own way and are parsed here first.
 */

import { randomBytes } from "node:crypto";
import { isRecord, jsonObjectsIn, parseJsonLenient } from "../core/tools/json-objects.js";
import { stripReasoning } from "../core/tools/parse-tool-call.js";
import { parsePythonCallList } from "../core/tools/python-call.js";
import { asToolName } from "../core/tools/tool-name.js";
import { readNotationValue } from "./gemma-call-notation.js";
import { templateIsHarmony } from "./harmony.js";
import {
  jsonDumps,
  newToolCallId,
  type ParsedToolCall,
  parseToolCalls,
  type ToolCallParse,
  type ToolSpec,
} from "./tool-calls.js";

export type ToolCallFormat =
  | "hermes"
  | "llama3"
  | "mistral"
  | "deepseek"
  | "glm"
  | "gemma"
  | "kimi"
  | "harmony"
  | SectionFormatName
  | "generic";

const MISTRAL_CALLS = "[TOOL_CALLS]";
const MISTRAL_ARGS = "[ARGS]";
const MISTRAL_CALL_ID = "[CALL_ID]";
const DEEPSEEK_CALLS = "<｜tool▁calls▁begin｜>";
const DEEPSEEK_CALL = "<｜tool▁call▁begin｜>";
// V3 / R1: `function<sep>name\n```json\n{...}\n```; V3.1 and later: `name<sep>{...}`
const DEEPSEEK_BLOCK =
  /<｜tool▁call▁begin｜>(?:function<｜tool▁sep｜>([^\n]+)\n```json\n([\s\S]*?)\n```|([^<\n]+?)<｜tool▁sep｜>([\s\S]*?))\s*(?:<｜tool▁call▁end｜>|$)/g;
const KIMI_CALLS = "<|tool_calls_section_begin|>";
const KIMI_CALL = "<|tool_call_begin|>";
// `functions.<name>:<index>` (the id the template writes), then the arguments
const KIMI_BLOCK =
  /<\|tool_call_begin\|>\s*(?:functions\.)?([^:<\s]+)(?::\d+)?\s*<\|tool_call_argument_begin\|>([\s\S]*?)\s*(?:<\|tool_call_end\|>|$)/g;
const GEMMA_CALL = "<|tool_call>call:";
const GEMMA_CALL_END = "<tool_call|>";
const GLM_BLOCK = /<tool_call>([^\n<]+)\n?((?:<arg_key>[\s\S]*?)?)(?:<\/tool_call>|$)/g;
const GLM_ARG = /<arg_key>([\s\S]*?)<\/arg_key>\s*<arg_value>([\s\S]*?)(?:<\/arg_value>|$)/g;

type Typed = (tool: string, key: string, text: string) => unknown;
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
function invokeReader(prefix: string): SectionReader {
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
    read: jsonReader((o) => [o["name"], o["arguments"]]),
  },
  // MiniMax M1: <tool_calls>\n{"name": ..., "arguments": {...}}\n</tool_calls>
  "minimax-m1": {
    detect: "<tool_calls>",
    sections: [["<tool_calls>", "</tool_calls>"]],
    read: jsonReader((o) => [o["name"], o["arguments"]]),
  },
  // Command R7B: <|START_ACTION|>[{"tool_call_id": ..., "tool_name": ..., "parameters": {...}}]<|END_ACTION|>
  "command-r": {
    detect: "<|START_ACTION|>",
    sections: [["<|START_ACTION|>", "<|END_ACTION|>"]],
    read: jsonReader((o) => [o["tool_name"], o["parameters"]]),
  },
  // Command R+: Action:\n```json\n[{"tool_name": ..., "parameters": {...}}]``` (its template writes the newline as `\n`)
  "command-r-plus": {
    detect: "Action:\\n```json",
    sections: [["Action:\n```json", "```"]],
    read: jsonReader((o) => [o["tool_name"], o["parameters"]]),
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

type SectionFormatName = keyof typeof SECTION_FORMATS;

function sectionFormat(format: ToolCallFormat): SectionFormat | null {
  return Object.hasOwn(SECTION_FORMATS, format) ? SECTION_FORMATS[format as SectionFormatName] : null;
}

/** The format a template teaches its model, by the markers its text writes. */
export function detectToolCallFormat(template: string): ToolCallFormat {
  if (templateIsHarmony(template)) return "harmony";
  for (const [name, section] of Object.entries(SECTION_FORMATS)) {
    if (template.includes(section.detect)) return name as SectionFormatName;
  }
  if (template.includes(MISTRAL_CALLS)) return "mistral";
  if (template.includes(KIMI_CALLS)) return "kimi";
  if (template.includes("<|tool_call>")) return "gemma";
  if (template.includes("tool▁call▁begin")) return "deepseek";
  if (template.includes("<arg_key>")) return "glm";
  if (template.includes("<tool_call>")) return "hermes";
  if (template.includes("<|python_tag|>") || template.includes("<|start_header_id|>")) return "llama3";
  return "generic";
}

/**
 * The markers a format's calls are written with, which a model's vocabulary may hold as control tokens
 * (Mistral's `[TOOL_CALLS]`, DeepSeek's): the engine writes these into the text, as llama-server's
 * preserved tokens, so the output can be read. (Harmony keeps every control token: harmony.ts.)
 */
export function formatMarkers(format: ToolCallFormat): string[] {
  switch (format) {
    case "mistral":
      return [MISTRAL_CALLS, MISTRAL_ARGS, MISTRAL_CALL_ID];
    case "deepseek":
      return [DEEPSEEK_CALLS, "<｜tool▁calls▁end｜>", DEEPSEEK_CALL, "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"];
    case "gemma":
      return ["<|tool_call>", GEMMA_CALL_END];
    case "kimi":
      return [
        KIMI_CALLS,
        "<|tool_calls_section_end|>",
        KIMI_CALL,
        "<|tool_call_argument_begin|>",
        "<|tool_call_end|>",
      ];
    case "glm":
      return ["<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"];
    case "hermes":
      return ["<tool_call>", "</tool_call>"];
    case "llama3":
      return ["<|python_tag|>"];
    default: {
      const section = sectionFormat(format);
      return section === null ? [] : [...section.sections.flat(), ...(section.preserved ?? [])];
    }
  }
}

/** Where a streamed output may start a call in this format (held back from content until known). */
export function toolCallMarkers(format: ToolCallFormat): string[] {
  if (format === "mistral") return [MISTRAL_CALLS];
  if (format === "deepseek") return [DEEPSEEK_CALLS, DEEPSEEK_CALL];
  if (format === "kimi") return [KIMI_CALLS, KIMI_CALL];
  if (format === "gemma") return ["<|tool_call>"];
  return sectionFormat(format)?.sections.map(([open]) => open) ?? [];
}

const ID_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/** Mistral's templates accept only 9 alphanumerics as a call id, and clients echo ids back. */
function mistralCallId(): string {
  return [...randomBytes(9)].map((b) => ID_ALPHABET[b % ID_ALPHABET.length]).join("");
}

function answerStart(output: string): number {
  const answer = stripReasoning(output);
  return output.endsWith(answer) ? output.length - answer.length : 0;
}

function call(id: string, rawName: unknown, args: unknown): ParsedToolCall | null {
  const name = asToolName(rawName);
  const parsed = typeof args === "string" ? parseJsonLenient(args) : (args ?? {});
  return name !== null && isRecord(parsed) ? { id, name, arguments: jsonDumps(parsed) } : null;
}

/**
 * `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]` (Nemo) or `[TOOL_CALLS]name[ARGS]{...}` (Small
 * 3.2, Devstral; a `[CALL_ID]id` may follow the name).
 */
function fromMistral(output: string): ToolCallParse | null {
  const start = output.indexOf(MISTRAL_CALLS, answerStart(output));
  if (start === -1) return null;
  const calls: ParsedToolCall[] = [];
  for (const segment of output.slice(start).split(MISTRAL_CALLS).slice(1)) {
    const args = segment.indexOf(MISTRAL_ARGS);
    if (args !== -1) {
      const object = jsonObjectsIn(segment.slice(args)).next().value;
      const parsed = call(mistralCallId(), segment.slice(0, args).split(MISTRAL_CALL_ID)[0], object);
      if (parsed !== null) calls.push(parsed);
      continue;
    }
    for (const object of jsonObjectsIn(segment)) {
      const parsed = call(mistralCallId(), object["name"], object["arguments"]);
      if (parsed !== null) calls.push(parsed);
    }
  }
  return calls.length > 0 ? { start, calls } : null;
}

/**
 * The calls of a format that writes each in a block `pattern` matches (`nameAndArgs` reads its groups),
 * the first opened by `opener` where the output has one before it.
 */
function blockCalls(
  output: string,
  pattern: RegExp,
  opener: string,
  nameAndArgs: (block: RegExpMatchArray) => [unknown, unknown],
): ToolCallParse | null {
  const from = answerStart(output);
  const calls: ParsedToolCall[] = [];
  let first = -1;
  for (const block of output.slice(from).matchAll(pattern)) {
    const parsed = call(newToolCallId(), ...nameAndArgs(block));
    if (parsed === null) continue;
    if (first === -1) first = from + (block.index as number);
    calls.push(parsed);
  }
  if (calls.length === 0) return null;
  const opened = output.lastIndexOf(opener, first);
  return { start: opened >= from ? opened : first, calls };
}

function fromDeepSeek(output: string): ToolCallParse | null {
  return blockCalls(output, DEEPSEEK_BLOCK, DEEPSEEK_CALLS, (b) => [b[1] ?? b[3], b[2] ?? b[4]]);
}

/** Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.name:0<|tool_call_argument_begin|>{...}<|tool_call_end|>...`. */
function fromKimi(output: string): ToolCallParse | null {
  return blockCalls(output, KIMI_BLOCK, KIMI_CALLS, (b) => [b[1], b[2]]);
}

function propertyType(tools: readonly ToolSpec[], tool: string, param: string): unknown {
  const properties = tools.find((t) => t.name === tool)?.parameters?.["properties"];
  const schema = isRecord(properties) ? properties[param] : undefined;
  return isRecord(schema) ? schema["type"] : undefined;
}

/** GLM 4.5+: `<tool_call>name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>`. */
function fromGlm(output: string, tools: readonly ToolSpec[]): ToolCallParse | null {
  const from = answerStart(output);
  const calls: ParsedToolCall[] = [];
  let first = -1;
  for (const block of output.slice(from).matchAll(GLM_BLOCK)) {
    const name = asToolName(block[1]);
    if (name === null) continue;
    const args: Record<string, unknown> = {};
    for (const [, key, raw] of block[2]!.matchAll(GLM_ARG)) {
      // Strings are written bare; everything else as JSON.
      const parsed = propertyType(tools, name, key!.trim()) === "string" ? undefined : parseJsonLenient(raw!);
      args[key!.trim()] = parsed === undefined ? raw : parsed;
    }
    if (first === -1) first = from + block.index;
    calls.push({ id: newToolCallId(), name, arguments: jsonDumps(args) });
  }
  return calls.length > 0 ? { start: first, calls } : null;
}

/** Gemma 4: `<|tool_call>call:name{key:<|"|>text<|"|>,n:2}<tool_call|>`, one block per call. */
function fromGemma(output: string): ToolCallParse | null {
  const calls: ParsedToolCall[] = [];
  let first = -1;
  let at = output.indexOf(GEMMA_CALL, answerStart(output));
  while (at !== -1) {
    const nameStart = at + GEMMA_CALL.length;
    const brace = output.indexOf("{", nameStart);
    if (brace === -1) break;
    const args = readNotationValue(output, brace);
    const parsed = args === null ? null : call(newToolCallId(), output.slice(nameStart, brace), args.value);
    if (parsed !== null) {
      if (first === -1) first = at;
      calls.push(parsed);
    }
    const next = args === null ? brace : args.end;
    at = output.indexOf(
      GEMMA_CALL,
      output.startsWith(GEMMA_CALL_END, next) ? next + GEMMA_CALL_END.length : next,
    );
  }
  return calls.length > 0 ? { start: first, calls } : null;
}

/** A value written as bare text, typed by the tool's schema: a string stays text, the rest is JSON. */
function typedBy(tools: readonly ToolSpec[]): Typed {
  return (tool, key, text) => {
    if (propertyType(tools, tool, key) === "string") return text;
    const parsed = parseJsonLenient(text.trim());
    return parsed === undefined ? text : parsed;
  };
}

/** The calls in a section format's sections, from the first section that holds one. */
function fromSections(
  output: string,
  section: SectionFormat,
  tools: readonly ToolSpec[],
): ToolCallParse | null {
  const from = answerStart(output);
  const calls: ParsedToolCall[] = [];
  let first = -1;
  let at = firstOpening(output, section, from);
  while (at !== null) {
    const [open, closeMarker] = at.section;
    const bodyStart = at.index + open.length;
    const close = output.indexOf(closeMarker, bodyStart);
    const body = output.slice(bodyStart, close === -1 ? output.length : close);
    for (const [name, args] of section.read(body, typedBy(tools))) {
      const parsed = call(newToolCallId(), name, args);
      if (parsed === null) continue;
      if (first === -1) first = at.index;
      calls.push(parsed);
    }
    at = close === -1 ? null : firstOpening(output, section, close + closeMarker.length);
  }
  return calls.length > 0 ? { start: first, calls } : null;
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

/** A format's own way of writing calls, read; null for the formats parseToolCalls reads. */
function ownParse(format: ToolCallFormat, output: string, tools: readonly ToolSpec[]): ToolCallParse | null {
  switch (format) {
    case "mistral":
      return fromMistral(output);
    case "deepseek":
      return fromDeepSeek(output);
    case "kimi":
      return fromKimi(output);
    case "glm":
      return fromGlm(output, tools);
    case "gemma":
      return fromGemma(output);
    default: {
      const section = sectionFormat(format);
      return section === null ? null : fromSections(output, section, tools);
    }
  }
}

/**
 * The tool calls in `output` of a model whose template writes `format`; what the format's own parser
 * does not find, the general one (`parseToolCalls`) still may.
 */
export function parseToolCallsAs(
  format: ToolCallFormat,
  output: string,
  tools: readonly ToolSpec[],
): ToolCallParse | null {
  const own = ownParse(format, output, tools);
  return own ?? parseToolCalls(output, tools);
}
