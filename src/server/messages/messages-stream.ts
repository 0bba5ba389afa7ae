/**
 * A generation as the Anthropic Messages API streams it: message_start, ping, then each content block
 * (content_block_start, its thinking_delta, text_delta or input_json_delta events, content_block_stop),
 * message_delta with the stop reason and usage, message_stop. Thinking and tool calls are read as chat
 * completions read them.
 */
import type { GenerateEvent, GenerateUsage } from "../../engine/engine-api.js";
import { toApiError } from "../errors.js";
import type { ChatGeneration } from "../output/chat-output.js";
import { ChoiceStream } from "../output/choice-stream.js";
import { anthropicErrorBody } from "./messages-errors.js";
import {
  messagesUsage,
  stopReason,
  stopSequence,
  THINKING_SIGNATURE,
  toolUseId,
} from "./messages-response.js";

export function sseEvent(type: string, payload: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...payload })}\n\n`;
}

export interface MessageMeta {
  readonly id: string;
  readonly model: string;
}

/** Opens, fills and closes content blocks, numbering them in order. */
export class BlockWriter {
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

/**
 * The stream's events. `message_start` carries the prompt's usage, as Anthropic's does (LangChain's
 * streaming ChatAnthropic reads the input and cached tokens only there): it goes out once the engine has
 * counted the prompt's cached tokens (its first step ran), the events before that held back;
 * `message_delta` then carries the message's totals, which Anthropic's clients keep.
 */
export async function* messagesStreamEvents(
  choice: ChatGeneration,
  meta: MessageMeta,
): AsyncGenerator<string> {
  const { generation } = choice;
  const blocks = new BlockWriter();
  const stream = new ChoiceStream(choice);
  const held: GenerateEvent[] = [];
  let started = false;
  const messageStart = (usage: GenerateUsage) =>
    sseEvent("message_start", {
      message: {
        ...meta,
        type: "message",
        role: "assistant",
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: messagesUsage(usage),
      },
    });
  try {
    for await (const event of generation.events()) {
      if (!started) {
        const prompt = event.type === "delta" ? event.promptUsage : event.usage;
        if (prompt === undefined) {
          held.push(event);
          continue;
        }
        started = true;
        // the output is counted in message_delta
        yield messageStart({ ...prompt, completionTokens: 0 });
        yield sseEvent("ping", {});
        for (const early of held.splice(0)) yield* eventFrames(early, blocks, stream);
      }
      yield* eventFrames(event, blocks, stream);
    }
  } catch (error) {
    yield sseEvent("error", anthropicErrorBody(toApiError(error)));
  }
}

/** The content-block events of one engine event; the done event closes the message. */
function* eventFrames(event: GenerateEvent, blocks: BlockWriter, stream: ChoiceStream): Generator<string> {
  if (event.type === "delta") {
    const { reasoning, text, opened, args } = stream.push(event.text);
    yield* blocks.thinking(reasoning);
    yield* blocks.text(text);
    if (opened) yield* blocks.toolUse(toolUseId(opened), opened.name);
    yield* blocks.inputJson(args);
    return;
  }
  const { reasoning, rest, calls, liveArgs } = stream.finish(event);
  yield* blocks.thinking(reasoning);
  yield* blocks.text(rest);
  for (const [index, call] of calls.entries()) {
    if (index === 0 && liveArgs !== null) {
      yield* blocks.inputJson(liveArgs);
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
