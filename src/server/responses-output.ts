/** The Responses API's response object and output items, from what a chat generation produced. */
import { randomUUID } from "node:crypto";
import type { GenerateUsage } from "../engine/engine-api.js";
import type { DoneEvent } from "./generation.js";
import type { FunctionTool, ResponsesBody } from "./responses-schema.js";
import type { ChatMessageInput } from "./schemas.js";
import type { ParsedToolCall } from "./tool-calls.js";

export type ResponseStatus = "in_progress" | "completed" | "incomplete";

export interface MessageItem {
  readonly type: "message";
  readonly id: string;
  readonly role: "assistant";
  readonly status: ResponseStatus;
  readonly content: { type: "output_text"; text: string; annotations: [] }[];
}

export interface FunctionCallItem {
  readonly type: "function_call";
  readonly id: string;
  readonly call_id: string;
  readonly name: string;
  readonly arguments: string;
  readonly status: ResponseStatus;
}

export type OutputItem = MessageItem | FunctionCallItem;

/** What every response object of one request repeats from the request. */
export interface ResponseMeta {
  readonly id: string;
  readonly created_at: number;
  readonly model: string;
  readonly tools: readonly FunctionTool[];
  readonly body: ResponsesBody;
}

export function newItemId(prefix: "msg" | "fc"): string {
  return `${prefix}_${randomUUID().replace(/-/g, "")}`;
}

export function outputText(text: string) {
  return { type: "output_text" as const, text, annotations: [] as [] };
}

export function messageItem(id: string, text: string, status: ResponseStatus): MessageItem {
  return { type: "message", id, role: "assistant", status, content: [outputText(text)] };
}

export function functionCallItem(
  id: string,
  call: Pick<ParsedToolCall, "id" | "name" | "arguments">,
  status: ResponseStatus,
): FunctionCallItem {
  return { type: "function_call", id, call_id: call.id, name: call.name, arguments: call.arguments, status };
}

/** The output items of a finished generation: its text (if any) as a message, then its calls. */
export function outputItems(
  content: string | null,
  calls: readonly ParsedToolCall[],
  status: ResponseStatus,
): OutputItem[] {
  const message = content ? [messageItem(newItemId("msg"), content, status)] : [];
  return [...message, ...calls.map((call) => functionCallItem(newItemId("fc"), call, status))];
}

/** The turn a stored response adds to its conversation. */
export function assistantTurn(items: readonly OutputItem[]): ChatMessageInput {
  const text = items.flatMap((item) => (item.type === "message" ? item.content.map((c) => c.text) : []));
  const calls = items.flatMap((item) =>
    item.type === "function_call"
      ? [
          {
            id: item.call_id,
            type: "function" as const,
            function: { name: item.name, arguments: item.arguments },
          },
        ]
      : [],
  );
  return { role: "assistant", content: text.join(""), ...(calls.length > 0 ? { tool_calls: calls } : {}) };
}

export function responseStatus(done: DoneEvent): ResponseStatus {
  return done.finishReason === "stop" ? "completed" : "incomplete";
}

export function responsesUsage(usage: GenerateUsage) {
  return {
    input_tokens: usage.promptTokens,
    input_tokens_details: { cached_tokens: usage.cachedTokens },
    output_tokens: usage.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

/** `error`: why a response failed (then its status is "failed"). */
export function responseObject(
  meta: ResponseMeta,
  status: ResponseStatus | "failed",
  output: readonly OutputItem[],
  usage: GenerateUsage | null,
  error: { code: string; message: string } | null = null,
) {
  const { body } = meta;
  return {
    id: meta.id,
    object: "response",
    created_at: meta.created_at,
    status,
    error,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: meta.model,
    output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    store: body.store ?? false,
    temperature: body.temperature ?? 1,
    text: { format: { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: meta.tools,
    top_p: body.top_p ?? 1,
    truncation: "disabled",
    usage: usage === null ? null : responsesUsage(usage),
    metadata: body.metadata ?? {},
  };
}
