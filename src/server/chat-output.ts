/**
 * A chat request's output as every API reads it: the tools it may call, its generation, and a finished
 * output split into a reasoning model's thinking, the answer's content and its tool calls.
 */

import type { ReplyMemory } from "./generated-replies.js";
import type { DoneEvent, Generation } from "./generation.js";
import { openAIFinishReason } from "./generation.js";
import { readHarmony } from "./harmony.js";
import { answerEnd, splitReasoning, type ThinkTags } from "./reasoning.js";
import type { ToolInput } from "./schemas.js";
import { parseToolCallsAs, type ToolCallFormat } from "./tool-call-formats.js";
import { type ParsedToolCall, parseTruncatedToolCall, type ToolSpec } from "./tool-calls.js";

export interface ToolSetup {
  /** offered functions the output may call; empty: no tool-call parsing */
  readonly parseFor: readonly ToolSpec[];
  readonly rendered: readonly ToolInput[];
  readonly grammar: string | null;
  readonly parallel: boolean;
  /** where a reply with tool calls is remembered, to render it back as generated (generated-replies.ts) */
  readonly replies: ReplyMemory | null;
}

/** A chat request under way: its tools, the template's tool-call format, and the queued generation. */
export interface ChatGeneration {
  readonly tools: ToolSetup;
  readonly format: ToolCallFormat;
  readonly requestId: string;
  readonly generation: Generation;
  /**
   * With `splitsReasoning`: whether the prompt left a thinking block open (the output starts inside it);
   * null: the output is not split
   */
  readonly insideThinking: boolean | null;
  /** the tags the model's thinking stands between */
  readonly thinkTags: ThinkTags;
}

export function toolCallsJson(calls: readonly ParsedToolCall[]) {
  return calls.map((call) => ({
    id: call.id,
    type: "function" as const,
    function: { name: call.name, arguments: call.arguments },
  }));
}

/**
 * Content and tool calls of a finished output, its answer from `answerStart` on (past a reasoning model's
 * thinking), its content ending by `closed` (the answer's own closing tag). A call cut off by max_tokens or
 * the context (`truncated`) comes back as a call with the arguments generated so far, never as markup in the
 * content.
 */
function splitOutput(
  text: string,
  tools: ToolSetup,
  format: ToolCallFormat,
  truncated: boolean,
  answerStart: number,
  closed: number,
): { content: string | null; calls: ParsedToolCall[]; contentEnd: number } {
  const parse = (output: string, specs: readonly ToolSpec[]) =>
    parseToolCallsAs(format, output, specs) ?? (truncated ? parseTruncatedToolCall(output, specs) : null);
  const answer = text.slice(answerStart);
  const parsed = tools.parseFor.length > 0 ? parse(answer, tools.parseFor) : null;
  if (parsed === null) return { content: text.slice(answerStart, closed), calls: [], contentEnd: closed };
  const calls = tools.parallel ? [...parsed.calls] : parsed.calls.slice(0, 1);
  const contentEnd = Math.min(answerStart + parsed.start, closed);
  const content = text.slice(answerStart, contentEnd).trim();
  // the whole output is what the model generated: a reply sent back renders as it, its thinking included
  tools.replies?.remember(text, content, calls);
  return { content: content.length > 0 ? content : null, calls, contentEnd };
}

/**
 * A finished output as every API reads it: a reasoning model's thinking (when the choice's output is
 * split), then its answer's content and tool calls (splitOutput).
 */
export function readOutput(
  text: string,
  {
    tools,
    format,
    insideThinking,
    thinkTags,
  }: Pick<ChatGeneration, "tools" | "format" | "insideThinking" | "thinkTags">,
  truncated: boolean,
) {
  if (readsHarmony({ format, insideThinking })) return readHarmony(text, tools.parseFor, tools.parallel);
  const { reasoning, answerStart } = splitReasoning(text, insideThinking, thinkTags);
  // the answer's own closing tag, where the model writes one, ends the content (not in text as generated)
  const closed = insideThinking === null ? text.length : answerEnd(text, answerStart, thinkTags);
  return { reasoning, answerStart, ...splitOutput(text, tools, format, truncated, answerStart, closed) };
}

/** Whether the output is read as harmony (gpt-oss's), its thinking split (not `--reasoning-format none`). */
export function readsHarmony({
  format,
  insideThinking,
}: Pick<ChatGeneration, "format" | "insideThinking">): boolean {
  return format === "harmony" && insideThinking !== null;
}

export function finishReason(done: DoneEvent, calls: readonly ParsedToolCall[]): string {
  return calls.length > 0 && done.finishReason === "stop"
    ? "tool_calls"
    : openAIFinishReason(done.finishReason);
}
