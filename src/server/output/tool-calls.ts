/**
 * Tool calls in a model's output as OpenAI `tool_calls`: the calls `src/tool-calls/parse-tool-call.ts`
 * reads, with ids and their arguments as JSON text typed by the offered tools' schemas; a single ```bash
 * block is a call of the bash-like function when one is offered. Streaming holds back what may be a call.
 */
import { randomUUID } from "node:crypto";
import { isRecord, leadingJsonObject, parseJsonLenient } from "../../tool-calls/json-objects.js";
import {
  HERMES_OPEN,
  hermesCalls,
  jsonCalls,
  PYTHON_TAG,
  pythonicCalls,
  pythonTagCalls,
  shellBlock,
  type WrittenArguments,
  type WrittenToolCall,
} from "../../tool-calls/parse-tool-call.js";
import { headCommand } from "../../tool-calls/shell-head-command.js";

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

const SHELL_FENCE = "```";
const REASONING_CLOSE = /<\/think(?:ing)?>/gi;
const BASH_TOOL_NAMES =
  /^(?:bash|sh|shell|terminal|run_?shell|run_?bash|execute_?bash|run_?command|execute_?command|exec)$/i;
const COMMAND_PARAMS = ["command", "cmd", "script", "code", "commands", "input"];

export function newToolCallId(): string {
  return `call_${randomUUID().replace(/-/g, "").slice(0, 24)}`;
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

/** The JSON-schema type a tool gives a parameter; undefined where it gives none. */
export function propertyType(tools: readonly ToolSpec[], tool: string, param: string): unknown {
  const properties = tools.find((t) => t.name === tool)?.parameters?.["properties"];
  const schema = isRecord(properties) ? properties[param] : undefined;
  return isRecord(schema) ? schema["type"] : undefined;
}

/** Qwen3-Coder's parameter texts, typed by the tool's schema. */
function xmlArguments(
  tool: string,
  params: readonly (readonly [string, string])[],
  tools: readonly ToolSpec[],
): string {
  const args: Record<string, unknown> = {};
  for (const [key, text] of params) {
    const type = propertyType(tools, tool, key);
    let value: unknown = text;
    if (type === "integer" || type === "number") value = Number.isFinite(Number(text)) ? Number(text) : text;
    else if (type === "boolean")
      value = text.trim() === "true" ? true : text.trim() === "false" ? false : text;
    else if (type === "object" || type === "array" || type === "null") value = parseJsonLenient(text) ?? text;
    args[key] = value;
  }
  return jsonDumps(args);
}

function argumentsText(tool: string, written: WrittenArguments, tools: readonly ToolSpec[]): string | null {
  if (written.kind === "value") return argumentsJson(written.value);
  if (written.kind === "xml") return xmlArguments(tool, written.params, tools);
  return null;
}

/**
 * The call with an id and its arguments as JSON text; null when it names no tool or its arguments are not
 * an object.
 */
function shaped(call: WrittenToolCall, tools: readonly ToolSpec[]): ParsedToolCall | null {
  if (call.name === null) return null;
  const args = argumentsText(call.name, call.arguments, tools);
  return args === null ? null : { id: newToolCallId(), name: call.name, arguments: args };
}

/** A tagged format: the calls that read, from the first of them. */
function tagged(written: readonly WrittenToolCall[], tools: readonly ToolSpec[]): ToolCallParse | null {
  let start = -1;
  const calls: ParsedToolCall[] = [];
  for (const call of written) {
    const parsed = shaped(call, tools);
    if (parsed === null) continue;
    if (start === -1) start = call.at;
    calls.push(parsed);
  }
  return calls.length > 0 ? { start, calls } : null;
}

/** An untagged format (plain JSON, pythonic list): calls only when each reads and names an offered tool. */
function untagged(written: readonly WrittenToolCall[], tools: readonly ToolSpec[]): ToolCallParse | null {
  const calls: ParsedToolCall[] = [];
  for (const call of written) {
    const parsed = shaped(call, tools);
    if (parsed === null || !tools.some((t) => t.name === parsed.name)) return null;
    calls.push(parsed);
  }
  return calls.length > 0 ? { start: written[0]!.at, calls } : null;
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
  const block = tool === null ? null : shellBlock(output);
  if (tool === null || block === null || headCommand(block.script) === null) return null;
  const call = { id: newToolCallId(), name: tool.name, arguments: jsonDumps({ [tool.param]: block.script }) };
  return { start: block.at, calls: [call] };
}

/**
 * The tool calls in `output`, or null when it makes none. `tools` are the functions the request
 * offered: untagged formats (plain JSON, pythonic lists) only count when they name one of them.
 */
export function parseToolCalls(output: string, tools: readonly ToolSpec[]): ToolCallParse | null {
  return (
    tagged(hermesCalls(output), tools) ??
    tagged(pythonTagCalls(output), tools) ??
    untagged(jsonCalls(output), tools) ??
    untagged(pythonicCalls(output), tools) ??
    fromShellBlock(output, tools)
  );
}

/** Where a model's own call format may start a call in a streamed answer. */
export interface CallMarkers {
  /** wherever they stand */
  readonly markers: readonly string[];
  /**
   * For a format whose answer opens with its first message's recipient (the generation prompt wrote the
   * header up to it): how an answer opens that is text. One that opens otherwise, or not yet, is held.
   */
  readonly contentOpenings?: readonly string[];
}

/**
 * Decides, while a completion streams, how much of it can be sent as plain content: everything
 * before the first place a tool call might start is; the rest is held until the output is complete.
 */
export class ToolCallStreamGate {
  private text = "";
  private sent = 0;
  private readonly markers: string[];
  private readonly contentOpenings: readonly string[] | undefined;

  /** `own`: where the model's own call format starts a call, besides the formats read here */
  constructor(tools: readonly ToolSpec[], own: CallMarkers = { markers: [] }) {
    this.markers = [HERMES_OPEN, PYTHON_TAG, ...own.markers];
    if (bashTool(tools) !== null) this.markers.push(SHELL_FENCE);
    this.contentOpenings = own.contentOpenings;
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
    // An answer opening with JSON or a list may be an untagged Llama call, one opening with a message's
    // header a call in the model's own format: hold it all.
    let answerStart = 0;
    for (const tag of this.text.matchAll(REASONING_CLOSE)) answerStart = tag.index + tag[0].length;
    const answer = this.text.slice(answerStart);
    if (/^\s*(?:[{[]|$)/.test(answer) || this.opensWithCall(answer)) return Math.max(answerStart, this.sent);
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

  /** Whether the answer opens with a call's header: none of the format's openings of text (yet). */
  private opensWithCall(answer: string): boolean {
    return this.contentOpenings?.some((opening) => answer.startsWith(opening)) === false;
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
