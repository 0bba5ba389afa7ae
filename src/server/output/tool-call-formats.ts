/**
 * How a model writes tool calls, told from its chat template's text, and the parser for each way.
 * Hermes/Qwen `<tool_call>` JSON and Llama 3.1 JSON / `<|python_tag|>` are what `parseToolCalls`
 * already reads; Mistral, DeepSeek, Kimi K2, GLM and Gemma 4 write calls their own way and are parsed here
 * first, as are the formats whose calls stand between two markers (section-formats.ts) and those whose calls
 * are messages to the function (recipient-formats.ts).
 */

import { randomBytes } from "node:crypto";
import { isRecord, jsonObjectsIn, parseJsonLenient } from "../../tool-calls/json-objects.js";
import { stripReasoning } from "../../tool-calls/parse-tool-call.js";
import { asToolName } from "../../tool-calls/tool-name.js";
import { readNotationValue } from "./gemma-call-notation.js";
import { harmonyCalls, templateIsHarmony } from "./harmony.js";
import {
  isRecipientFormat,
  type RecipientFormatName,
  readRecipientCalls,
  recipientCallMarkers,
  recipientFormatOf,
  recipientMarkers,
} from "./recipient-formats.js";
import {
  isSectionFormat,
  readSections,
  type SectionFormatName,
  sectionFormatOf,
  sectionMarkers,
  sectionOpeners,
  type Typed,
  type WrittenCall,
} from "./section-formats.js";
import {
  type CallMarkers,
  jsonDumps,
  newToolCallId,
  type ParsedToolCall,
  parseToolCalls,
  propertyType,
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
  | RecipientFormatName
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

/** The format a template teaches its model, by the markers its text writes. */
export function detectToolCallFormat(template: string): ToolCallFormat {
  if (templateIsHarmony(template)) return "harmony";
  const recipient = recipientFormatOf(template);
  if (recipient !== null) return recipient;
  const section = sectionFormatOf(template);
  if (section !== null) return section;
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
    default:
      if (isRecipientFormat(format)) return recipientMarkers(format);
      return isSectionFormat(format) ? sectionMarkers(format) : [];
  }
}

/** Where a streamed output may start a call in this format (held back from content until known). */
export function toolCallMarkers(format: ToolCallFormat): CallMarkers {
  if (format === "mistral") return { markers: [MISTRAL_CALLS] };
  if (format === "deepseek") return { markers: [DEEPSEEK_CALLS, DEEPSEEK_CALL] };
  if (format === "kimi") return { markers: [KIMI_CALLS, KIMI_CALL] };
  if (format === "gemma") return { markers: ["<|tool_call>"] };
  if (isRecipientFormat(format)) return recipientCallMarkers(format);
  return { markers: isSectionFormat(format) ? sectionOpeners(format) : [] };
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

/** GLM 4.5+: `<tool_call>name\n<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n</tool_call>`. */
function fromGlm(output: string, tools: readonly ToolSpec[]): ToolCallParse | null {
  const from = answerStart(output);
  const typed = typedBy(tools);
  const calls: ParsedToolCall[] = [];
  let first = -1;
  for (const block of output.slice(from).matchAll(GLM_BLOCK)) {
    const name = asToolName(block[1]);
    if (name === null) continue;
    const args: Record<string, unknown> = {};
    for (const [, key, raw] of block[2]!.matchAll(GLM_ARG))
      args[key!.trim()] = typed(name, key!.trim(), raw!);
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

/** The written calls that read as calls, from where the first of them is written. */
function fromWritten(written: readonly WrittenCall[]): ToolCallParse | null {
  const calls: ParsedToolCall[] = [];
  let first = -1;
  for (const { at, name, args } of written) {
    const parsed = call(newToolCallId(), name, args);
    if (parsed === null) continue;
    if (first === -1) first = at;
    calls.push(parsed);
  }
  return calls.length > 0 ? { start: first, calls } : null;
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
    default:
      if (isSectionFormat(format))
        return fromWritten(readSections(output, answerStart(output), format, typedBy(tools)));
      if (isRecipientFormat(format)) return fromWritten(readRecipientCalls(output, format, typedBy(tools)));
      return null;
  }
}

/** The calls of an output read as messages (chat-output.ts): its messages to functions, and only those. */
export function messageCalls(
  format: ToolCallFormat,
  output: string,
  tools: readonly ToolSpec[],
): ParsedToolCall[] {
  if (format === "harmony") return harmonyCalls(output, tools);
  return [...(ownParse(format, output, tools)?.calls ?? [])];
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
