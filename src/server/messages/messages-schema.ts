/**
 * Request bodies of the Anthropic Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`).
 * Unknown fields (`context_management`, `service_tier`, ...) are dropped, as Anthropic's
 * clients send many; a known field of the wrong type fails validation (400).
 */
import { z } from "zod";
import { outputTokensField } from "../schemas.js";

const cacheControl = z
  .object({ type: z.literal("ephemeral"), ttl: z.union([z.string(), z.number()]).nullish() })
  .nullish();

const textBlock = z.object({ type: z.literal("text"), text: z.string(), cache_control: cacheControl });
/** Images and documents (PDFs, text files): refused, or replaced by notes before validation (media-notes.ts). */
const mediaBlock = z
  .object({ type: z.enum(["image", "document"]), cache_control: cacheControl })
  .passthrough();
const toolUseBlock = z.object({
  type: z.literal("tool_use"),
  id: z.string().min(1),
  name: z.string().min(1),
  input: z.record(z.string(), z.unknown()),
  cache_control: cacheControl,
});
const toolResultBlock = z.object({
  type: z.literal("tool_result"),
  tool_use_id: z.string().min(1),
  content: z.union([z.string(), z.array(z.discriminatedUnion("type", [textBlock, mediaBlock]))]).nullish(),
  is_error: z.boolean().nullish(),
  cache_control: cacheControl,
});
/** Reasoning of an earlier turn as a client echoes it back; not rendered. */
const thinkingBlock = z
  .object({ type: z.enum(["thinking", "redacted_thinking"]), cache_control: cacheControl })
  .passthrough();

const contentBlock = z.discriminatedUnion("type", [
  textBlock,
  mediaBlock,
  toolUseBlock,
  toolResultBlock,
  thinkingBlock,
]);
export type MessagesContentBlock = z.infer<typeof contentBlock>;

/**
 * `system` in `messages`: Claude Code (2.1.x, beta `mid-conversation-tool-changes-2026-07-01`) sends its
 * environment section as a system message after the first user message.
 */
const message = z.object({
  role: z.enum(["user", "assistant", "system"]),
  content: z.union([z.string(), z.array(contentBlock)]),
});
export type MessagesMessage = z.infer<typeof message>;

const tool = z.object({
  name: z.string().min(1),
  description: z.string().nullish(),
  input_schema: z.record(z.string(), z.unknown()),
  cache_control: cacheControl,
});
export type MessagesTool = z.infer<typeof tool>;

const disableParallel = { disable_parallel_tool_use: z.boolean().nullish() };
const toolChoice = z.discriminatedUnion("type", [
  z.object({ type: z.literal("auto"), ...disableParallel }),
  z.object({ type: z.literal("any"), ...disableParallel }),
  z.object({ type: z.literal("none") }),
  z.object({ type: z.literal("tool"), name: z.string().min(1), ...disableParallel }),
]);
export type MessagesToolChoice = z.infer<typeof toolChoice>;

const countTokensFields = {
  model: z.string().nullish(),
  system: z.union([z.string(), z.array(textBlock)]).nullish(),
  messages: z.array(message).min(1),
  tools: z.array(tool).nullish(),
  tool_choice: toolChoice.nullish(),
  /** the whole request's mark: it applies where the prompt ends */
  cache_control: cacheControl,
  /** extended thinking (`{type: "enabled", budget_tokens}`): a reasoning model thinks only when enabled */
  thinking: z
    .object({ type: z.string(), budget_tokens: z.number().int().min(1).nullish() })
    .passthrough()
    .nullish(),
};

export const countTokensSchema = z.object(countTokensFields);
export type CountTokensBody = z.infer<typeof countTokensSchema>;

export const messagesSchema = z.object({
  ...countTokensFields,
  max_tokens: outputTokensField,
  stop_sequences: z.array(z.string()).nullish(),
  temperature: z.number().min(0).max(1).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  top_k: z.number().int().min(0).nullish(),
  stream: z.boolean().nullish(),
  metadata: z.object({ user_id: z.string().nullish() }).nullish(),
});
export type MessagesBody = z.infer<typeof messagesSchema>;
