/** The engine's output in the Anthropic Messages API's shapes: content blocks, stop reason, usage. */

import type { GenerateUsage } from "../../engine/engine-api.js";
import { parseJsonLenient } from "../../tool-calls/json-objects.js";
import type { DoneEvent } from "../generation/generation.js";
import type { ParsedToolCall } from "../output/tool-calls.js";

export interface MessagesUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens: number;
  cache_creation_input_tokens: number;
}

/**
 * Anthropic counts input_tokens without the cached ones: the prompt tokens whose KV was reused are
 * cache reads. Cache creation is always 0: reused KV is whatever the engine still holds from earlier
 * requests, and no request pays for writing a separate cache.
 */
export function messagesUsage(usage: GenerateUsage): MessagesUsage {
  return {
    input_tokens: usage.promptTokens - usage.cachedTokens,
    output_tokens: usage.completionTokens,
    cache_read_input_tokens: usage.cachedTokens,
    cache_creation_input_tokens: 0,
  };
}

export type StopReason = "end_turn" | "tool_use" | "max_tokens" | "stop_sequence";

export function stopReason(done: DoneEvent, calls: readonly ParsedToolCall[]): StopReason {
  if (done.finishReason === "length" || done.finishReason === "kv_capacity") return "max_tokens";
  if (calls.length > 0) return "tool_use";
  return done.stopSequence ? "stop_sequence" : "end_turn";
}

/** The stop sequence that ended the reply (Anthropic's `stop_sequence`), or null. */
export function stopSequence(done: DoneEvent, calls: readonly ParsedToolCall[]): string | null {
  return stopReason(done, calls) === "stop_sequence" ? (done.stopSequence ?? null) : null;
}

/**
 * A thinking block's `signature`: Anthropic's clients keep it and send it back with the block; this
 * server signs nothing, and drops thinking blocks it is sent (the reply they belong to renders as generated).
 */
export const THINKING_SIGNATURE = "";

/** Anthropic's thinking block of a reasoning model's thinking. */
export function thinkingBlock(thinking: string) {
  return { type: "thinking" as const, thinking, signature: THINKING_SIGNATURE };
}

/** Anthropic's tool-use id for a parsed call, the same whether it was streamed or not. */
export function toolUseId(call: { readonly id: string }): string {
  return `toolu_${call.id.replace(/^call_/, "")}`;
}

/** A call's arguments as an input object; arguments cut off mid-JSON give what parses, else {}. */
export function toolInput(args: string): Record<string, unknown> {
  const parsed = parseJsonLenient(args);
  return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)
    ? (parsed as Record<string, unknown>)
    : {};
}

export function toolUseBlock(call: ParsedToolCall) {
  return {
    type: "tool_use" as const,
    id: toolUseId(call),
    name: call.name,
    input: toolInput(call.arguments),
  };
}
