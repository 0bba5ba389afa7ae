/**
 * A chat request's output as every API reads it: the tools it may call, its generation, and a finished
 * output split into a reasoning model's thinking, the answer's content and its tool calls.
 */

import type { DoneEvent, Generation } from "../generation/generation.js";
import { openAIFinishReason } from "../generation/generation.js";
import type { ToolInput } from "../schemas.js";
import type { ReplyMemory } from "../templates/generated-replies.js";
import { HARMONY_MESSAGES } from "./harmony.js";
import { type MessageSyntax, messagesIn, readMessageText } from "./output-messages.js";
import { answerEnd, splitReasoning, type ThinkTags } from "./reasoning.js";
import { isRecipientFormat, recipientMessages } from "./recipient-formats.js";
import { messageCalls, parseToolCallsAs, type ToolCallFormat } from "./tool-call-formats.js";
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
  if (!writesMessages(format)) tools.replies?.remember(text, content, calls);
  return { content: content.length > 0 ? content : null, calls, contentEnd };
}

/**
 * An output read as its messages: the thinking's and the answer's bodies, and the calls written as messages
 * to functions. A reply with calls is not remembered (see writesMessages).
 */
function readMessages(text: string, syntax: MessageSyntax, tools: ToolSetup, format: ToolCallFormat) {
  const calls = tools.parseFor.length > 0 ? messageCalls(format, text, tools.parseFor) : [];
  return {
    ...readMessageText(text, messagesIn(text, syntax)),
    calls: tools.parallel ? calls : calls.slice(0, 1),
  };
}

/**
 * A finished output as every API reads it: a reasoning model's thinking (when the choice's output is
 * split), then its answer's content and tool calls (splitOutput); or its messages, for a format that writes
 * them (outputMessagesOf).
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
  const messages = outputMessagesOf({ format, insideThinking });
  if (messages !== null) return readMessages(text, messages, tools, format);
  const { reasoning, answerStart } = splitReasoning(text, insideThinking, thinkTags);
  // the answer's own closing tag, where the model writes one, ends the content (not in text as generated)
  const closed = insideThinking === null ? text.length : answerEnd(text, answerStart, thinkTags);
  return { reasoning, answerStart, ...splitOutput(text, tools, format, truncated, answerStart, closed) };
}

/**
 * Whether a format writes a turn as messages (harmony, the recipient formats). Its template writes a reply
 * sent back as the text of one message to the user, not as the messages the model wrote, so such a reply is
 * not remembered: the template writes its calls the way the model did.
 */
function writesMessages(format: ToolCallFormat): boolean {
  return format === "harmony" || isRecipientFormat(format);
}

/**
 * The messages the output is read as: harmony's and the recipient formats', a thinking model's only where
 * its thinking is split (not `--reasoning-format none`, which keeps it in the text); null: read as text.
 */
export function outputMessagesOf({
  format,
  insideThinking,
}: Pick<ChatGeneration, "format" | "insideThinking">): MessageSyntax | null {
  const split = insideThinking !== null;
  if (format === "harmony") return split ? HARMONY_MESSAGES : null;
  return isRecipientFormat(format) ? recipientMessages(format, split) : null;
}

export function finishReason(done: DoneEvent, calls: readonly ParsedToolCall[]): string {
  return calls.length > 0 && done.finishReason === "stop"
    ? "tool_calls"
    : openAIFinishReason(done.finishReason);
}
