/**
 * Anthropic's Messages API over a backend that has only Chat Completions (SGLang): the request goes as the
 * chat completion `serve` makes of it (messages-request.ts), and the backend's answer comes back in Messages'
 * shapes: its thinking, text and tool calls as content blocks (streamed as their events), the chat finish
 * reason as the stop reason (a stop sequence the backend does not name reads as end_turn), its usage with the
 * cached prompt tokens as cache reads.
 */
import type { SseFrame } from "../../gateway/backends/sse.js";
import { messagesUsage, thinkingBlock, toolUseBlock, toolUseId } from "../messages/messages-response.js";
import { BlockWriter, sseEvent } from "../messages/messages-stream.js";
import type { ChatReply } from "./chat-reply.js";
import { ChatReply as Reply } from "./chat-reply.js";

export interface MessageMeta {
  readonly id: string;
  readonly model: string;
}

function stopReasonOf(reply: ChatReply): "end_turn" | "tool_use" | "max_tokens" {
  if (reply.finishReason === "length") return "max_tokens";
  return reply.toolCalls.length > 0 ? "tool_use" : "end_turn";
}

const NO_USAGE = { promptTokens: 0, completionTokens: 0, cachedTokens: 0 };

/** A whole chat completion as a Messages response. */
export function messageFromChat(body: unknown, meta: MessageMeta) {
  const reply = new Reply();
  reply.whole(body);
  const calls = reply.toolCalls;
  return {
    id: meta.id,
    type: "message",
    role: "assistant",
    model: meta.model,
    content: [
      ...(reply.reasoning ? [thinkingBlock(reply.reasoning)] : []),
      ...(reply.content ? [{ type: "text", text: reply.content }] : []),
      ...calls.map(toolUseBlock),
    ],
    stop_reason: stopReasonOf(reply),
    stop_sequence: null,
    usage: messagesUsage(reply.usage ?? NO_USAGE),
  };
}

/** A streamed chat completion as the Messages API's events. */
export async function* messageEventsFromChat(
  frames: AsyncIterable<SseFrame>,
  meta: MessageMeta,
): AsyncGenerator<string> {
  yield sseEvent("message_start", {
    message: {
      id: meta.id,
      type: "message",
      role: "assistant",
      model: meta.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: messagesUsage(NO_USAGE),
    },
  });
  const reply = new Reply();
  const blocks = new BlockWriter();
  let openCall: number | null = null;
  for await (const frame of frames) {
    const delta = reply.chunk(frame.data);
    if (delta === null) continue;
    yield* blocks.thinking(delta.reasoning);
    yield* blocks.text(delta.content);
    for (const part of delta.argumentParts) if (part.index === openCall) yield* blocks.inputJson(part.part);
    for (const opened of delta.openedCalls) {
      openCall = opened.index;
      yield* blocks.toolUse(toolUseId(opened), opened.name);
      for (const part of delta.argumentParts)
        if (part.index === opened.index) yield* blocks.inputJson(part.part);
    }
  }
  yield* blocks.close();
  yield sseEvent("message_delta", {
    delta: { stop_reason: stopReasonOf(reply), stop_sequence: null },
    usage: messagesUsage(reply.usage ?? NO_USAGE),
  });
  yield sseEvent("message_stop", {});
}
