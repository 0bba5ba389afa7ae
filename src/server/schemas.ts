/**
 * Request bodies of the OpenAI-compatible endpoints. Unknown fields are dropped (OpenAI clients send
 * many); a known field of the wrong type fails validation (400).
 */
import { z } from "zod";
import { jsonTextDepth, MAX_JSON_DEPTH } from "../tool-calls/json-depth.js";

const textPart = z.object({ type: z.string(), text: z.string().optional() });
const content = z.union([z.string(), z.array(textPart)]).nullish();

/** `{"type": "ephemeral", "ttl": "30s" | "5m" | "1h" | seconds}` */
const cacheControl = z.object({
  type: z.literal("ephemeral"),
  ttl: z
    .union([
      z.number().min(0),
      z.string().regex(/^\d+(\.\d+)?(ms|s|m|h)$/, 'a duration such as "30s", "5m" or "1h"'),
    ])
    .nullish(),
});

/**
 * JSON sent as a string (a call's arguments), nesting no deeper than a body may (readJsonBody checks the
 * body's own nesting); text that is no JSON passes as it is.
 */
export const jsonText = z.string().refine((text) => jsonTextDepth(text) <= MAX_JSON_DEPTH, {
  message: `nests deeper than ${MAX_JSON_DEPTH} levels`,
});

const toolCall = z.object({
  id: z.string().optional(),
  type: z.literal("function").optional(),
  function: z.object({
    name: z.string().min(1),
    /** a JSON string per OpenAI; some clients send the object itself (re-serialized into the prompt) */
    arguments: z.union([jsonText, z.record(z.string(), z.unknown())]).optional(),
  }),
});

export const chatMessageSchema = z.discriminatedUnion("role", [
  z.object({ role: z.literal("system"), content, name: z.string().optional() }),
  z.object({ role: z.literal("developer"), content, name: z.string().optional() }),
  z.object({ role: z.literal("user"), content, name: z.string().optional() }),
  z.object({
    role: z.literal("assistant"),
    content,
    name: z.string().optional(),
    tool_calls: z.array(toolCall).nullish(),
    /**
     * the turn's thinking as clients send it back (`reasoning_content`, vLLM's newer `reasoning`), given to the
     * model's template (Qwen3's reads `reasoning_content`, gpt-oss's `thinking`), which keeps it where the
     * model would see it
     */
    reasoning_content: z.string().nullish(),
    reasoning: z.string().nullish(),
  }),
  z.object({
    role: z.literal("tool"),
    content,
    tool_call_id: z.string().nullish(),
    name: z.string().optional(),
  }),
]);
export type ChatMessageInput = z.infer<typeof chatMessageSchema>;

export const toolSchema = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z.string().min(1),
    description: z.string().nullish(),
    parameters: z.record(z.string(), z.unknown()).nullish(),
    strict: z.boolean().nullish(),
  }),
});
export type ToolInput = z.infer<typeof toolSchema>;

const toolChoice = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), function: z.object({ name: z.string().min(1) }) }),
]);
export type ToolChoiceInput = z.infer<typeof toolChoice>;

const responseFormat = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text") }),
  z.object({ type: z.literal("json_object") }),
  z.object({
    type: z.literal("json_schema"),
    json_schema: z.object({
      name: z.string().optional(),
      description: z.string().optional(),
      schema: z.record(z.string(), z.unknown()).optional(),
      strict: z.boolean().nullish(),
    }),
  }),
]);
export type ResponseFormatInput = z.infer<typeof responseFormat>;

const nonNegativeInt = z.number().int().min(0);

/** vLLM's JSON-schema constraint: the schema, or the schema as a JSON string */
const jsonConstraint = z.union([z.record(z.string(), z.unknown()), jsonText]);
/** vLLM's structured outputs (structured-outputs.ts) */
const structuredOutputs = z
  .object({
    json: jsonConstraint.nullish(),
    regex: z.string().nullish(),
    choice: z.array(z.string()).min(1).nullish(),
    grammar: z.string().min(1).nullish(),
    json_object: z.boolean().nullish(),
  })
  .passthrough();

/** Sampling and program fields shared by both completion endpoints. */
/** Longest program id or cache salt accepted: ids are kept per live program, so they must stay small. */
export const MAX_ID_CHARS = 256;
const programId = z.union([
  z.string().max(MAX_ID_CHARS, `must be at most ${MAX_ID_CHARS} characters`),
  z.number(),
]);

/**
 * An output limit as every API's body writes it (max_tokens, max_completion_tokens, Messages' max_tokens,
 * max_output_tokens): a positive integer; how it meets the context is checked once (sampling.ts).
 */
export const outputTokensField = z.number().int().min(1);

const common = {
  model: z.string().nullish(),
  stream: z.boolean().nullish(),
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
  stop: z.union([z.string(), z.array(z.string())]).nullish(),
  max_tokens: outputTokensField.nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  /** 0 or -1: disabled (vLLM accepts both) */
  top_k: z.number().int().min(-1).nullish(),
  min_p: z.number().min(0).max(1).nullish(),
  seed: z.number().int().nullish(),
  n: z.number().int().min(1).nullish(),
  presence_penalty: z.number().min(-2).max(2).nullish(),
  frequency_penalty: z.number().min(-2).max(2).nullish(),
  /** vLLM extension (Qwen Code's samplingParams send it): > 1 discourages tokens of the prompt and output */
  repetition_penalty: z.number().gt(0).nullish(),
  /** token id (as a string) -> added to its logit */
  logit_bias: z.record(z.string(), z.number().min(-100).max(100)).nullish(),
  user: z.string().nullish(),
  response_format: responseFormat.nullish(),
  /** vLLM extension, sent by mini-swe-agent: keep generating through end-of-generation tokens */
  ignore_eos: z.boolean().nullish(),
  /** vLLM extension: token ids that end the output as its end-of-generation token does */
  stop_token_ids: z.array(z.number().int().min(0)).max(256).nullish(),
  /** vLLM's structured outputs, and the older `guided_*` fields it replaced (structured-outputs.ts) */
  structured_outputs: structuredOutputs.nullish(),
  guided_json: jsonConstraint.nullish(),
  guided_regex: z.string().nullish(),
  guided_choice: z.array(z.string()).min(1).nullish(),
  guided_grammar: z.string().min(1).nullish(),
  /** vLLM's: every prompt token's logprob given the tokens before it, with this many alternatives */
  prompt_logprobs: z.number().int().min(0).max(20).nullish(),
  /** vLLM's: false writes control tokens into the text as their names (default true: they add nothing) */
  skip_special_tokens: z.boolean().nullish(),
  /** vLLM extension: the end of generation, stop tokens and stop strings wait until this many tokens are out */
  min_tokens: z.number().int().min(0).nullish(),
  // Agent-program fields, top-level as the CacheTTL fork and its clients (extra_body) send them.
  job_id: programId.nullish(),
  program_id: programId.nullish(),
  session_id: programId.nullish(),
  session_params: z.object({ session_id: programId.nullish() }).passthrough().nullish(),
  is_last_step: z.boolean().nullish(),
  this_func_call: z.string().nullish(),
  /** this program is a subagent the named program spawned (its parent waits on it in a tool call) */
  parent_program_id: programId.nullish(),
  // Retention hints: Anthropic-style cache control (Dynamo's agentic cache control has the same shape,
  // under `nvext`), and how long the client expects the tool call after this turn to take.
  cache_control: cacheControl.nullish(),
  nvext: z.object({ cache_control: cacheControl.nullish() }).passthrough().nullish(),
  expected_tool_duration_s: z.number().min(0).nullish(),
  /** vLLM's prefix-cache isolation: requests share cached KV only when their salts are equal */
  cache_salt: z.string().min(1).max(MAX_ID_CHARS).nullish(),
  /** accepted for compatibility with the fork's protocol; the server tracks it itself */
  last_func_call: z.string().nullish(),
};

export const chatCompletionSchema = z.object({
  ...common,
  messages: z.array(chatMessageSchema).min(1),
  tools: z.array(toolSchema).nullish(),
  tool_choice: toolChoice.nullish(),
  parallel_tool_calls: z.boolean().nullish(),
  max_completion_tokens: outputTokensField.nullish(),
  logprobs: z.boolean().nullish(),
  top_logprobs: nonNegativeInt.nullish(),
  /** vLLM's: the response carries the prompt's token ids and the choice the generated ones */
  return_token_ids: z.boolean().nullish(),
  /** OpenAI's: given to the model's template as `reasoning_effort` (gpt-oss's reads it) */
  reasoning_effort: z.string().min(1).nullish(),
  /** vLLM's: more variables for the model's chat template (Qwen3's `enable_thinking`, ...) */
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  /** vLLM's: end the prompt with the assistant's generation prompt (default true) */
  add_generation_prompt: z.boolean().nullish(),
  /**
   * a reasoning model's thinking ends after this many tokens (the name of Qwen's API; Anthropic's
   * `thinking.budget_tokens` on Messages): the server closes the block and the model answers
   */
  thinking_budget: z.number().int().min(1).nullish(),
  /** vLLM's: the reply continues the last message, the assistant's (an Anthropic prefill) */
  continue_final_message: z.boolean().nullish(),
});
export type ChatCompletionBody = z.infer<typeof chatCompletionSchema>;

export const completionSchema = z.object({
  ...common,
  prompt: z.union([
    z.string(),
    z.array(z.string()).min(1),
    z.array(z.number().int()).min(1),
    z.array(z.array(z.number().int()).min(1)).min(1),
  ]),
  /** vLLM's: each choice carries the prompt's and the output's token ids */
  return_token_ids: z.boolean().nullish(),
  echo: z.boolean().nullish(),
  logprobs: nonNegativeInt.nullish(),
  suffix: z.string().nullish(),
  best_of: z.number().int().min(1).nullish(),
});
export type CompletionBody = z.infer<typeof completionSchema>;

/** Fields both endpoints share, as the sampling and program helpers read them. */
export type CommonBody = Pick<ChatCompletionBody, keyof typeof common>;
