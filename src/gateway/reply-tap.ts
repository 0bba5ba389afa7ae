/**
 * What the gateway reads of a backend's answer as it passes through: each streamed token (a chunk that carries
 * text, thinking or a call), the first call's tool name, the answer's text, and its usage at the end (prompt,
 * output and cached tokens as the backend counted them). Chat Completions, Completions and Messages, streamed
 * or whole.
 */
import { readSse, type SseFrame } from "./backends/sse.js";
import type { BackendApi } from "./turn.js";

export interface ReplyUsage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** prompt tokens the backend reused from its cache; null when it does not say (vLLM without prompt tokens details) */
  readonly cachedTokens: number | null;
}

export interface TapListener {
  /** a streamed token arrived (or, for a whole answer, all of them at its end) */
  onTokens(count: number): void;
  /** the answer ended: whole (null), or cut or refused (why) */
  onEnd(error: string | null): void;
}

type Json = Record<string, unknown>;

function objectOf(value: unknown): Json | null {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : null;
}

function count(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : null;
}

function openAiUsage(raw: unknown): ReplyUsage | null {
  const usage = objectOf(raw);
  if (usage === null) return null;
  const prompt = count(usage["prompt_tokens"]);
  const completion = count(usage["completion_tokens"]);
  if (prompt === null || completion === null) return null;
  const details = objectOf(usage["prompt_tokens_details"]);
  return {
    promptTokens: prompt,
    completionTokens: completion,
    cachedTokens: count(details?.["cached_tokens"]),
  };
}

export class ReplyTap {
  /** streamed chunks that carried output */
  tokensSeen = 0;
  text = "";
  toolName: string | null = null;
  usage: ReplyUsage | null = null;
  /** Anthropic's usage arrives in parts: input at message_start, output at message_delta */
  private messagesInput: { prompt: number; cached: number | null } | null = null;
  private messagesOutput: number | null = null;

  constructor(
    readonly api: BackendApi,
    private readonly listener: TapListener,
  ) {}

  /** One streamed frame's data (JSON), and its SSE event name (Messages). Returns true for a usage-only chunk. */
  frame(event: string | null, data: string): boolean {
    if (data === "[DONE]") return false;
    let parsed: Json | null;
    try {
      parsed = objectOf(JSON.parse(data));
    } catch {
      return false;
    }
    if (parsed === null) return false;
    if (this.api === "messages") {
      this.messagesFrame(event ?? String(parsed["type"] ?? ""), parsed);
      return false;
    }
    const usage = openAiUsage(parsed["usage"]);
    if (usage !== null) this.usage = usage;
    const choices = parsed["choices"];
    if (!Array.isArray(choices) || choices.length === 0) return usage !== null;
    const choice = objectOf(choices[0]);
    if (this.api === "completions") {
      const text = choice?.["text"];
      if (typeof text === "string" && text.length > 0) this.token(text);
      return false;
    }
    const delta = objectOf(choice?.["delta"]);
    const content = delta?.["content"];
    const reasoning = delta?.["reasoning_content"] ?? delta?.["reasoning"];
    const calls = delta?.["tool_calls"];
    let carries = false;
    if (typeof content === "string" && content.length > 0) {
      this.text += content;
      carries = true;
    }
    if (typeof reasoning === "string" && reasoning.length > 0) carries = true;
    if (Array.isArray(calls) && calls.length > 0) {
      carries = true;
      const name = objectOf(objectOf(calls[0])?.["function"])?.["name"];
      if (this.toolName === null && typeof name === "string" && name) this.toolName = name;
    }
    if (carries) this.token("");
    return false;
  }

  private token(text: string): void {
    this.text += text;
    this.tokensSeen++;
    this.listener.onTokens(1);
  }

  private messagesFrame(type: string, parsed: Json): void {
    if (type === "message_start") {
      const usage = objectOf(objectOf(parsed["message"])?.["usage"]);
      this.readMessagesInput(usage);
    } else if (type === "content_block_start") {
      const block = objectOf(parsed["content_block"]);
      if (block?.["type"] === "tool_use" && this.toolName === null && typeof block["name"] === "string")
        this.toolName = block["name"];
    } else if (type === "content_block_delta") {
      const delta = objectOf(parsed["delta"]);
      this.token(typeof delta?.["text"] === "string" ? delta["text"] : "");
    } else if (type === "message_delta") {
      const usage = objectOf(parsed["usage"]);
      this.messagesOutput = count(usage?.["output_tokens"]) ?? this.messagesOutput;
      if (usage && count(usage["input_tokens"]) !== null) this.readMessagesInput(usage);
      this.settleMessagesUsage();
    }
  }

  /** Anthropic counts input apart from what it read from cache: the prompt is their sum. */
  private readMessagesInput(usage: Json | null): void {
    const input = count(usage?.["input_tokens"]);
    if (input === null) return;
    const read = count(usage?.["cache_read_input_tokens"]);
    const created = count(usage?.["cache_creation_input_tokens"]) ?? 0;
    this.messagesInput = { prompt: input + (read ?? 0) + created, cached: read };
  }

  private settleMessagesUsage(): void {
    if (this.messagesInput === null || this.messagesOutput === null) return;
    this.usage = {
      promptTokens: this.messagesInput.prompt,
      completionTokens: this.messagesOutput,
      cachedTokens: this.messagesInput.cached,
    };
  }

  /** A whole (not streamed) answer. */
  whole(body: unknown): void {
    const parsed = objectOf(body);
    if (parsed === null) return;
    if (this.api === "messages") {
      const usage = objectOf(parsed["usage"]);
      this.readMessagesInput(usage);
      this.messagesOutput = count(usage?.["output_tokens"]);
      this.settleMessagesUsage();
      const blocks = Array.isArray(parsed["content"]) ? parsed["content"] : [];
      for (const raw of blocks) {
        const block = objectOf(raw);
        if (block?.["type"] === "text" && typeof block["text"] === "string") this.text += block["text"];
        if (block?.["type"] === "tool_use" && this.toolName === null && typeof block["name"] === "string")
          this.toolName = block["name"];
      }
    } else {
      this.usage = openAiUsage(parsed["usage"]);
      const choice = objectOf(Array.isArray(parsed["choices"]) ? parsed["choices"][0] : null);
      if (this.api === "completions") {
        if (typeof choice?.["text"] === "string") this.text = choice["text"];
      } else {
        const message = objectOf(choice?.["message"]);
        if (typeof message?.["content"] === "string") this.text = message["content"];
        const calls = message?.["tool_calls"];
        const name = Array.isArray(calls) ? objectOf(objectOf(calls[0])?.["function"])?.["name"] : undefined;
        if (typeof name === "string" && name) this.toolName = name;
      }
    }
    const tokens = this.usage?.completionTokens ?? (this.text.length > 0 ? 1 : 0);
    this.tokensSeen += tokens;
    if (tokens > 0) this.listener.onTokens(tokens);
  }

  get ended(): boolean {
    return this.endedWith !== undefined;
  }

  private endedWith: string | null | undefined = undefined;

  /** The answer is over: whole (null) or not (why). Only the first call counts. */
  end(error: string | null): void {
    if (this.endedWith !== undefined) return;
    this.endedWith = error;
    this.listener.onEnd(error);
  }

  /** Output tokens of the answer: its usage's count, else the chunks seen. */
  get outputTokens(): number {
    return this.usage?.completionTokens ?? this.tokensSeen;
  }
}

/**
 * A backend's stream, frame by frame, read by `tap` on the way; the usage-only chunk the gateway asked for is
 * left out when `dropUsageChunk` (the client did not ask for usage). Ends the tap however the stream ends.
 */
export async function* readSseTapped(
  body: ReadableStream<Uint8Array>,
  tap: ReplyTap,
  dropUsageChunk: boolean,
): AsyncGenerator<SseFrame> {
  try {
    for await (const frame of readSse(body)) {
      const usageOnly = tap.frame(frame.event, frame.data);
      if (!(usageOnly && dropUsageChunk)) yield frame;
    }
    tap.end(null);
  } catch (error) {
    tap.end(`the backend's stream broke: ${error instanceof Error ? error.message : String(error)}`);
    throw error;
  } finally {
    tap.end("the stream was left before its end");
  }
}
