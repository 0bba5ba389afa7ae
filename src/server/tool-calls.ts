/**
 * Tool calls in a model's output, with their arguments, as OpenAI `tool_calls`. The formats are the
 * ones `src/core/tools/parse-tool-call.ts` names tools from: Hermes/Qwen `<tool_call>` blocks (JSON or
 * Qwen3-Coder XML), Llama 3 `<|python_tag|>`, plain Llama 3 JSON, the pythonic list, and a single
 * ```bash block when a bash-like function is offered. Calls inside `<think>` reasoning do not count.
 */
import { randomUUID } from "node:crypto";
import { jsonObjectsIn, leadingJsonObject } from "../core/tools/json-objects.js";
import { stripReasoning } from "../core/tools/parse-tool-call.js";
import { headCommand } from "../core/tools/shell-head-command.js";
import { asToolName } from "../core/tools/tool-name.js";
import { type PythonCall, parsePythonCall, parsePythonCallList } from "./python-call.js";

export interface ToolSpec {
  readonly name: string;
  readonly parameters: Record<string, unknown> | null;
}

export interface ParsedToolCall {
  readonly id: string;
  readonly name: string;
  /** the arguments object as a JSON string (OpenAI's representation) */
  readonly arguments: string;
}

export interface ToolCallParse {
  /** where the first call starts in the output; the text before it is the message content */
  readonly start: number;
  readonly calls: readonly ParsedToolCall[];
}

const HERMES_OPEN = "<tool_call>";
const HERMES_BLOCK = /<tool_call>([\s\S]*?)(?:<\/tool_call>|$)/g;
const XML_FUNCTION = /^\s*<function=([^>\s]+)>([\s\S]*?)(?:<\/function>|$)/;
const XML_PARAMETER = /<parameter=([^>\s]+)>\n?([\s\S]*?)\n?(?:<\/parameter>|(?=<parameter=)|$)/g;
const PYTHON_TAG = "<|python_tag|>";
const SHELL_BLOCK = /```(?:bash|sh|shell)[^\S\n]*\n([\s\S]*?)\n?```/g;
const SHELL_FENCE = "```";
const REASONING_CLOSE = /<\/think(?:ing)?>/gi;
const BASH_TOOL_NAMES =
  /^(?:bash|sh|shell|terminal|run_?shell|run_?bash|execute_?bash|run_?command|execute_?command|exec)$/i;
const COMMAND_PARAMS = ["command", "cmd", "script", "code", "commands", "input"];

export function newToolCallId(): string {
  return `call_${randomUUID().replace(/-/g, "").slice(0, 24)}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** JSON.parse that also takes raw control characters inside strings (bash commands with newlines). */
export function parseJsonLenient(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    let fixed = "";
    let inString = false;
    for (let i = 0; i < text.length; i++) {
      const ch = text[i]!;
      if (inString && ch === "\\") {
        fixed += ch + (text[i + 1] ?? "");
        i++;
        continue;
      }
      if (ch === '"') inString = !inString;
      if (inString && ch < " ") fixed += `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`;
      else fixed += ch;
    }
    try {
      return JSON.parse(fixed);
    } catch {
      return undefined;
    }
  }
}

/** Whether the character at `index` of `output` is model reasoning rather than its answer. */
function inReasoning(output: string, index: number): boolean {
  const SENTINEL = "\uE000";
  return !stripReasoning(output.slice(0, index) + SENTINEL + output.slice(index)).includes(SENTINEL);
}

/**
 * JSON spaced as Python's `json.dumps` writes it (`{"k": "v", "n": [1, 2]}`): the form of a call's
 * arguments. vLLM returns it and chat templates' `tojson` renders it, so models trained on those templates
 * write it the same way, and a client echoing a call back re-renders the text the model generated (its
 * KV reused).
 */
export function jsonDumps(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(jsonDumps).join(", ")}]`;
  if (isRecord(value)) {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}: ${jsonDumps(v)}`).join(", ")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** Arguments as a JSON string; null when they are not an object (or a JSON string of one). */
function argumentsJson(raw: unknown): string | null {
  if (raw === undefined || raw === null) return "{}";
  if (typeof raw === "string") {
    const parsed = parseJsonLenient(raw);
    return isRecord(parsed) ? jsonDumps(parsed) : null;
  }
  return isRecord(raw) ? jsonDumps(raw) : null;
}

function callFromObject(object: Record<string, unknown>): ParsedToolCall | null {
  const fn = isRecord(object["function"]) ? object["function"] : object;
  const name = asToolName(fn["name"]);
  if (name === null) return null;
  const args = argumentsJson(fn["arguments"] ?? fn["parameters"]);
  return args === null ? null : { id: newToolCallId(), name, arguments: args };
}

function propertyType(tools: readonly ToolSpec[], tool: string, param: string): unknown {
  const properties = tools.find((t) => t.name === tool)?.parameters?.["properties"];
  const schema = isRecord(properties) ? properties[param] : undefined;
  return isRecord(schema) ? schema["type"] : undefined;
}

/** Qwen3-Coder: `<function=name><parameter=k>\nvalue\n</parameter></function>`; values typed by the schema. */
function xmlCall(body: string, tools: readonly ToolSpec[]): ParsedToolCall | null {
  const fn = XML_FUNCTION.exec(body);
  const name = asToolName(fn?.[1]);
  if (!fn || name === null) return null;
  const args: Record<string, unknown> = {};
  for (const [, key, raw] of fn[2]!.matchAll(XML_PARAMETER)) {
    const type = propertyType(tools, name, key!);
    const text = raw!;
    let value: unknown = text;
    if (type === "integer" || type === "number") value = Number.isFinite(Number(text)) ? Number(text) : text;
    else if (type === "boolean")
      value = text.trim() === "true" ? true : text.trim() === "false" ? false : text;
    else if (type === "object" || type === "array" || type === "null") value = parseJsonLenient(text) ?? text;
    args[key!] = value;
  }
  return { id: newToolCallId(), name, arguments: jsonDumps(args) };
}

function fromHermes(output: string, tools: readonly ToolSpec[]): ToolCallParse | null {
  let start = -1;
  const calls: ParsedToolCall[] = [];
  for (const block of output.matchAll(HERMES_BLOCK)) {
    if (inReasoning(output, block.index)) continue;
    const body = block[1]!;
    let call = xmlCall(body, tools);
    if (call === null) {
      const object = jsonObjectsIn(body).next().value ?? undefined;
      const lenient = object ?? parseJsonLenient(body.slice(body.indexOf("{"), body.lastIndexOf("}") + 1));
      call = isRecord(lenient) ? callFromObject(lenient) : null;
    }
    if (call === null) continue;
    if (start === -1) start = block.index;
    calls.push(call);
  }
  return calls.length > 0 ? { start, calls } : null;
}

function fromPythonCalls(calls: readonly PythonCall[] | null): ParsedToolCall[] {
  return (calls ?? []).map((c) => ({ id: newToolCallId(), name: c.name, arguments: jsonDumps(c.args) }));
}

/** Llama 3: `<|python_tag|>{"name": ..., "parameters": ...}` (`;`-separated) or `func(k=v)`. */
function fromPythonTag(output: string): ToolCallParse | null {
  let at = output.indexOf(PYTHON_TAG);
  while (at !== -1 && inReasoning(output, at)) at = output.indexOf(PYTHON_TAG, at + 1);
  if (at === -1) return null;
  const rest = output.slice(at + PYTHON_TAG.length).trimStart();
  const calls = rest.startsWith("{")
    ? [...jsonObjectsIn(rest)].map(callFromObject).filter((c) => c !== null)
    : fromPythonCalls([parsePythonCall(rest)].filter((c) => c !== null));
  return calls.length > 0 ? { start: at, calls } : null;
}

/** The answer part (after reasoning) of the output, and where it starts. */
function answerOf(output: string): { text: string; start: number } {
  const answer = stripReasoning(output);
  const start = output.length - answer.length;
  // stripReasoning keeps the tail verbatim when the answer follows the reasoning; otherwise no offset.
  return output.endsWith(answer) ? { text: answer, start } : { text: answer, start: -1 };
}

/** Untagged Llama 3 JSON: the whole answer is call objects of offered tools. */
function fromPlainJson(output: string, tools: readonly ToolSpec[]): ToolCallParse | null {
  const answer = answerOf(output);
  const trimmed = answer.text.trimStart();
  if (answer.start === -1 || !trimmed.startsWith("{")) return null;
  const calls: ParsedToolCall[] = [];
  for (const object of jsonObjectsIn(trimmed)) {
    const fn = isRecord(object["function"]) ? object["function"] : object;
    // Without these keys a JSON answer such as {"name": "Alice", "age": 3} is data, not a call.
    if (!("parameters" in fn || "arguments" in fn || object["type"] === "function")) return null;
    const call = callFromObject(object);
    if (call === null || !tools.some((t) => t.name === call.name)) return null;
    calls.push(call);
  }
  return calls.length > 0 ? { start: answer.start + answer.text.length - trimmed.length, calls } : null;
}

/** Llama 3.2/4 pythonic: the answer is `[f(k=v), ...]` of offered tools. */
function fromPythonicList(output: string, tools: readonly ToolSpec[]): ToolCallParse | null {
  const answer = answerOf(output);
  const trimmed = answer.text.trim();
  if (answer.start === -1 || !trimmed.startsWith("[") || !trimmed.endsWith("]")) return null;
  const calls = fromPythonCalls(parsePythonCallList(trimmed));
  if (calls.length === 0 || !calls.every((c) => tools.some((t) => t.name === c.name))) return null;
  return { start: answer.start + answer.text.length - answer.text.trimStart().length, calls };
}

/** The offered function that runs shell commands, and the parameter taking the command. */
export function bashTool(tools: readonly ToolSpec[]): { name: string; param: string } | null {
  for (const tool of tools) {
    const properties = isRecord(tool.parameters?.["properties"]) ? tool.parameters["properties"] : {};
    const stringParams = Object.entries(properties)
      .filter(
        ([, schema]) => isRecord(schema) && (schema["type"] === "string" || schema["type"] === undefined),
      )
      .map(([key]) => key);
    const param = COMMAND_PARAMS.find((p) => stringParams.includes(p));
    if (BASH_TOOL_NAMES.test(tool.name))
      return { name: tool.name, param: param ?? stringParams[0] ?? "command" };
    if (param === "command" || param === "cmd") {
      if (/bash|shell|command|terminal/i.test(`${tool.name}`)) return { name: tool.name, param };
    }
  }
  return null;
}

/** mini-swe-agent style: exactly one ```bash block in the answer, mapped onto the bash-like tool. */
function fromShellBlock(output: string, tools: readonly ToolSpec[]): ToolCallParse | null {
  const tool = bashTool(tools);
  if (tool === null) return null;
  const blocks = [...output.matchAll(SHELL_BLOCK)].filter((b) => !inReasoning(output, b.index));
  if (blocks.length !== 1) return null;
  const script = blocks[0]![1]!;
  if (headCommand(script) === null) return null;
  const call = { id: newToolCallId(), name: tool.name, arguments: jsonDumps({ [tool.param]: script }) };
  return { start: blocks[0]!.index, calls: [call] };
}

/**
 * The tool calls in `output`, or null when it makes none. `tools` are the functions the request
 * offered: untagged formats (plain JSON, pythonic lists) only count when they name one of them.
 */
export function parseToolCalls(output: string, tools: readonly ToolSpec[]): ToolCallParse | null {
  return (
    fromHermes(output, tools) ??
    fromPythonTag(output) ??
    fromPlainJson(output, tools) ??
    fromPythonicList(output, tools) ??
    fromShellBlock(output, tools)
  );
}

/**
 * Decides, while a completion streams, how much of it can be sent as plain content: everything
 * before the first place a tool call might start is; the rest is held until the output is complete.
 */
export class ToolCallStreamGate {
  private text = "";
  private sent = 0;
  private readonly markers: string[];

  /** `markers`: where the model's own call format starts a call, besides the formats read here */
  constructor(tools: readonly ToolSpec[], markers: readonly string[] = []) {
    this.markers = [HERMES_OPEN, PYTHON_TAG, ...markers];
    if (bashTool(tools) !== null) this.markers.push(SHELL_FENCE);
  }

  /** Adds generated text; returns the part that is safe to stream as content now. */
  push(delta: string): string {
    this.text += delta;
    const safe = this.safeLength();
    if (safe <= this.sent) return "";
    const out = this.text.slice(this.sent, safe);
    this.sent = safe;
    return out;
  }

  /** Length of the prefix that cannot be part of a call. */
  private safeLength(): number {
    // An answer opening with JSON or a list may be an untagged Llama call: hold it all.
    let answerStart = 0;
    for (const tag of this.text.matchAll(REASONING_CLOSE)) answerStart = tag.index + tag[0].length;
    if (/^\s*(?:[{[]|$)/.test(this.text.slice(answerStart))) return Math.max(answerStart, this.sent);
    let limit = this.text.length;
    for (const marker of this.markers) {
      const at = this.text.indexOf(marker);
      if (at !== -1) limit = Math.min(limit, at);
      // a marker may be cut by the end of the text so far: hold back a matching suffix
      for (let k = Math.min(marker.length - 1, this.text.length); k > 0; k--) {
        if (this.text.endsWith(marker.slice(0, k))) {
          limit = Math.min(limit, this.text.length - k);
          break;
        }
      }
    }
    return Math.max(limit, this.sent);
  }

  /** Text already streamed. */
  get sentLength(): number {
    return this.sent;
  }

  /** The output held back so far (from where a call may start). */
  get held(): string {
    return this.text.slice(this.sent);
  }
}

/** Where a Hermes call opens in `output`, also when the output was cut inside the opening tag itself. */
function hermesOpening(output: string): number {
  const at = output.indexOf(HERMES_OPEN);
  if (at !== -1) return at;
  const rest = output.trimStart();
  return rest.length > 0 && HERMES_OPEN.startsWith(rest) ? output.length - rest.length : -1;
}

const TRUNCATED_NAME = /^\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)(")?/;
const ARGUMENTS_KEY = /\s*,\s*"arguments"\s*:\s*/y;

/**
 * A Hermes call cut off before its end (max_tokens or the context ran out), as OpenAI-compatible servers
 * return one: the function (its name as far as generated, completed when one offered tool matches) and
 * the argument text generated so far (the whole arguments object once it closed). Null when the output
 * opens no call.
 */
export function parseTruncatedToolCall(output: string, tools: readonly ToolSpec[]): ToolCallParse | null {
  const start = hermesOpening(output);
  if (start === -1) return null;
  const body = output.slice(start + HERMES_OPEN.length);
  const named = TRUNCATED_NAME.exec(body);
  const prefix = named?.[1] ?? "";
  const matching = tools.filter((t) => (named?.[2] ? t.name === prefix : t.name.startsWith(prefix)));
  const name = matching.length === 1 ? matching[0]!.name : named?.[2] ? prefix : "";
  let args = "";
  if (named?.[2]) {
    ARGUMENTS_KEY.lastIndex = named[0].length;
    if (ARGUMENTS_KEY.test(body)) {
      const rest = body.slice(ARGUMENTS_KEY.lastIndex);
      const whole = leadingJsonObject(rest);
      args = whole ? jsonDumps(whole) : rest;
    }
  }
  return { start, calls: [{ id: newToolCallId(), name, arguments: args }] };
}
