/** The Responses API's response object and output items, from what a chat generation produced. */
import { randomUUID } from "node:crypto";
import type { GenerateUsage, OutputLogprob } from "../../engine/engine-api.js";
import { type DoneEvent, unixSeconds } from "../generation/generation.js";
import { entriesWithin, responsesLogprobs } from "../generation/logprobs.js";
import type { ParsedToolCall } from "../output/tool-calls.js";
import type { ChatMessageInput } from "../schemas.js";
import {
  type CustomTool,
  conversationIdOf,
  type FunctionTool,
  type ResponsesBody,
} from "./responses-schema.js";
import {
  chatNameOf,
  customArguments,
  customInput,
  type OfferedTool,
  type OfferedTools,
  runsHere,
} from "./responses-tools.js";

/** An output item's status. */
export type ResponseStatus = "in_progress" | "completed" | "incomplete";

/**
 * A response's status: a background response is `queued` until its generation starts, and may end
 * `cancelled` (`POST /v1/responses/{id}/cancel`) or `failed` (with its `error`).
 */
export type ResponseObjectStatus = ResponseStatus | "queued" | "failed" | "cancelled";

export interface MessageItem {
  readonly type: "message";
  readonly id: string;
  readonly role: "assistant";
  readonly status: ResponseStatus;
  readonly content: ReturnType<typeof outputText>[];
}

export interface FunctionCallItem {
  readonly type: "function_call";
  readonly id: string;
  readonly call_id: string;
  readonly name: string;
  /** the namespace of a tool offered in one */
  readonly namespace?: string;
  readonly arguments: string;
  readonly status: ResponseStatus;
}

/** A call of a custom tool: its input as text. */
export interface CustomToolCallItem {
  readonly type: "custom_tool_call";
  readonly id: string;
  readonly call_id: string;
  readonly name: string;
  /** the namespace of a tool offered in one */
  readonly namespace?: string;
  readonly input: string;
  readonly status: ResponseStatus;
}

/** A reasoning model's thinking, whole (the raw text as `reasoning_text`; no summary is written). */
export interface ReasoningItem {
  readonly type: "reasoning";
  readonly id: string;
  readonly summary: [];
  readonly content: { type: "reasoning_text"; text: string }[];
}

export type CallItem = FunctionCallItem | CustomToolCallItem;
export type OutputItem = ReasoningItem | MessageItem | CallItem;

/** What every response object of one request repeats from the request. */
export interface ResponseMeta {
  readonly id: string;
  readonly created_at: number;
  readonly model: string;
  readonly tools: OfferedTools;
  readonly body: ResponsesBody;
}

export function newItemId(prefix: "rs" | "msg" | "fc" | "fco" | "ctc" | "ctco"): string {
  return `${prefix}_${randomUUID().replace(/-/g, "")}`;
}

/** A text part; `logprobs` when the request included them ("message.output_text.logprobs"). */
export function outputText(text: string, logprobs?: readonly OutputLogprob[]) {
  return {
    type: "output_text" as const,
    text,
    annotations: [] as [],
    ...(logprobs ? { logprobs: responsesLogprobs(logprobs) } : {}),
  };
}

export function messageItem(
  id: string,
  text: string,
  status: ResponseStatus,
  logprobs?: readonly OutputLogprob[],
): MessageItem {
  return { type: "message", id, role: "assistant", status, content: [outputText(text, logprobs)] };
}

/** A reasoning item holding `text` (empty while it is being written). */
export function reasoningText(text: string): { type: "reasoning_text"; text: string } {
  return { type: "reasoning_text", text };
}

export function reasoningItem(id: string, text: string): ReasoningItem {
  return { type: "reasoning", id, summary: [], content: text ? [reasoningText(text)] : [] };
}

/**
 * A generated call as an item, as its tool was offered (`tools`): a function call with its arguments or a
 * custom tool's call with its input, in a namespace or not. `id`: the item's, else a new one.
 */
export function callItem(
  call: Pick<ParsedToolCall, "id" | "name" | "arguments">,
  status: ResponseStatus,
  tools: OfferedTools,
  id?: string,
): CallItem {
  const { type, ...name } = tools.callOf(call.name);
  if (type === "custom") {
    const input = customInput(call.arguments);
    return { type: "custom_tool_call", id: id ?? newItemId("ctc"), call_id: call.id, ...name, input, status };
  }
  return {
    type: "function_call",
    id: id ?? newItemId("fc"),
    call_id: call.id,
    ...name,
    arguments: call.arguments,
    status,
  };
}

/** What a finished generation's output items are made of (its answer split as chat completions split it). */
export interface GeneratedOutput {
  /** a reasoning model's thinking, else null */
  readonly reasoning: string | null;
  readonly content: string | null;
  readonly calls: readonly ParsedToolCall[];
  /** with logprobs: the entries of the answer's tokens (those of its thinking left out) */
  readonly answerLogprobs?: readonly OutputLogprob[];
}

/**
 * The output items of a finished generation: its thinking (if any) as a reasoning item, its text (if any)
 * as a message, with the logprobs of its tokens when the generation has them, then its calls.
 */
export function outputItems(
  output: GeneratedOutput,
  status: ResponseStatus,
  tools: OfferedTools,
): OutputItem[] {
  const { reasoning, content, calls, answerLogprobs } = output;
  const thinking = reasoning ? [reasoningItem(newItemId("rs"), reasoning)] : [];
  const textLogprobs =
    content && answerLogprobs ? entriesWithin(answerLogprobs, Buffer.byteLength(content)) : undefined;
  const message = content ? [messageItem(newItemId("msg"), content, status, textLogprobs)] : [];
  const callItems = calls.map((call) => callItem(call, status, tools));
  return [...thinking, ...message, ...callItems];
}

/** The turn a stored response adds to its conversation. */
export function assistantTurn(items: readonly OutputItem[]): ChatMessageInput {
  const text = items.flatMap((item) => (item.type === "message" ? item.content.map((c) => c.text) : []));
  const calls = items.flatMap((item) =>
    item.type === "function_call" || item.type === "custom_tool_call"
      ? [
          {
            id: item.call_id,
            type: "function" as const,
            function: {
              name: chatNameOf(item),
              arguments: item.type === "function_call" ? item.arguments : customArguments(item.input),
            },
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

/** A function tool as the response lists it: every field present (`null` where the request left it out). */
function responseFunctionTool(tool: FunctionTool) {
  return {
    type: tool.type,
    name: tool.name,
    description: tool.description ?? null,
    parameters: tool.parameters ?? null,
    strict: tool.strict ?? null,
  };
}

/** A custom tool as the response lists it: its format `text` where the request gave none. */
function responseCustomTool(tool: CustomTool) {
  const { type, name, description, format } = tool;
  return { type, name, description: description ?? null, format: format ?? { type: "text" as const } };
}

function responseRunnableTool(tool: FunctionTool | CustomTool) {
  return tool.type === "function" ? responseFunctionTool(tool) : responseCustomTool(tool);
}

/** A tool as the response lists it: a namespace with the tools it offered. */
export function responseTool(tool: OfferedTool) {
  if (tool.type !== "namespace") return responseRunnableTool(tool);
  const { type, name, description } = tool;
  return { type, name, description: description ?? null, tools: tool.tools.map(responseRunnableTool) };
}

/**
 * The response object, with every field the Open Responses spec requires of it: the request's settings
 * where it gave them, else the value in effect. `error`: why a response failed (then its status is
 * "failed"). `completed_at` is the time of this call when the status is "completed".
 */
/** The response's `text`: the request's format, a json_schema one with the fields Open Responses requires. */
function responseText(text: ResponsesBody["text"]) {
  const format = text?.format ?? { type: "text" as const };
  const echoed =
    format.type === "json_schema"
      ? {
          ...format,
          name: format.name ?? "response",
          description: format.description ?? null,
          schema: format.schema ?? {},
          strict: format.strict ?? false,
        }
      : format;
  return { format: echoed, ...(text?.verbosity ? { verbosity: text.verbosity } : {}) };
}

export type ResponseObject = ReturnType<typeof responseObject>;

export function responseObject(
  meta: ResponseMeta,
  status: ResponseObjectStatus,
  output: readonly OutputItem[],
  usage: GenerateUsage | null,
  error: { code: string; message: string } | null = null,
) {
  const { body } = meta;
  return {
    id: meta.id,
    object: "response",
    created_at: meta.created_at,
    completed_at: status === "completed" ? unixSeconds() : null,
    status,
    error,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    max_tool_calls: body.max_tool_calls ?? null,
    model: meta.model,
    output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    conversation: body.conversation == null ? null : { id: conversationIdOf(body.conversation) },
    reasoning: { effort: body.reasoning?.effort ?? null, summary: null },
    store: body.store ?? true,
    background: body.background ?? false,
    service_tier: "default",
    temperature: body.temperature ?? 1,
    top_p: body.top_p ?? 1,
    presence_penalty: body.presence_penalty ?? 0,
    frequency_penalty: body.frequency_penalty ?? 0,
    top_logprobs: body.top_logprobs ?? 0,
    text: responseText(body.text),
    // A hosted tool's choice ran as "auto" (its tool was dropped)
    tool_choice:
      body.tool_choice && typeof body.tool_choice === "object" && !runsHere(body.tool_choice.type)
        ? "auto"
        : (body.tool_choice ?? "auto"),
    tools: meta.tools.listed.map(responseTool),
    truncation: "disabled",
    usage: usage === null ? null : responsesUsage(usage),
    user: body.user ?? null,
    safety_identifier: body.safety_identifier ?? null,
    prompt_cache_key: body.prompt_cache_key ?? null,
    metadata: body.metadata ?? {},
  };
}
