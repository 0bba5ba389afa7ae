/**
 * Request bodies of `POST /tokenize` and `POST /detokenize`: vLLM's (a prompt, or a chat) and
 * llama-server's (`content`). Unknown fields are dropped, as on the other endpoints.
 */
import { z } from "zod";
import { ApiError } from "../errors.js";
import { chatMessageSchema, toolSchema } from "../schemas.js";

const model = z.string().nullish();
const returnTokenStrs = z.boolean().nullish();

/** vLLM's prompt form: `add_special_tokens` defaults to true. */
const promptTokenizeSchema = z.object({
  model,
  prompt: z.string(),
  add_special_tokens: z.boolean().nullish(),
  return_token_strs: returnTokenStrs,
});

/** vLLM's chat form, rendered as /v1/chat/completions renders the same messages and tools. */
const chatTokenizeSchema = z.object({
  model,
  messages: z.array(chatMessageSchema).min(1),
  tools: z.array(toolSchema).nullish(),
  chat_template_kwargs: z.record(z.string(), z.unknown()).nullish(),
  add_generation_prompt: z.boolean().nullish(),
  continue_final_message: z.boolean().nullish(),
  add_special_tokens: z.boolean().nullish(),
  /** a template for this request only: refused (the server renders with its own) */
  chat_template: z.string().nullish(),
  return_token_strs: returnTokenStrs,
});
export type ChatTokenizeRequest = z.infer<typeof chatTokenizeSchema>;

/** llama-server's form: `add_special` defaults to false, `parse_special` to true. */
const contentTokenizeSchema = z.object({
  model,
  content: z.string(),
  add_special: z.boolean().nullish(),
  parse_special: z.boolean().nullish(),
  with_pieces: z.boolean().nullish(),
});

export type TokenizeRequest =
  | { readonly form: "prompt"; readonly request: z.infer<typeof promptTokenizeSchema> }
  | { readonly form: "chat"; readonly request: ChatTokenizeRequest }
  | { readonly form: "content"; readonly request: z.infer<typeof contentTokenizeSchema> };

/** The field that says what to tokenize picks the form; none, or more than one, is a 400. */
export function parseTokenizeRequest(body: unknown): TokenizeRequest {
  const fields: Record<string, unknown> = typeof body === "object" && body !== null ? { ...body } : {};
  const given = ["prompt", "messages", "content"].filter((field) => fields[field] !== undefined);
  if (given.length === 0) {
    throw ApiError.badRequest(
      "give the text to tokenize as `prompt` (vLLM), a chat as `messages` (vLLM), or the text as `content` (llama-server)",
    );
  }
  if (given.length > 1) {
    throw ApiError.badRequest(
      `give one of \`prompt\`, \`messages\` and \`content\`, not ${given.map((f) => `\`${f}\``).join(" and ")}`,
    );
  }
  if (given[0] === "messages") return { form: "chat", request: chatTokenizeSchema.parse(body) };
  if (given[0] === "prompt") return { form: "prompt", request: promptTokenizeSchema.parse(body) };
  return { form: "content", request: contentTokenizeSchema.parse(body) };
}

export const detokenizeSchema = z.object({
  model,
  tokens: z.array(z.number().int()),
});
