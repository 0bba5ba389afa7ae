/**
 * A generation as the Anthropic Messages API streams it: message_start, ping, then each content block
 * (content_block_start, its thinking_delta, text_delta or input_json_delta events, content_block_stop),
 * message_delta with the stop reason and usage, message_stop. Thinking and tool calls are read as chat
 * completions read them.
 */
import { type ChatGeneration, outputStream, readOutput, toolCallGate } from "./chat-output.js";
import { toApiError } from "./errors.js";
import { anthropicErrorBody } from "./messages-errors.js";
import {
  messagesUsage,
  stopReason,
  stopSequence,
  THINKING_SIGNATURE,
  toolUseId,
} from "./messages-response.js";
import { StreamedToolCall } from "./streamed-tool-call.js";

export function sseEvent(type: string, payload: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...payload })}\n\n`;
}

export interface MessageMeta {
  readonly id: string;
  readonly model: string;
}

/** Opens, fills and closes content blocks, numbering them in order. */
class BlockWriter {
  private next = 0;
  private open: "thinking" | "text" | "tool_use" | null = null;

  /** `thinking` into the open thinking block, opening one first (thinking comes before any other block). */
  *thinking(thinking: string): Generator<string> {
    if (thinking.length === 0) return;
    if (this.open !== "thinking") {
      yield* this.close();
      yield this.start({ type: "thinking", thinking: "", signature: "" }, "thinking");
    }
    yield sseEvent("content_block_delta", {
      index: this.next - 1,
      delta: { type: "thinking_delta", thinking },
    });
  }

  /** `text` into the open text block, first closing any other block and opening a text block. */
  *text(text: string): Generator<string> {
    if (text.length === 0) return;
    if (this.open !== "text") {
      yield* this.close();
      yield this.start({ type: "text", text: "" }, "text");
    }
    yield sseEvent("content_block_delta", { index: this.next - 1, delta: { type: "text_delta", text } });
  }

  *toolUse(id: string, name: string): Generator<string> {
    yield* this.close();
    yield this.start({ type: "tool_use", id, name, input: {} }, "tool_use");
  }

  *inputJson(partial: string): Generator<string> {
    if (partial.length === 0) return;
    yield sseEvent("content_block_delta", {
      index: this.next - 1,
      delta: { type: "input_json_delta", partial_json: partial },
    });
  }

  *close(): Generator<string> {
    if (this.open === null) return;
    if (this.open === "thinking") {
      yield sseEvent("content_block_delta", {
        index: this.next - 1,
        delta: { type: "signature_delta", signature: THINKING_SIGNATURE },
      });
    }
    this.open = null;
    yield sseEvent("content_block_stop", { index: this.next - 1 });
  }

  private start(block: Record<string, unknown>, kind: "thinking" | "text" | "tool_use"): string {
    this.open = kind;
    return sseEvent("content_block_start", { index: this.next++, content_block: block });
  }
}

export async function* messagesStreamEvents(
  choice: ChatGeneration,
  meta: MessageMeta,
): AsyncGenerator<string> {
  const { generation } = choice;
  // The engine reports how much of the prompt was cached only when done: message_start carries zeros
  // and message_delta the message's totals (Anthropic's clients overwrite usage with them).
  const emptyUsage = messagesUsage({ promptTokens: 0, completionTokens: 0, cachedTokens: 0 });
  const gate = toolCallGate(choice);
  const live = gate ? new StreamedToolCall() : null;
  const blocks = new BlockWriter();
  const thinking = outputStream(choice);
  // the answer's characters out as text so far
  let streamed = 0;
  try {
    yield sseEvent("message_start", {
      message: {
        ...meta,
        type: "message",
        role: "assistant",
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: emptyUsage,
      },
    });
    yield sseEvent("ping", {});
    for await (const event of generation.events()) {
      if (event.type === "delta") {
        const { reasoning, answer } = thinking.push(event.text);
        yield* blocks.thinking(reasoning);
        const text = gate ? gate.push(answer) : answer;
        streamed += text.length;
        yield* blocks.text(text);
        if (gate && live) {
          const { opened, args } = live.push(gate.held);
          if (opened) yield* blocks.toolUse(toolUseId(live), live.name as string);
          yield* blocks.inputJson(args);
        }
        continue;
      }
      yield* blocks.thinking(thinking.finish().reasoning);
      // A call already announced is a call, even when the output ended before it closed.
      const cut = event.finishReason !== "stop" || live?.opened === true;
      const { calls, contentEnd, answerStart } = readOutput(event.text, choice, cut);
      const from = answerStart + streamed;
      yield* blocks.text(event.text.slice(from, Math.max(contentEnd, from)));
      for (const [index, call] of calls.entries()) {
        if (index === 0 && gate && live?.opened) {
          yield* blocks.inputJson(live.finish(gate.held));
          continue;
        }
        yield* blocks.toolUse(toolUseId(call), call.name);
        yield* blocks.inputJson(call.arguments);
      }
      yield* blocks.close();
      yield sseEvent("message_delta", {
        delta: { stop_reason: stopReason(event, calls), stop_sequence: stopSequence(event, calls) },
        usage: messagesUsage(event.usage),
      });
      yield sseEvent("message_stop", {});
    }
  } catch (error) {
    yield sseEvent("error", anthropicErrorBody(toApiError(error)));
  }
}
