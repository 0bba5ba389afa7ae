/**
 * The gateway's Chat Completions, Completions and Messages routes: the request is read and checked as `serve`
 * reads it (its schema, its model, its program), queued on the gateway, forwarded in the same API to the
 * backend its scheduler chose, and the backend's answer passed through as it comes: a whole JSON body, or its
 * stream frame by frame. A backend's error is the client's error in its API's shape; a stream its backend cut
 * ends with an error event in that API's shape (`backend_lost`), as `continuum cluster` ends one.
 */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { BackendReply } from "../../gateway/backends/forward.js";
import type { SseFrame } from "../../gateway/backends/sse.js";
import { writeSse } from "../../gateway/backends/sse.js";
import type { BackendApi, GatewayTurn } from "../../gateway/turn.js";
import { readJsonBody } from "../chat/chat-completions.js";
import { type AppEnv, SSE_DONE, sseData, sseResponse } from "../generation/generation.js";
import { chatCompletionRequest, chatMessages } from "../messages/messages-request.js";
import { countTokensSchema, messagesSchema } from "../messages/messages-schema.js";
import { chatCompletionSchema, completionSchema } from "../schemas.js";
import { backendError, unavailable } from "./backend-errors.js";
import { ChatReply } from "./chat-reply.js";
import { checkGatewayModel, type GatewayContext, submitTurn } from "./gateway-context.js";
import { type TurnIdentity, turnIdentity } from "./gateway-identity.js";
import { messageEventsFromChat, messageFromChat } from "./messages-from-chat.js";

type Json = Record<string, unknown>;

/** Response header naming the backend that answered (b1, b2... in the order of --backend). */
export const BACKEND_HEADER = "X-Continuum-Backend";

/** The error event that ends a stream whose backend went away, in the API's own shape. */
function lostFrames(api: BackendApi, backend: string, message: string): string {
  const text = `backend ${backend} stopped answering in the middle of the reply (${message}); send the turn again`;
  if (api === "messages") {
    return writeSse({
      event: "error",
      data: JSON.stringify({ type: "error", error: { type: "api_error", message: text } }),
    });
  }
  return (
    sseData({ error: { message: text, type: "server_error", param: null, code: "backend_lost" } }) + SSE_DONE
  );
}

/** A backend's stream passed to the client frame by frame; `onFrame` reads each on the way. */
export function passThroughStream(
  reply: Extract<BackendReply, { kind: "sse" }>,
  api: BackendApi,
  onFrame?: (frame: SseFrame) => void,
  onEnd?: () => void,
): Response {
  async function* frames(): AsyncGenerator<string> {
    try {
      for await (const frame of reply.frames) {
        onFrame?.(frame);
        yield writeSse(frame);
      }
      onEnd?.();
    } catch (error) {
      yield lostFrames(api, reply.backend, error instanceof Error ? error.message : String(error));
    }
  }
  const response = sseResponse(frames(), () => {});
  response.headers.set(BACKEND_HEADER, reply.backend);
  return response;
}

/** The backend's whole answer: its JSON as it is, or its error as the client's. */
function passThroughJson(c: Context<AppEnv>, reply: Extract<BackendReply, { kind: "json" }>): Response {
  if (reply.status >= 400) throw backendError(reply.backend, reply.status, reply.body);
  c.header(BACKEND_HEADER, reply.backend);
  return c.json(reply.body as Json, reply.status as ContentfulStatusCode);
}

function turnOf(
  ctx: GatewayContext,
  c: Context<AppEnv>,
  identity: TurnIdentity,
  api: BackendApi,
  body: Json,
  promptText: string,
  maxOutputTokens: number | null,
  priorTurns: number | null,
): GatewayTurn {
  const stream = body["stream"] === true;
  const options = body["stream_options"] as { include_usage?: boolean } | undefined;
  return {
    requestId: ctx.newRequestId(c),
    programId: identity.programId,
    isLastStep: identity.isLastStep,
    toolHint: identity.toolHint,
    retentionHints: identity.retentionHints,
    priorTurns,
    cacheSalt: identity.cacheSalt,
    promptText,
    maxOutputTokens,
    // tenants never share a prefix on engines that read vLLM's cache_salt (vLLM, Continuum)
    request: {
      api,
      body:
        identity.tenant === null || api === "messages" ? body : { ...body, cache_salt: identity.cacheSalt },
      stream,
      streamUsage: options?.include_usage === true,
    },
  };
}

export async function gatewayChat(c: Context<AppEnv>, ctx: GatewayContext): Promise<Response> {
  const raw = (await readJsonBody(c)) as Json;
  const body = chatCompletionSchema.parse(raw);
  checkGatewayModel(ctx, body.model);
  const identity = turnIdentity(ctx, c, "chat", raw, body, body.messages);
  const promptText = `${JSON.stringify(body.tools ?? null)}\n${JSON.stringify(body.messages)}`;
  const priorTurns = body.messages.filter((m) => m.role === "assistant").length;
  const turn = turnOf(
    ctx,
    c,
    identity,
    "chat",
    raw,
    promptText,
    body.max_completion_tokens ?? body.max_tokens ?? null,
    priorTurns,
  );
  const reply = await submitTurn(ctx, c, turn);
  const remember = (chat: ChatReply) => {
    if (!identity.implicit || identity.programId === null) return;
    ctx.conversations.answered(
      identity.tenant,
      body.messages,
      chat.content,
      chat.toolCalls,
      identity.programId,
    );
  };
  if (reply.kind === "json") {
    const response = passThroughJson(c, reply);
    const chat = new ChatReply();
    chat.whole(reply.body);
    remember(chat);
    return response;
  }
  const chat = new ChatReply();
  return passThroughStream(
    reply,
    "chat",
    (frame) => chat.chunk(frame.data),
    () => remember(chat),
  );
}

export async function gatewayCompletions(c: Context<AppEnv>, ctx: GatewayContext): Promise<Response> {
  const raw = (await readJsonBody(c)) as Json;
  const body = completionSchema.parse(raw);
  checkGatewayModel(ctx, body.model);
  const identity = turnIdentity(ctx, c, "completions", raw, body);
  const promptText = typeof body.prompt === "string" ? body.prompt : JSON.stringify(body.prompt);
  const turn = turnOf(ctx, c, identity, "completions", raw, promptText, body.max_tokens ?? null, null);
  const reply = await submitTurn(ctx, c, turn);
  if (reply.kind === "json") {
    try {
      return passThroughJson(c, reply);
    } catch (error) {
      throw "completionsError" in (error as object)
        ? (error as { completionsError(): Error }).completionsError()
        : error;
    }
  }
  return passThroughStream(reply, "completions");
}

export async function gatewayMessages(c: Context<AppEnv>, ctx: GatewayContext): Promise<Response> {
  const raw = (await readJsonBody(c)) as Json;
  const body = messagesSchema.parse(raw);
  const model = checkGatewayModel(ctx, body.model);
  // turn fields come from the headers (a Messages body has no is_last_step), the program as serve reads it
  const identity = turnIdentity(ctx, c, "messages", raw, {});
  const promptText = `${JSON.stringify(body.tools ?? null)}\n${JSON.stringify(body.system ?? null)}\n${JSON.stringify(body.messages)}`;
  const priorTurns = body.messages.filter((m) => m.role === "assistant").length;
  const base = turnOf(ctx, c, identity, "messages", raw, promptText, body.max_tokens, priorTurns);
  // for a backend without the Messages API: the chat completion serve makes of it
  const asChat = chatCompletionSchema.parse(chatCompletionRequest(body));
  const turn = { ...base, request: { ...base.request, asChat: { ...asChat, stream: body.stream === true } } };
  const reply = await submitTurn(ctx, c, turn);
  if (reply.api === "messages") {
    if (reply.kind === "json") return passThroughJson(c, reply);
    return passThroughStream(reply, "messages");
  }
  const meta = { id: `msg_${turn.requestId}`, model };
  if (reply.kind === "json") {
    if (reply.status >= 400) throw backendError(reply.backend, reply.status, reply.body);
    c.header(BACKEND_HEADER, reply.backend);
    return c.json(messageFromChat(reply.body, meta));
  }
  async function* events(frames: AsyncIterable<SseFrame>): AsyncGenerator<string> {
    try {
      yield* messageEventsFromChat(frames, meta);
    } catch (error) {
      yield lostFrames("messages", reply.backend, error instanceof Error ? error.message : String(error));
    }
  }
  const response = sseResponse(events(reply.frames), () => {});
  response.headers.set(BACKEND_HEADER, reply.backend);
  return response;
}

/**
 * `POST /v1/messages/count_tokens`: the backend's own count where it has one; else its tokenizer over the
 * request as chat messages (vLLM's `/tokenize` with `messages`), which counts what its template renders.
 */
export async function gatewayCountTokens(c: Context<AppEnv>, ctx: GatewayContext): Promise<Response> {
  const raw = (await readJsonBody(c)) as Json;
  const body = countTokensSchema.parse(raw);
  checkGatewayModel(ctx, body.model);
  const backend = ctx.gateway.upBackends[0];
  const info = backend?.info;
  if (backend === undefined || info == null) throw unavailable("no backend is available", ctx.retryAfterS);
  const post = async (path: string, payload: unknown) => {
    const response = await fetch(`${backend.spec.url}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(payload),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {}
    return { status: response.status, body: parsed };
  };
  if (info.countTokensApi) {
    const reply = await post("/v1/messages/count_tokens", { ...raw, model: info.modelId });
    if (reply.status >= 400) throw backendError(backend.spec.name, reply.status, reply.body);
    return c.json(reply.body as Json);
  }
  const reply = await post("/tokenize", { model: info.modelId, messages: chatMessages(body) });
  if (reply.status >= 400) throw backendError(backend.spec.name, reply.status, reply.body);
  const count = (reply.body as Json)["count"];
  if (typeof count !== "number") throw backendError(backend.spec.name, 502, "its /tokenize gave no count");
  return c.json({ input_tokens: count });
}
