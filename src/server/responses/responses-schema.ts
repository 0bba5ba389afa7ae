/**
 * The request body of `POST /v1/responses` (OpenAI's Responses API). Input items and tools are checked
 * one by one where they are translated (responses-input.ts), so an item of an unknown type gets an error
 * naming it. Unknown top-level fields (`truncation`, `service_tier`, ...) are dropped, as on the other
 * endpoints.
 */
import { z } from "zod";
import { ApiError, describeZodError } from "../errors.js";
import { chatCompletionSchema, jsonText, outputTokensField } from "../schemas.js";

const typedObject = z.object({ type: z.string().optional() }).passthrough();

/** `text.format`: structured outputs, as chat completions' `response_format` with the schema's fields flat. */
const textFormat = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    name: z.string().optional(),
    description: z.string().nullish(),
    schema: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullish(),
  }),
]);
export type TextFormat = z.infer<typeof textFormat>;

export const responsesSchema = chatCompletionSchema
  .omit({
    messages: true,
    tools: true,
    tool_choice: true,
    max_tokens: true,
    max_completion_tokens: true,
    logprobs: true,
    top_logprobs: true,
    return_token_ids: true,
    stream_options: true,
    response_format: true,
    structured_outputs: true,
    guided_json: true,
    guided_regex: true,
    guided_choice: true,
    guided_grammar: true,
    thinking_budget: true,
    reasoning_effort: true,
    skip_special_tokens: true,
    prompt_logprobs: true,
    n: true,
  })
  .extend({
    input: z.union([z.string(), z.array(typedObject)]),
    instructions: z.string().nullish(),
    tools: z.array(typedObject).nullish(),
    tool_choice: z
      .union([
        z.enum(["none", "auto", "required"]),
        z.object({ type: z.string(), name: z.string().optional(), namespace: z.string().optional() }),
      ])
      .nullish(),
    max_output_tokens: outputTokensField.nullish(),
    // its effort becomes chat's reasoning_effort (gpt-oss's template reads it); the summary is not made
    reasoning: z
      .object({ effort: z.string().min(1).nullish() })
      .passthrough()
      .nullish(),
    // structured outputs (`text.format`); `verbosity` is echoed as given, not acted on
    text: z
      .object({ format: textFormat.nullish(), verbosity: z.enum(["low", "medium", "high"]).nullish() })
      .passthrough()
      .nullish(),
    store: z.boolean().nullish(),
    // run detached from the connection: polled with GET, cancelled with POST .../cancel (responses-background.ts)
    background: z.boolean().nullish(),
    previous_response_id: z.string().min(1).nullish(),
    // a conversation of the Conversations API (conversations.ts): its id, alone or as `{ id }`
    conversation: z.union([z.string().min(1), z.object({ id: z.string().min(1) }).passthrough()]).nullish(),
    // a prompt template kept at OpenAI: refused by name rather than dropped, which would lose the
    // instructions it stands for (responses.ts)
    prompt: z.unknown().optional(),
    metadata: z.record(z.string(), z.string()).nullish(),
    // Where Codex names its conversation (program-identity.ts)
    prompt_cache_key: z.string().nullish(),
    // with include "message.output_text.logprobs": each output text token's most likely alternatives
    top_logprobs: z.number().int().min(0).max(20).nullish(),
    // what the response adds: only "message.output_text.logprobs" is acted on
    include: z.array(z.string()).nullish(),
    // Echoed in the response object (Open Responses requires them there), not acted on
    max_tool_calls: z.number().int().min(0).nullish(),
    safety_identifier: z.string().nullish(),
    client_metadata: z.object({ session_id: z.string().nullish() }).passthrough().nullish(),
  });
export type ResponsesBody = z.infer<typeof responsesSchema>;

/** Whether the response should carry its output text's token logprobs (`include`, as OpenAI names it). */
export function wantsTextLogprobs(body: Pick<ResponsesBody, "include">): boolean {
  return body.include?.includes("message.output_text.logprobs") ?? false;
}

export const functionToolSchema = z.object({
  type: z.literal("function"),
  name: z.string().min(1),
  description: z.string().nullish(),
  parameters: z.record(z.string(), z.unknown()).nullish(),
  strict: z.boolean().nullish(),
});
export type FunctionTool = z.infer<typeof functionToolSchema>;

/** A tool whose input is free text, or text in a grammar (OpenAI's custom tools: GPT-5's apply_patch). */
export const customToolSchema = z.object({
  type: z.literal("custom"),
  name: z.string().min(1),
  description: z.string().nullish(),
  format: z
    .discriminatedUnion("type", [
      z.object({ type: z.literal("text") }),
      z.object({ type: z.literal("grammar"), syntax: z.enum(["lark", "regex"]), definition: z.string() }),
    ])
    .nullish(),
});
export type CustomTool = z.infer<typeof customToolSchema>;

/** A group of tools (`tools` of any type: those that are neither functions nor custom are dropped). */
export const namespaceToolSchema = z.object({
  type: z.literal("namespace"),
  name: z.string().min(1),
  description: z.string().nullish(),
  tools: z.array(typedObject),
});

const textPart = z.object({ type: z.string(), text: z.string().optional() }).passthrough();
const itemContent = z.union([z.string(), z.array(textPart)]);

export const messageItemSchema = z.object({
  type: z.literal("message").optional(),
  role: z.enum(["developer", "system", "user", "assistant"]),
  content: itemContent,
});

export const functionCallItemSchema = z.object({
  type: z.literal("function_call"),
  call_id: z.string().min(1),
  name: z.string().min(1),
  // the namespace of a tool offered in one (responses-tools.ts)
  namespace: z.string().min(1).nullish(),
  arguments: jsonText,
});

export const functionCallOutputItemSchema = z.object({
  type: z.literal("function_call_output"),
  call_id: z.string().min(1),
  output: itemContent,
});

export const customToolCallItemSchema = z.object({
  type: z.literal("custom_tool_call"),
  call_id: z.string().min(1),
  name: z.string().min(1),
  namespace: z.string().min(1).nullish(),
  input: z.string(),
});

export const customToolCallOutputItemSchema = z.object({
  type: z.literal("custom_tool_call_output"),
  call_id: z.string().min(1),
  output: itemContent,
});

/** A response request's `conversation`: its id, given alone or as `{ id }`; null when none. */
export function conversationIdOf(ref: ResponsesBody["conversation"]): string | null {
  if (ref === null || ref === undefined) return null;
  return typeof ref === "string" ? ref : ref.id;
}

/** `item` read by `schema`; what does not fit is a 400 naming the field (`param` and the path within). */
export function parseItem<T extends z.ZodType>(schema: T, item: unknown, param: string): z.infer<T> {
  const parsed = schema.safeParse(item);
  if (parsed.success) return parsed.data;
  const { param: where, message } = describeZodError(parsed.error, param);
  throw ApiError.badRequest(message, where, "invalid_value");
}
