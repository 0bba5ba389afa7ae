/**
 * `POST /tokenize` and `POST /detokenize`: the model's tokenizer as vLLM serves it (a prompt, or a chat
 * rendered exactly as /v1/chat/completions renders it, so `count` is that request's `prompt_tokens`) and as
 * llama-server serves it (a request with `content` is answered in llama-server's shape).
 */
import { isUtf8 } from "node:buffer";
import type { Context } from "hono";
import { ApiError } from "../errors.js";
import type { AppEnv } from "../generation/generation.js";
import { checkTokenIds } from "../generation/token-ids.js";
import type { ChatCompletionBody } from "../schemas.js";
import {
  checkModel,
  type RequestContext,
  readJsonBody,
  renderChatPrompt,
  toolSetup,
} from "./chat-completions.js";
import { type ChatTokenizeRequest, detokenizeSchema, parseTokenizeRequest } from "./tokenize-schema.js";

const utf8 = (bytes: Uint8Array) => Buffer.from(bytes).toString("utf8");

/** A chat's prompt as a chat completion of the same messages and tools renders it. */
function chatPrompt(c: Context<AppEnv>, ctx: RequestContext, request: ChatTokenizeRequest): string {
  if (request.add_special_tokens) {
    throw ApiError.badRequest(
      "add_special_tokens must be false for a chat: its prompt gets the model's special tokens as a chat completion's does, and true would add them twice",
      "add_special_tokens",
    );
  }
  if (request.chat_template != null) {
    throw ApiError.badRequest(
      "chat_template is not supported: chats are rendered with the server's template (serve --chat-template)",
      "chat_template",
    );
  }
  const body: ChatCompletionBody = {
    messages: request.messages,
    tools: request.tools,
    chat_template_kwargs: request.chat_template_kwargs,
    add_generation_prompt: request.add_generation_prompt,
    continue_final_message: request.continue_final_message,
  };
  const tools = toolSetup(body, ctx.generatedReplies.scoped(c.get("tenant") ?? null, body.messages));
  return renderChatPrompt(ctx, body, tools);
}

/** llama-server's piece: the text when its bytes are whole UTF-8, else the bytes. */
function llamaPiece(bytes: Uint8Array): string | number[] {
  return isUtf8(bytes) ? utf8(bytes) : Array.from(bytes);
}

export async function tokenize(c: Context<AppEnv>, ctx: RequestContext): Promise<Response> {
  const { form, request } = parseTokenizeRequest(await readJsonBody(c));
  checkModel(ctx, request.model);
  const { engine } = ctx;
  if (form === "content") {
    if (request.parse_special === false) {
      throw ApiError.badRequest(
        "parse_special: false is not supported: special tokens written in the text are always recognised",
        "parse_special",
      );
    }
    const ids = await engine.tokenize(request.content, { addSpecial: request.add_special ?? false });
    if (!request.with_pieces) return c.json({ tokens: ids });
    const pieces = engine.tokenPieces(ids);
    return c.json({ tokens: ids.map((id, i) => ({ id, piece: llamaPiece(pieces[i]!) })) });
  }
  const ids =
    form === "chat"
      ? await engine.tokenize(chatPrompt(c, ctx, request), { addSpecial: true })
      : await engine.tokenize(request.prompt, { addSpecial: request.add_special_tokens ?? true });
  return c.json({
    count: ids.length,
    max_model_len: engine.maxContextTokens,
    tokens: ids,
    token_strs: request.return_token_strs ? engine.tokenPieces(ids).map(utf8) : null,
  });
}

/** The tokens' text as the model's tokenizer decodes them: vLLM's `prompt`, llama-server's `content`. */
export async function detokenize(c: Context<AppEnv>, ctx: RequestContext): Promise<Response> {
  const { model, tokens } = detokenizeSchema.parse(await readJsonBody(c));
  checkModel(ctx, model);
  checkTokenIds(tokens, ctx.engine.vocabSize, "tokens", "tokens");
  const text = ctx.engine.detokenize(tokens);
  return c.json({ prompt: text, content: text });
}
