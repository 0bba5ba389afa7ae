/**
 * The Open Responses spec (github.com/openresponses/openresponses, public/openapi/openapi.json) as zod
 * schemas, written here from its `required` lists and property types: the response object
 * (ResponseResource), its output items and content parts, and every streaming event. Objects are not
 * strict (extra fields pass), as in the spec's own generated schemas; nullable fields are required keys
 * whose value may be null. Test code: what the compliance test checks the server against.
 */
import { z } from "zod";

const int = z.number().int();
const nullableString = z.string().nullable();
const itemStatus = z.enum(["in_progress", "completed", "incomplete"]);

// Content parts (a message's `content`, a content_part event's `part`)
const inputText = z.object({ type: z.literal("input_text"), text: z.string() });
const urlCitation = z.object({
  type: z.literal("url_citation"),
  url: z.string(),
  start_index: int,
  end_index: int,
  title: z.string(),
});
const topLogProb = z.object({ token: z.string(), logprob: z.number(), bytes: z.array(int) });
const logProb = topLogProb.extend({ top_logprobs: z.array(topLogProb) });
const outputText = z.object({
  type: z.literal("output_text"),
  text: z.string(),
  annotations: z.array(urlCitation),
  logprobs: z.array(logProb).optional(),
});
const text = z.object({ type: z.literal("text"), text: z.string() });
const summaryText = z.object({ type: z.literal("summary_text"), text: z.string() });
const reasoningText = z.object({ type: z.literal("reasoning_text"), text: z.string() });
const refusal = z.object({ type: z.literal("refusal"), refusal: z.string() });
const inputImage = z.object({
  type: z.literal("input_image"),
  image_url: nullableString,
  detail: z.enum(["low", "high", "auto"]),
});
const inputFile = z.object({
  type: z.literal("input_file"),
  filename: z.string().optional(),
  file_url: z.string().optional(),
});
const inputVideo = z.object({ type: z.literal("input_video"), video_url: z.string() });

const contentParts = [
  inputText,
  outputText,
  text,
  summaryText,
  reasoningText,
  refusal,
  inputImage,
  inputFile,
] as const;
const contentPart = z.discriminatedUnion("type", [...contentParts]);
const messageContent = z.discriminatedUnion("type", [...contentParts, inputVideo]);

// Items (ItemField)
export const messageSchema = z.object({
  type: z.literal("message"),
  id: z.string(),
  status: itemStatus,
  role: z.enum(["user", "assistant", "system", "developer"]),
  content: z.array(messageContent),
  phase: z.enum(["commentary", "final_answer"]).optional(),
});
export const functionCallSchema = z.object({
  type: z.literal("function_call"),
  id: z.string(),
  call_id: z.string(),
  name: z.string(),
  arguments: z.string(),
  status: itemStatus,
});
const functionCallOutput = z.object({
  type: z.literal("function_call_output"),
  id: z.string(),
  call_id: z.string(),
  output: z.union([z.string(), z.array(z.discriminatedUnion("type", [inputText, inputImage, inputFile]))]),
  status: itemStatus,
});
const reasoningItem = z.object({
  type: z.literal("reasoning"),
  id: z.string(),
  content: z.array(contentPart).optional(),
  summary: z.array(contentPart),
  encrypted_content: z.string().optional(),
});
const compactionItem = z.object({
  type: z.literal("compaction"),
  id: z.string(),
  encrypted_content: z.string(),
  created_by: z.string().optional(),
});
export const itemFieldSchema = z.discriminatedUnion("type", [
  messageSchema,
  functionCallSchema,
  functionCallOutput,
  reasoningItem,
  compactionItem,
]);

// The response object's parts
const functionTool = z.object({
  type: z.literal("function"),
  name: z.string(),
  description: nullableString,
  parameters: z.record(z.string(), z.unknown()).nullable(),
  strict: z.boolean().nullable(),
});
const toolChoiceValue = z.enum(["none", "auto", "required"]);
const functionToolChoice = z.object({ type: z.literal("function"), name: z.string().optional() });
const toolChoice = z.union([
  functionToolChoice,
  toolChoiceValue,
  z.object({ type: z.literal("allowed_tools"), tools: z.array(functionToolChoice), mode: toolChoiceValue }),
]);
const textField = z.object({
  format: z.discriminatedUnion("type", [
    z.object({ type: z.literal("text") }),
    z.object({ type: z.literal("json_object") }),
    z.object({
      type: z.literal("json_schema"),
      name: z.string(),
      description: nullableString,
      schema: z.unknown(),
      strict: z.boolean(),
    }),
  ]),
  verbosity: z.enum(["low", "medium", "high"]).optional(),
});
const reasoning = z.object({
  effort: z.enum(["none", "low", "medium", "high", "xhigh"]).nullable(),
  summary: z.enum(["concise", "detailed", "auto"]).nullable(),
});
const usage = z.object({
  input_tokens: int,
  output_tokens: int,
  total_tokens: int,
  input_tokens_details: z.object({ cached_tokens: int }),
  output_tokens_details: z.object({ reasoning_tokens: int }),
});

/** ResponseResource: every field its `required` list names, with its type. */
export const responseResourceSchema = z.object({
  id: z.string(),
  object: z.literal("response"),
  created_at: int,
  completed_at: int.nullable(),
  status: z.string(),
  incomplete_details: z.object({ reason: z.string() }).nullable(),
  model: z.string(),
  previous_response_id: nullableString,
  instructions: z.union([z.string(), z.array(z.unknown())]).nullable(),
  output: z.array(itemFieldSchema),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  tools: z.array(functionTool),
  tool_choice: toolChoice,
  truncation: z.enum(["auto", "disabled"]),
  parallel_tool_calls: z.boolean(),
  text: textField,
  top_p: z.number(),
  presence_penalty: z.number(),
  frequency_penalty: z.number(),
  top_logprobs: int,
  temperature: z.number(),
  reasoning: reasoning.nullable(),
  // required in schema/components/schemas/ResponseResource.json, not in every openapi.json build
  user: nullableString,
  usage: usage.nullable(),
  max_output_tokens: int.nullable(),
  max_tool_calls: int.nullable(),
  store: z.boolean(),
  background: z.boolean(),
  service_tier: z.string(),
  metadata: z.record(z.string(), z.string()),
  safety_identifier: nullableString,
  prompt_cache_key: nullableString,
});

// Streaming events: `type` and `sequence_number`, then each event's own fields
const event = <T extends string, S extends z.ZodRawShape>(type: T, shape: S) =>
  z.object({ type: z.literal(type), sequence_number: int, ...shape });
const withResponse = { response: responseResourceSchema };
const itemAt = { output_index: int, item: itemFieldSchema.nullable() };
const partAt = { item_id: z.string(), output_index: int, content_index: int };
const summaryAt = { item_id: z.string(), output_index: int, summary_index: int };

export const streamingEventSchema = z.discriminatedUnion("type", [
  event("response.created", withResponse),
  event("response.queued", withResponse),
  event("response.in_progress", withResponse),
  event("response.completed", withResponse),
  event("response.failed", withResponse),
  event("response.incomplete", withResponse),
  event("response.output_item.added", itemAt),
  event("response.output_item.done", itemAt),
  event("response.reasoning_summary_part.added", { ...summaryAt, part: contentPart }),
  event("response.reasoning_summary_part.done", { ...summaryAt, part: contentPart }),
  event("response.content_part.added", { ...partAt, part: contentPart }),
  event("response.content_part.done", { ...partAt, part: contentPart }),
  event("response.output_text.delta", {
    ...partAt,
    delta: z.string(),
    logprobs: z.array(logProb).optional(),
    obfuscation: z.string().optional(),
  }),
  event("response.output_text.done", { ...partAt, text: z.string(), logprobs: z.array(logProb).optional() }),
  event("response.refusal.delta", { ...partAt, delta: z.string() }),
  event("response.refusal.done", { ...partAt, refusal: z.string() }),
  event("response.reasoning_text.delta", {
    ...partAt,
    delta: z.string(),
    obfuscation: z.string().optional(),
  }),
  event("response.reasoning_text.done", { ...partAt, text: z.string() }),
  event("response.reasoning_summary_text.delta", {
    ...summaryAt,
    delta: z.string(),
    obfuscation: z.string().optional(),
  }),
  event("response.reasoning_summary_text.done", { ...summaryAt, text: z.string() }),
  event("response.output_text.annotation.added", {
    ...partAt,
    annotation_index: int,
    annotation: urlCitation.nullable(),
  }),
  event("response.function_call_arguments.delta", {
    item_id: z.string(),
    output_index: int,
    delta: z.string(),
    obfuscation: z.string().optional(),
  }),
  event("response.function_call_arguments.done", {
    item_id: z.string(),
    output_index: int,
    arguments: z.string(),
  }),
  event("error", {
    error: z.object({
      type: z.string(),
      code: nullableString,
      message: z.string(),
      param: nullableString,
      headers: z.record(z.string(), z.string()).optional(),
    }),
  }),
]);

/** A value's failures against `schema`, each as `path: message (got value)`, as the suite reports them. */
export function schemaErrors(schema: z.ZodType, value: unknown, prefix = ""): string[] {
  const parsed = schema.safeParse(value);
  if (parsed.success) return [];
  return parsed.error.issues.map((issue) => {
    const path = [prefix, ...issue.path.map(String)].filter((p) => p !== "").join(".");
    let at: unknown = value;
    for (const key of issue.path) at = (at as Record<PropertyKey, unknown> | undefined)?.[key];
    const got = at === undefined ? "missing" : JSON.stringify(at);
    return `${path || "(root)"}: ${issue.message} (got ${got?.slice(0, 200)})`;
  });
}
