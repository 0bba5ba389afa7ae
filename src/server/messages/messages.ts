/**
 * `POST /v1/messages` and `POST /v1/messages/count_tokens`, the Anthropic Messages API (what Claude Code
 * and @anthropic-ai/sdk speak): the request is translated into a chat completion and generated exactly
 * as `/v1/chat/completions` generates it; only the response shapes differ.
 */
import type { Context } from "hono";
import {
  checkModel,
  type RequestContext,
  readJsonBody,
  renderChatPrompt,
  startChat,
  toolSetup,
} from "../chat/chat-completions.js";
import { type AppEnv, sseResponse } from "../generation/generation.js";
import { readOutput } from "../output/chat-output.js";
import { requestProgramOf } from "../programs/program-identity.js";
import { chatCompletionSchema } from "../schemas.js";
import {
  chatCompletionRequest,
  chatMessages,
  chatToolChoice,
  chatTools,
  endsWithPrefill,
  thinkingKwargs,
} from "./messages-request.js";
import { messagesUsage, stopReason, stopSequence, thinkingBlock, toolUseBlock } from "./messages-response.js";
import { countTokensSchema, messagesSchema } from "./messages-schema.js";
import { messagesStreamEvents } from "./messages-stream.js";

export async function messages(c: Context<AppEnv>, ctx: RequestContext): Promise<Response> {
  const request = messagesSchema.parse(await readJsonBody(c));
  const model = checkModel(ctx, request.model);
  const program = requestProgramOf("messages", request, (name) => c.req.header(name));
  const body = chatCompletionSchema.parse(chatCompletionRequest(request));
  // Claude Code asks for its model's largest output: more than the context leaves is taken
  const limit = { tokens: request.max_tokens, field: "max_tokens", capToContext: true };
  const started = await startChat(c, ctx, body, limit, {
    programId: program.id,
    parentProgramId: program.parentId,
  });
  const { requestId, generation } = started;
  const meta = { id: `msg_${requestId}`, model };
  if (body.stream) {
    return sseResponse(messagesStreamEvents(started, meta), () => generation.abort());
  }
  const done = await generation.done();
  if (done === null) throw new Error("the engine ended the request without a result");
  const { reasoning, content, calls } = readOutput(done.text, started, done.finishReason !== "stop");
  return c.json({
    ...meta,
    type: "message",
    role: "assistant",
    content: [
      ...(reasoning ? [thinkingBlock(reasoning)] : []),
      ...(content ? [{ type: "text", text: content }] : []),
      ...calls.map(toolUseBlock),
    ],
    stop_reason: stopReason(done, calls),
    stop_sequence: stopSequence(done, calls),
    usage: messagesUsage(done.usage),
  });
}

export async function countMessageTokens(c: Context<AppEnv>, ctx: RequestContext): Promise<Response> {
  const request = countTokensSchema.parse(await readJsonBody(c));
  checkModel(ctx, request.model);
  const body = chatCompletionSchema.parse({
    messages: chatMessages(request),
    tools: chatTools(request.tools),
    tool_choice: chatToolChoice(request.tool_choice),
    chat_template_kwargs: thinkingKwargs(request),
    continue_final_message: endsWithPrefill(request),
  });
  const prompt = renderChatPrompt(
    ctx,
    body,
    toolSetup(body, ctx.generatedReplies.scoped(c.get("tenant") ?? null, body.messages)),
  );
  return c.json({ input_tokens: await ctx.engine.countPromptTokens(prompt) });
}
