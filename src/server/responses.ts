/**
 * `POST /v1/responses`: OpenAI's Responses API (what Codex CLI and `openai.responses.create` speak),
 * served by translating the request into a chat completion and its output back into response items.
 * Stateless unless `store: true` (then `previous_response_id` continues it, `GET /v1/responses/{id}` returns
 * it and `DELETE` forgets it); tools the server cannot run are dropped (see responses-input.ts).
 */
import type { Context } from "hono";
import { checkModel, type RequestContext, readJsonBody, startChat } from "./chat-completions.js";
import { type ChatGeneration, readOutput } from "./chat-output.js";
import { ContextOverflow, RESPONSES_OVERFLOW_MESSAGE } from "./context-overflow.js";
import { ApiError } from "./errors.js";
import { type AppEnv, sseResponse, unixSeconds } from "./generation.js";
import { entriesFrom } from "./logprobs.js";
import { chatRequestOf } from "./responses-input.js";
import {
  assistantTurn,
  outputItems,
  type ResponseMeta,
  type ResponseObject,
  responseObject,
  responseStatus,
} from "./responses-output.js";
import { withCodexProgramId } from "./responses-program.js";
import { responsesSchema, type TextFormat } from "./responses-schema.js";
import { ResponseStore, type StoredResponse } from "./responses-store.js";
import { failedResponseEvents, responseEventStream } from "./responses-stream.js";
import { responseFormatGrammar } from "./sampling.js";
import type { ResponseFormatInput } from "./schemas.js";

/** How many `store: true` responses are kept (least recently used first out). */
export const STORED_RESPONSES = 1024;

/** Response header listing the request's tool types that were dropped (comma-separated). */
export const DROPPED_TOOLS_HEADER = "X-Continuum-Dropped-Tools";

type Handler = (c: Context<AppEnv>) => Promise<Response>;

/** `text.format` as chat completions' `response_format` (its schema's fields under `json_schema`). */
function responseFormatOf(format: TextFormat | null | undefined): ResponseFormatInput | null {
  if (format?.type !== "json_schema") return format ?? null;
  const { type, description, ...jsonSchema } = format;
  return { type, json_schema: { ...jsonSchema, ...(description ? { description } : {}) } };
}

/** A stored response this tenant may see, else OpenAI's 404. */
function storedOrNotFound(store: ResponseStore, c: Context<AppEnv>): StoredResponse {
  const id = c.req.param("id") as string;
  const found = store.get(c.get("tenant") ?? null, id);
  if (found === undefined) {
    throw new ApiError(
      404,
      `Response with id '${id}' not found (only responses created with store: true are kept, the last ${STORED_RESPONSES}).`,
      "invalid_request_error",
      "not_found",
    );
  }
  return found;
}

/** The routes of the Responses API: create (`POST /v1/responses`), retrieve and delete a stored response. */
export function responsesApi(
  ctx: RequestContext,
  log: (message: string) => void,
): { create: Handler; retrieve: Handler; remove: Handler } {
  const store = new ResponseStore(STORED_RESPONSES);
  const announcedDrops = new Set<string>();
  const retrieve: Handler = async (c) => c.json(storedOrNotFound(store, c).response);
  const remove: Handler = async (c) => {
    storedOrNotFound(store, c);
    const id = c.req.param("id") as string;
    store.delete(c.get("tenant") ?? null, id);
    return c.json({ id, object: "response", deleted: true });
  };
  const create: Handler = async (c) => {
    const body = responsesSchema.parse(await readJsonBody(c));
    const model = checkModel(ctx, body.model);
    const tenant = c.get("tenant") ?? null;
    const previousId = body.previous_response_id;
    const previous = previousId ? store.get(tenant, previousId)?.conversation : [];
    if (previous === undefined) {
      throw new ApiError(
        404,
        `Previous response with id '${previousId}' not found (only responses created with store: true are kept, the last ${STORED_RESPONSES}).`,
        "invalid_request_error",
        "previous_response_not_found",
        "previous_response_id",
      );
    }
    const request = chatRequestOf(body, previous);
    for (const type of request.droppedTools) {
      if (announcedDrops.has(type)) continue;
      announcedDrops.add(type);
      log(`continuum server: /v1/responses drops tools of type "${type}" (only function tools run here)`);
    }
    const chat = withCodexProgramId(request.chat, body, (name) => c.req.header(name));
    const metaOf = (requestId: string): ResponseMeta => ({
      id: `resp_${requestId}`,
      created_at: unixSeconds(),
      model,
      tools: request.tools,
      body,
    });
    const grammar = responseFormatGrammar(responseFormatOf(body.text?.format), "text.format.schema");
    const structured = grammar === null ? {} : { formatGrammar: { grammar, param: "text.format" } };
    let started: ChatGeneration;
    try {
      started = await startChat(c, ctx, chat, chat.max_completion_tokens, structured);
    } catch (error) {
      if (!(error instanceof ContextOverflow)) throw error;
      if (!body.stream) throw error.responsesError();
      const failed = { code: "context_length_exceeded", message: RESPONSES_OVERFLOW_MESSAGE };
      return sseResponse(failedResponseEvents(metaOf(ctx.newRequestId(c)), failed), () => {});
    }
    const { requestId, generation } = started;
    const meta = metaOf(requestId);
    const keep = (response: ResponseObject) => {
      if (!body.store) return;
      const conversation = [...request.conversation, assistantTurn(response.output)];
      store.set(tenant, meta.id, { conversation, response });
    };
    const dropped = request.droppedTools.join(",");
    if (body.stream) {
      const response = sseResponse(responseEventStream(started, meta, keep), () => generation.abort());
      if (dropped) response.headers.set(DROPPED_TOOLS_HEADER, dropped);
      return response;
    }
    const done = await generation.done();
    if (done === null) throw new Error("the engine ended the request without a result");
    const status = responseStatus(done);
    const { reasoning, content, calls, answerStart } = readOutput(
      done.text,
      started,
      done.finishReason !== "stop",
    );
    const answerBytes = Buffer.byteLength(done.text.slice(0, answerStart));
    const output = outputItems(
      {
        reasoning,
        content,
        calls,
        ...(done.logprobs ? { answerLogprobs: entriesFrom(done.logprobs, answerBytes) } : {}),
      },
      status,
    );
    const response = responseObject(meta, status, output, done.usage);
    keep(response);
    if (dropped) c.header(DROPPED_TOOLS_HEADER, dropped);
    return c.json(response);
  };
  return { create, retrieve, remove };
}
