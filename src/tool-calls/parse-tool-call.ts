/**
 * Tool calls in a model's output, read once for the whole code base: the TTL model names the tool a turn
 * called (`parseToolName`), the server returns the calls with their arguments (`src/server/output/tool-calls.ts`
 * gives them ids and shapes their arguments). Formats: Hermes/Qwen `<tool_call>` blocks (JSON or
 * Qwen3-Coder XML), Llama 3 `<|python_tag|>`, plain Llama 3 JSON, the Llama 3.2/4 pythonic list and a
 * single ```bash block. Calls inside `<think>` reasoning do not count.
 */
import { isRecord, jsonObjectsIn, parseJsonLenient } from "./json-objects.js";
import { parsePythonCall, parsePythonCallList } from "./python-call.js";
import { headCommand } from "./shell-head-command.js";
import { asToolName } from "./tool-name.js";

const REASONING_TAG = /<(\/?)think(?:ing)?>/gi;

/**
 * The parts of `text` outside its `<think>`/`<thinking>` reasoning, as [start, end) indices. An opening
 * tag that is never closed hides the rest of the output (the model was cut off while reasoning). A closing
 * tag that comes before any opening tag hides everything before it: Qwen3 and DeepSeek-R1 chat templates
 * inject the opening tag into the prompt, so the completion starts inside the reasoning. Only the first tag
 * gets that reading; a stray closing tag later on is ordinary text (a command may well print one).
 */
function answerSpans(text: string): [number, number][] {
  const spans: [number, number][] = [];
  let keepFrom = 0;
  let inReasoning = false;
  let isFirstTag = true;
  for (const tag of text.matchAll(REASONING_TAG)) {
    const isClosing = tag[1] === "/";
    if (isClosing && (inReasoning || isFirstTag)) {
      inReasoning = false;
      keepFrom = tag.index + tag[0].length;
    } else if (!isClosing && !inReasoning) {
      spans.push([keepFrom, tag.index]);
      inReasoning = true;
    }
    isFirstTag = false;
  }
  if (!inReasoning) spans.push([keepFrom, text.length]);
  return spans;
}

/** The output without its reasoning (see `answerSpans`). */
export function stripReasoning(text: string): string {
  return answerSpans(text)
    .map(([start, end]) => text.slice(start, end))
    .join("");
}

/** Where the answer lies in an output: tagged calls count where they open in it. */
interface AnswerMap {
  /** whether the character at `index` is outside the reasoning */
  has(index: number): boolean;
  /**
   * the first index of the answer from `index` on (the output's length when none): where a call opened in
   * reasoning ends
   */
  from(index: number): number;
}

function answerMap(output: string): AnswerMap {
  const spans = answerSpans(output).filter(([start, end]) => start < end);
  return {
    has: (index) => spans.some(([start, end]) => start <= index && index < end),
    from: (index) => {
      const span = spans.find(([, end]) => index < end);
      return span === undefined ? output.length : Math.max(span[0], index);
    },
  };
}

/** A model output without its reasoning, where untagged calls are read. */
interface Answer {
  readonly text: string;
  /** where the answer's character `index` stands in the output */
  outputIndex(index: number): number;
}

function answerOf(output: string): Answer {
  const spans = answerSpans(output);
  return {
    text: spans.map(([start, end]) => output.slice(start, end)).join(""),
    outputIndex(index) {
      let offset = 0;
      for (const [start, end] of spans) {
        if (index < offset + end - start) return start + index - offset;
        offset += end - start;
      }
      return output.length;
    },
  };
}

/** A call's arguments as the model wrote them, before an API gives them a shape. */
export type WrittenArguments =
  /** a JSON object, the JSON text of one, or Python keyword arguments; undefined when none were written */
  | { readonly kind: "value"; readonly value: unknown }
  /** Qwen3-Coder's `<parameter=key>` texts in order, for the tool's schema to type */
  | { readonly kind: "xml"; readonly params: readonly (readonly [string, string])[] }
  /** the tool's name could be read, its arguments could not */
  | { readonly kind: "unreadable" };

export interface WrittenToolCall {
  /** where the call starts in the output: its block or tag, or for untagged formats the answer */
  readonly at: number;
  /** the tool; null where the text is not a call (JSON data) or names no usable tool */
  readonly name: string | null;
  readonly arguments: WrittenArguments;
}

const UNREADABLE: WrittenArguments = { kind: "unreadable" };

export const HERMES_OPEN = "<tool_call>";
const HERMES_CLOSE = "</tool_call>";
// Qwen3-Coder writes the call as XML inside the same tags: <tool_call><function=name>...
const XML_FUNCTION = /^\s*<function=([^>\s]+)>([\s\S]*?)(?:<\/function>|$)/;
const XML_PARAMETER = /<parameter=([^>\s]+)>\n?([\s\S]*?)\n?(?:<\/parameter>|(?=<parameter=)|$)/g;
// Arguments with raw newlines or cut off make the JSON invalid while the name is still plain to read.
const JSON_NAME_FIELD = /"name"\s*:\s*"([^"\\]*)"/;

/** `{"name": ..., "arguments"|"parameters": ...}`, or the same under `"function"`. */
function jsonCall(at: number, object: Record<string, unknown>): WrittenToolCall {
  const fn = isRecord(object["function"]) ? object["function"] : object;
  return {
    at,
    name: asToolName(fn["name"]),
    arguments: { kind: "value", value: fn["arguments"] ?? fn["parameters"] },
  };
}

function hermesCall(at: number, body: string): WrittenToolCall {
  const xml = XML_FUNCTION.exec(body);
  if (xml) {
    const params = [...xml[2]!.matchAll(XML_PARAMETER)].map(([, key, text]) => [key!, text!] as const);
    return { at, name: asToolName(xml[1]), arguments: { kind: "xml", params } };
  }
  const object =
    jsonObjectsIn(body).next().value ??
    parseJsonLenient(body.slice(body.indexOf("{"), body.lastIndexOf("}") + 1));
  if (isRecord(object)) return jsonCall(at, object);
  return { at, name: asToolName(JSON_NAME_FIELD.exec(body)?.[1]), arguments: UNREADABLE };
}

/**
 * Hermes/Qwen: `<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks, the last one may be unclosed.
 * Like every tagged call, a block counts where it opens outside reasoning and is read whole from the output:
 * its arguments may well mention a think tag.
 */
export function hermesCalls(output: string): WrittenToolCall[] {
  const answer = answerMap(output);
  const calls: WrittenToolCall[] = [];
  for (let at = output.indexOf(HERMES_OPEN); at !== -1; ) {
    if (!answer.has(at)) {
      at = output.indexOf(HERMES_OPEN, answer.from(at));
      continue;
    }
    const close = output.indexOf(HERMES_CLOSE, at + HERMES_OPEN.length);
    const end = close === -1 ? output.length : close;
    calls.push(hermesCall(at, output.slice(at + HERMES_OPEN.length, end)));
    at = close === -1 ? -1 : output.indexOf(HERMES_OPEN, close + HERMES_CLOSE.length);
  }
  return calls;
}

export const PYTHON_TAG = "<|python_tag|>";
const FUNCTION_CALL_HEAD = /^([A-Za-z_][\w.]*)\s*\(/;

/** `brave_search.call(query=...)` is how Llama 3.1 calls its built-in tool `brave_search`. */
function functionCallName(text: string): string | null {
  const callee = FUNCTION_CALL_HEAD.exec(text)?.[1];
  return callee === undefined ? null : asToolName(callee.replace(/\.call$/, ""));
}

/** Llama 3: `<|python_tag|>{"name": ..., "parameters": ...}` (`;`-separated) or `func(k=v)`. */
export function pythonTagCalls(output: string): WrittenToolCall[] {
  const answer = answerMap(output);
  let at = output.indexOf(PYTHON_TAG);
  while (at !== -1 && !answer.has(at)) at = output.indexOf(PYTHON_TAG, answer.from(at));
  if (at === -1) return [];
  const rest = output.slice(at + PYTHON_TAG.length).trimStart();
  if (rest.startsWith("{")) return [...jsonObjectsIn(rest)].map((object) => jsonCall(at, object));
  const call = parsePythonCall(rest);
  if (call !== null) return [{ at, name: call.name, arguments: { kind: "value", value: call.args } }];
  const name = functionCallName(rest);
  return name === null ? [] : [{ at, name, arguments: UNREADABLE }];
}

/** Untagged Llama 3 JSON: the answer is `{"name": ..., "parameters": ...}` or `{"type": "function", ...}`. */
export function jsonCalls(output: string): WrittenToolCall[] {
  const answer = answerOf(output);
  const trimmed = answer.text.trimStart();
  if (!trimmed.startsWith("{")) return [];
  const at = answer.outputIndex(answer.text.length - trimmed.length);
  return [...jsonObjectsIn(trimmed)].map((object) => {
    const fn = isRecord(object["function"]) ? object["function"] : object;
    // Without these keys a JSON answer such as {"name": "Alice", "age": 3} is data, not a call.
    const isCall = "parameters" in fn || "arguments" in fn || object["type"] === "function";
    return isCall ? jsonCall(at, object) : { at, name: null, arguments: UNREADABLE };
  });
}

/** Llama 3.2/4 pythonic: the answer is `[func_name(a=1), other(b=2)]`. */
export function pythonicCalls(output: string): WrittenToolCall[] {
  const answer = answerOf(output);
  const trimmed = answer.text.trim();
  if (!trimmed.startsWith("[")) return [];
  const at = answer.outputIndex(answer.text.length - answer.text.trimStart().length);
  const list = trimmed.endsWith("]") ? parsePythonCallList(trimmed) : null;
  if (list !== null) {
    return list.map((call) => ({ at, name: call.name, arguments: { kind: "value", value: call.args } }));
  }
  const name = functionCallName(trimmed.slice(1).trimStart());
  return name === null ? [] : [{ at, name, arguments: UNREADABLE }];
}

const SHELL_BLOCK = /```(?:bash|sh|shell)[^\S\n]*\n([\s\S]*?)\n?```/g;

/** mini-swe-agent: exactly one ```bash block is the action; zero or several mean the output is none. */
export function shellBlock(output: string): { readonly at: number; readonly script: string } | null {
  const answer = answerMap(output);
  const blocks: RegExpExecArray[] = [];
  const search = new RegExp(SHELL_BLOCK);
  for (let block = search.exec(output); block !== null; block = search.exec(output)) {
    if (answer.has(block.index)) blocks.push(block);
    else search.lastIndex = answer.from(block.index);
  }
  if (blocks.length !== 1) return null;
  return { at: blocks[0]!.index, script: blocks[0]![1]! };
}

/** Terminal-Bench (Terminus): `{"commands": [{"keystrokes": "ls -la\n"}, ...]}`, first command wins. */
function terminalBenchCommand(text: string): string | null {
  for (const object of jsonObjectsIn(text)) {
    const commands = object["commands"];
    if (!Array.isArray(commands)) continue;
    for (const command of commands) {
      const keystrokes: unknown = command?.keystrokes;
      if (typeof keystrokes !== "string") continue;
      const head = headCommand(keystrokes);
      if (head !== null) return head;
    }
    return null;
  }
  return null;
}

function firstName(calls: readonly WrittenToolCall[]): string | null {
  return calls[0]?.name ?? null;
}

/** Each format's tool, the first call's, in the order tried; a shell command is named by its head. */
const TOOL_NAMES: readonly ((output: string) => string | null)[] = [
  (output) => firstName(hermesCalls(output)),
  (output) => firstName(pythonTagCalls(output)),
  (output) => firstName(jsonCalls(output)),
  (output) => firstName(pythonicCalls(output)),
  (output) => terminalBenchCommand(stripReasoning(output)),
  (output) => {
    const block = shellBlock(output);
    return block === null ? null : headCommand(block.script);
  },
];

/**
 * Identity of the tool a model output calls, or null when it calls none that can be recognised.
 * Reasoning is ignored, so a command the model only thought about is never taken for the call.
 */
export function parseToolName(output: string): string | null {
  for (const name of TOOL_NAMES) {
    const found = name(output);
    if (found !== null) return found;
  }
  return null;
}

/** Name of the first function in an OpenAI-style `tool_calls` list. */
export function toolNameFromOpenAIToolCalls(
  toolCalls: readonly { function?: { name?: string } }[] | undefined,
): string | null {
  if (!Array.isArray(toolCalls)) return null;
  for (const call of toolCalls) {
    const name = asToolName(call?.function?.name);
    if (name !== null) return name;
  }
  return null;
}

const FORK_BASH_BLOCK = /```bash\s*\n(.*?)\n```/gs;

/**
 * The CacheTTL authors' vLLM fork, kept as a baseline: exactly one ```bash block, its first word.
 * It does not skip reasoning or `cd`, so `cd /testbed && pytest` is the tool `cd`.
 */
export function parseForkToolName(output: string): string | null {
  const blocks = [...output.matchAll(FORK_BASH_BLOCK)];
  if (blocks.length !== 1) return null;
  return blocks[0]![1]!.trim().split(/\s+/)[0] || null;
}
