/**
 * A backend's chat completion as the gateway translates it into another API (the Responses API) or remembers
 * it (the reply an implicit program's next turn repeats): its thinking, text, tool calls, finish reason and
 * usage, gathered from the streamed chunks (each delta passed on as it comes) or from the whole answer.
 */
import type { GenerateUsage } from "../../engine/engine-api.js";
import type { ParsedToolCall } from "../output/tool-calls.js";

type Json = Record<string, unknown>;

function objectOf(value: unknown): Json | null {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : null;
}

/** What one streamed chunk added. */
export interface ChatDelta {
  readonly reasoning: string;
  readonly content: string;
  /** calls whose first fragment came in this chunk (id and name), in order */
  readonly openedCalls: readonly { readonly index: number; readonly id: string; readonly name: string }[];
  /** argument fragments by call index */
  readonly argumentParts: readonly { readonly index: number; readonly part: string }[];
}

interface CallParts {
  id: string;
  name: string;
  arguments: string;
}

export class ChatReply {
  reasoning = "";
  content = "";
  finishReason: string | null = null;
  usage: GenerateUsage | null = null;
  private readonly calls = new Map<number, CallParts>();

  get toolCalls(): ParsedToolCall[] {
    return [...this.calls.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, call]) => ({ id: call.id, name: call.name, arguments: call.arguments }));
  }

  /** The arguments of the call at `index` so far. */
  argumentsOf(index: number): string {
    return this.calls.get(index)?.arguments ?? "";
  }

  private readUsage(raw: unknown): void {
    const usage = objectOf(raw);
    if (!usage) return;
    const details = objectOf(usage["prompt_tokens_details"]);
    this.usage = {
      promptTokens: Number(usage["prompt_tokens"] ?? 0),
      completionTokens: Number(usage["completion_tokens"] ?? 0),
      cachedTokens: Number(details?.["cached_tokens"] ?? 0),
    };
  }

  /** One streamed chunk (its JSON); what it added. */
  chunk(data: string): ChatDelta | null {
    if (data === "[DONE]") return null;
    let parsed: Json | null;
    try {
      parsed = objectOf(JSON.parse(data));
    } catch {
      return null;
    }
    if (parsed === null) return null;
    if (parsed["usage"]) this.readUsage(parsed["usage"]);
    const choice = objectOf(Array.isArray(parsed["choices"]) ? parsed["choices"][0] : null);
    if (choice === null) return null;
    if (typeof choice["finish_reason"] === "string") this.finishReason = choice["finish_reason"];
    const delta = objectOf(choice["delta"]);
    const reasoningRaw = delta?.["reasoning_content"] ?? delta?.["reasoning"];
    const reasoning = typeof reasoningRaw === "string" ? reasoningRaw : "";
    const content = typeof delta?.["content"] === "string" ? delta["content"] : "";
    this.reasoning += reasoning;
    this.content += content;
    const openedCalls: { index: number; id: string; name: string }[] = [];
    const argumentParts: { index: number; part: string }[] = [];
    const calls = Array.isArray(delta?.["tool_calls"]) ? (delta["tool_calls"] as unknown[]) : [];
    for (const [position, raw] of calls.entries()) {
      const call = objectOf(raw);
      if (!call) continue;
      const index = typeof call["index"] === "number" ? call["index"] : position;
      const fn = objectOf(call["function"]);
      let parts = this.calls.get(index);
      if (!parts) {
        parts = {
          id: typeof call["id"] === "string" && call["id"] ? call["id"] : `call_${index}`,
          name: typeof fn?.["name"] === "string" ? fn["name"] : "",
          arguments: "",
        };
        this.calls.set(index, parts);
        openedCalls.push({ index, id: parts.id, name: parts.name });
      } else if (typeof fn?.["name"] === "string" && parts.name === "") {
        parts.name = fn["name"];
      }
      const part = fn?.["arguments"];
      if (typeof part === "string" && part.length > 0) {
        parts.arguments += part;
        argumentParts.push({ index, part });
      }
    }
    return { reasoning, content, openedCalls, argumentParts };
  }

  /** The whole answer (not streamed). */
  whole(body: unknown): void {
    const parsed = objectOf(body);
    if (!parsed) return;
    this.readUsage(parsed["usage"]);
    const choice = objectOf(Array.isArray(parsed["choices"]) ? parsed["choices"][0] : null);
    if (typeof choice?.["finish_reason"] === "string") this.finishReason = choice["finish_reason"];
    const message = objectOf(choice?.["message"]);
    const reasoning = message?.["reasoning_content"] ?? message?.["reasoning"];
    if (typeof reasoning === "string") this.reasoning = reasoning;
    if (typeof message?.["content"] === "string") this.content = message["content"];
    const calls = Array.isArray(message?.["tool_calls"]) ? (message["tool_calls"] as unknown[]) : [];
    for (const [index, raw] of calls.entries()) {
      const call = objectOf(raw);
      const fn = objectOf(call?.["function"]);
      const args = fn?.["arguments"];
      this.calls.set(index, {
        id: typeof call?.["id"] === "string" ? call["id"] : `call_${index}`,
        name: typeof fn?.["name"] === "string" ? fn["name"] : "",
        arguments: typeof args === "string" ? args : JSON.stringify(args ?? {}),
      });
    }
  }
}
