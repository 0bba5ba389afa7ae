/**
 * An Anthropic Messages request -> the chat-completions form the server generates from: system blocks
 * become one system message, tool_use blocks assistant tool_calls, tool_result blocks `tool` messages,
 * tools and tool_choice their OpenAI shapes. Images are refused (the served model reads text only), unless
 * `--media-inputs note` replaced them before (media-notes.ts).
 */
import { ApiError } from "../errors.js";
import { jsonDumps } from "../output/tool-calls.js";
import type { ChatMessageInput, ToolChoiceInput, ToolInput } from "../schemas.js";
import { refusedMedia } from "../templates/media-notes.js";
import type {
  CountTokensBody,
  MessagesBody,
  MessagesContentBlock,
  MessagesMessage,
  MessagesTool,
  MessagesToolChoice,
} from "./messages-schema.js";

type CacheControl = { type: "ephemeral"; ttl?: string | number | null | undefined };
type TextBlock = { text: string };

function refused(param: string, type: "image" | "document"): ApiError {
  return ApiError.badRequest(`${param}: ${refusedMedia("messages", type)}`, param, "unsupported_content");
}

const joinText = (blocks: readonly TextBlock[]) => blocks.map((b) => b.text).join("\n\n");

function toolResultText(
  content: Extract<MessagesContentBlock, { type: "tool_result" }>["content"],
  param: string,
) {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  return content
    .map((block, i) => {
      if (block.type === "image" || block.type === "document")
        throw refused(`${param}.content[${i}]`, block.type);
      return block.text;
    })
    .join("\n\n");
}

function userMessages(content: MessagesMessage["content"], param: string): ChatMessageInput[] {
  if (typeof content === "string") return [{ role: "user", content }];
  const out: ChatMessageInput[] = [];
  let text: TextBlock[] = [];
  const flushText = () => {
    if (text.length > 0) out.push({ role: "user", content: joinText(text) });
    text = [];
  };
  for (const [i, block] of content.entries()) {
    const at = `${param}[${i}]`;
    if (block.type === "text") text.push(block);
    else if (block.type === "image" || block.type === "document") throw refused(at, block.type);
    else if (block.type === "tool_result") {
      flushText();
      out.push({ role: "tool", tool_call_id: block.tool_use_id, content: toolResultText(block.content, at) });
    } else if (block.type === "tool_use") {
      throw ApiError.badRequest(`${at}: tool_use blocks belong to assistant messages`, at);
    }
  }
  flushText();
  return out;
}

function assistantMessage(content: MessagesMessage["content"], param: string): ChatMessageInput {
  if (typeof content === "string") return { role: "assistant", content };
  const text: TextBlock[] = [];
  const thinking: string[] = [];
  const calls: { id: string; type: "function"; function: { name: string; arguments: string } }[] = [];
  for (const [i, block] of content.entries()) {
    const at = `${param}[${i}]`;
    if (block.type === "text") text.push(block);
    else if (block.type === "thinking" && typeof block["thinking"] === "string")
      thinking.push(block["thinking"]);
    else if (block.type === "image" || block.type === "document") throw refused(at, block.type);
    else if (block.type === "tool_use") {
      // Python-spaced JSON, as the model wrote the call: the echoed turn re-renders its cached tokens.
      calls.push({
        id: block.id,
        type: "function",
        function: { name: block.name, arguments: jsonDumps(block.input) },
      });
    } else if (block.type === "tool_result") {
      throw ApiError.badRequest(`${at}: tool_result blocks belong to user messages`, at);
    }
  }
  return {
    role: "assistant",
    content: joinText(text),
    ...(thinking.length > 0 ? { reasoning_content: thinking.join("\n\n") } : {}),
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
  };
}

/** A system message inside `messages`, rendered where it stands; only text blocks. */
function systemMessage(content: MessagesMessage["content"], param: string): ChatMessageInput {
  if (typeof content === "string") return { role: "system", content };
  const text: TextBlock[] = [];
  for (const [i, block] of content.entries()) {
    const at = `${param}[${i}]`;
    if (block.type === "text") text.push(block);
    else if (block.type === "image" || block.type === "document") throw refused(at, block.type);
    else if (block.type !== "thinking" && block.type !== "redacted_thinking") {
      throw ApiError.badRequest(`${at}: system messages hold text blocks only, got ${block.type}`, at);
    }
  }
  return { role: "system", content: joinText(text) };
}

export function chatMessages(body: CountTokensBody): ChatMessageInput[] {
  const system = typeof body.system === "string" ? body.system : joinText(body.system ?? []);
  const out: ChatMessageInput[] = system.length > 0 ? [{ role: "system", content: system }] : [];
  for (const [i, message] of body.messages.entries()) {
    const param = `messages[${i}].content`;
    if (message.role === "user") out.push(...userMessages(message.content, param));
    else if (message.role === "system") out.push(systemMessage(message.content, param));
    else out.push(assistantMessage(message.content, param));
  }
  return out;
}

export function chatTools(tools: readonly MessagesTool[] | null | undefined): ToolInput[] {
  return (tools ?? []).map((tool) => ({
    type: "function",
    function: { name: tool.name, description: tool.description, parameters: tool.input_schema },
  }));
}

export function chatToolChoice(choice: MessagesToolChoice | null | undefined): ToolChoiceInput | undefined {
  if (!choice) return undefined;
  switch (choice.type) {
    case "any":
      return "required";
    case "tool":
      return { type: "function", function: { name: choice.name } };
    default:
      return choice.type;
  }
}

/**
 * The last `cache_control` mark in prompt order (tools, system, messages, then the request's own, which
 * marks the prompt's end). Anthropic requires longer
 * TTLs before shorter ones, so the last mark is the one that bounds the whole prefix's retention.
 */
export function lastCacheControl(body: CountTokensBody): CacheControl | null {
  const blocks: { cache_control?: CacheControl | null }[] = [
    ...(body.tools ?? []),
    ...(typeof body.system === "string" ? [] : (body.system ?? [])),
    ...body.messages.flatMap((m) => (typeof m.content === "string" ? [] : m.content)),
  ];
  let last: CacheControl | null = null;
  for (const block of blocks) last = block.cache_control ?? last;
  return body.cache_control ?? last;
}

/** The chat-completions body (still to be validated by its schema) a Messages request generates as. */
export function chatCompletionRequest(body: MessagesBody): Record<string, unknown> {
  const parallel =
    body.tool_choice?.type === "none" ? undefined : body.tool_choice?.disable_parallel_tool_use;
  return {
    model: body.model,
    messages: chatMessages(body),
    tools: chatTools(body.tools),
    tool_choice: chatToolChoice(body.tool_choice),
    parallel_tool_calls: parallel === true ? false : undefined,
    stop: body.stop_sequences,
    temperature: body.temperature,
    top_p: body.top_p,
    top_k: body.top_k,
    stream: body.stream,
    cache_control: lastCacheControl(body) ?? undefined,
    chat_template_kwargs: thinkingKwargs(body),
    thinking_budget: body.thinking?.type === "enabled" ? body.thinking.budget_tokens : undefined,
    continue_final_message: endsWithPrefill(body),
  };
}

/** Anthropic's prefill: a last message of the assistant's is the reply's beginning, which the reply continues. */
export function endsWithPrefill(body: Pick<CountTokensBody, "messages">): boolean {
  return body.messages.at(-1)?.role === "assistant";
}

/**
 * Anthropic's models think only when the request enables it; a reasoning model's template is told the same
 * (Qwen3's `enable_thinking`, which DeepSeek-R1's and GLM's templates read too; others ignore it).
 */
export function thinkingKwargs(body: Pick<CountTokensBody, "thinking">): { enable_thinking: boolean } {
  return { enable_thinking: body.thinking?.type === "enabled" };
}
