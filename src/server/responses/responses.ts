/**
 * `POST /v1/responses`: OpenAI's Responses API (what Codex CLI and `openai.responses.create` speak),
 * served by translating the request into a chat completion and its output back into response items.
 * Kept unless `store: false`, as at OpenAI (then `previous_response_id` continues it, `GET /v1/responses/{id}`
 * returns it, `GET /v1/responses/{id}/input_items` lists its input items and `DELETE` forgets it); tools the server
 * cannot run are dropped (see responses-input.ts). `background: true` runs it detached from the connection,
 * polled with `GET` and stopped with `POST /v1/responses/{id}/cancel` (responses-background.ts).
 */
import type { Context } from "hono";
import { checkModel, type RequestContext, readJsonBody, startChat } from "../chat/chat-completions.js";
import { ApiError } from "../errors.js";
import { ContextOverflow, RESPONSES_OVERFLOW_MESSAGE } from "../generation/context-overflow.js";
import {
  type AppEnv,
  type DoneEvent,
  type InflightRequests,
  sseResponse,
  unixSeconds,
} from "../generation/generation.js";
import { entriesFrom } from "../generation/logprobs.js";
import { responseFormatGrammar } from "../generation/sampling.js";
import { type ChatGeneration, readOutput } from "../output/chat-output.js";
import {
  CONVERSATION_ID_HEADER,
  RESPONSE_ID_HEADER,
  requestProgramOf,
} from "../programs/program-identity.js";
import type { ResponseFormatInput } from "../schemas.js";
import type { ConversationsApi } from "./conversations.js";
import { BackgroundRun, detachedContext } from "./responses-background.js";
import { chatRequestOf, inputMessages } from "./responses-input.js";
import { inputItemsOf, type ListedItem, listItems } from "./responses-items.js";
import {
  assistantTurn,
  outputItems,
  type ResponseMeta,
  type ResponseObject,
  responseObject,
  responseStatus,
} from "./responses-output.js";
import {
  conversationIdOf,
  type ResponsesBody,
  responsesSchema,
  type TextFormat,
} from "./responses-schema.js";
import { ResponseStore, type StoredResponse } from "./responses-store.js";
import { failedResponseEvents, responseEventStream } from "./responses-stream.js";

/** How many stored responses are kept (least recently used first out)... */
export const STORED_RESPONSES = 1024;
/** ...and in how much memory at most: a client that sends its whole input every turn stores it every turn. */
export const STORED_RESPONSE_BYTES = 256 * 2 ** 20;

/** How many ended background responses keep their events for `GET ...?stream=true` (last ended first kept). */
export const REPLAYABLE_RESPONSES = 64;

/** Response header listing the request's tool types that were dropped (comma-separated). */
export const DROPPED_TOOLS_HEADER = "X-Continuum-Dropped-Tools";

type Handler = (c: Context<AppEnv>) => Promise<Response>;

/**
 * State kept at OpenAI that this server does not keep: refused by name, since dropping it would run the
 * turn without the instructions it stands for.
 */
const UNSERVED_STATE = {
  prompt:
    "prompt (a prompt template stored at OpenAI) is not served here: send its text as instructions and input.",
} as const;

/** `text.format` as chat completions' `response_format` (its schema's fields under `json_schema`). */
function responseFormatOf(format: TextFormat | null | undefined): ResponseFormatInput | null {
  if (format?.type !== "json_schema") return format ?? null;
  const { type, description, ...jsonSchema } = format;
  return { type, json_schema: { ...jsonSchema, ...(description ? { description } : {}) } };
}

/** A stored response this tenant may see, else OpenAI's 404. */
function storedOrNotFound(
  store: ResponseStore<BackgroundRun>,
  c: Context<AppEnv>,
): StoredResponse<BackgroundRun> {
  const id = c.req.param("id") as string;
  const found = store.get(c.get("tenant") ?? null, id);
  if (found === undefined) {
    throw new ApiError(
      404,
      `Response with id '${id}' not found (responses created with store: false are not kept, nor the least recently used past the last ${STORED_RESPONSES}).`,
      "invalid_request_error",
      "not_found",
    );
  }
  return found;
}

/** A streamed retrieve's `starting_after`: the sequence number after which its events are sent (-1: all). */
function startingAfter(c: Context<AppEnv>): number {
  const given = c.req.query("starting_after");
  if (given === undefined) return -1;
  const after = Number(given);
  if (given.trim() === "" || !Number.isInteger(after) || after < 0) {
    throw ApiError.badRequest(
      `starting_after must be a sequence number (an integer, 0 or more), not '${given}'`,
      "starting_after",
      "invalid_value",
    );
  }
  return after;
}

/**
 * The request with each `item_reference` input item replaced by the item it names, from this tenant's kept
 * responses (their input items and output); a reference to no kept item is a 400 naming it.
 */
function withReferencedItems(
  body: ResponsesBody,
  store: ResponseStore<BackgroundRun>,
  tenant: string | null,
): ResponsesBody {
  if (typeof body.input === "string" || !body.input.some((item) => item.type === "item_reference"))
    return body;
  const input = body.input.map((item, i) => {
    if (item.type !== "item_reference") return item;
    const id = (item as { id?: unknown }).id;
    const found = typeof id === "string" ? store.findItem(tenant, id) : undefined;
    if (found === undefined) {
      throw ApiError.badRequest(
        `Item with id '${String(id)}' not found (items of responses created with store: false are not kept, nor those of the least recently used past the last ${STORED_RESPONSES}).`,
        `input[${i}].id`,
        "invalid_value",
      );
    }
    return found as typeof item;
  });
  return { ...body, input };
}

/** OpenAI's refusal to cancel a response that is not a live background one. */
function cannotCancel(message: string): ApiError {
  return new ApiError(400, message, "invalid_request_error", null, "response_id");
}

export interface ResponsesRoutes {
  readonly create: Handler;
  readonly retrieve: Handler;
  readonly remove: Handler;
  readonly cancel: Handler;
  readonly inputItems: Handler;
}

/**
 * The routes of the Responses API: create (`POST /v1/responses`), retrieve (`GET`, also as a background
 * response's events), delete, cancel a background response, and list a stored response's input items.
 * `inflight`: what a background response counts in until it ends, so that a graceful stop waits for it
 * and a forced one aborts it (it ends `failed` then). `conversations`: where a response with
 * `conversation` finds the items before its input, and adds its input and output once it has ended
 * (completed or incomplete; a failed or cancelled one adds nothing).
 */
export function responsesApi(
  ctx: RequestContext,
  log: (message: string) => void,
  inflight: InflightRequests,
  conversations: ConversationsApi,
): ResponsesRoutes {
  const store = new ResponseStore<BackgroundRun>(STORED_RESPONSES, STORED_RESPONSE_BYTES);
  const announcedDrops = new Set<string>();
  // the ended background runs whose events are kept, oldest first
  const replayable: BackgroundRun[] = [];
  const keepEvents = (run: BackgroundRun) => {
    if (!run.replayable) return;
    replayable.push(run);
    if (replayable.length > REPLAYABLE_RESPONSES) replayable.shift()?.forgetEvents();
  };

  const retrieve: Handler = async (c) => {
    const found = storedOrNotFound(store, c);
    if (c.req.query("stream") !== "true") return c.json(found.response);
    const after = startingAfter(c);
    const { run } = found;
    if (run === undefined) {
      throw ApiError.badRequest(
        "This response cannot be streamed because it was not created with background=true.",
        "stream",
      );
    }
    if (!run.streamed) {
      throw ApiError.badRequest(
        "This response cannot be streamed because it was not created with stream=true.",
        "stream",
      );
    }
    if (!run.replayable) {
      throw ApiError.badRequest(
        `The events of this response are no longer kept (those of the last ${REPLAYABLE_RESPONSES} background responses to end are); GET it without stream.`,
        "stream",
      );
    }
    return sseResponse(run.events(after), () => {});
  };

  const remove: Handler = async (c) => {
    const found = storedOrNotFound(store, c);
    if (found.run?.live) {
      throw ApiError.badRequest(
        "Cannot delete an in-flight response: cancel it (POST /v1/responses/{id}/cancel) or wait for it to end.",
        "response_id",
      );
    }
    found.run?.forgetEvents();
    const id = c.req.param("id") as string;
    store.delete(c.get("tenant") ?? null, id);
    return c.json({ id, object: "response", deleted: true });
  };

  const cancel: Handler = async (c) => {
    const { run } = storedOrNotFound(store, c);
    if (run === undefined) throw cannotCancel("Cannot cancel a synchronous response.");
    const { status } = run.response;
    if (status === "completed" || status === "failed")
      throw cannotCancel(`Cannot cancel a ${status} response.`);
    if (status === "incomplete") throw cannotCancel("Cannot cancel an incomplete response.");
    // live: cancelled now; cancelled already: the same response again
    return c.json(run.cancel());
  };

  const inputItems: Handler = async (c) => {
    const { inputItems: items } = storedOrNotFound(store, c);
    return c.json(listItems(items, c.req.query()));
  };

  const create: Handler = async (c) => {
    const parsed = responsesSchema.parse(await readJsonBody(c));
    for (const [param, message] of Object.entries(UNSERVED_STATE)) {
      if (parsed[param as keyof typeof UNSERVED_STATE] != null)
        throw new ApiError(400, message, "invalid_request_error", "unsupported_parameter", param);
    }
    if (parsed.background && parsed.store === false) {
      throw new ApiError(
        400,
        "background: true needs store: true (a background response is kept to be polled); leave store out or set it to true.",
        "invalid_request_error",
        "unsupported_parameter",
        "background",
      );
    }
    // `store` left out means true, as at OpenAI (`openai.responses.create` then `previous_response_id`)
    const body = { ...parsed, store: parsed.store ?? true };
    const model = checkModel(ctx, body.model);
    const tenant = c.get("tenant") ?? null;
    const previousId = body.previous_response_id;
    const previous = store.previous(tenant, previousId);
    if (previous?.run?.live) {
      throw ApiError.badRequest(
        `Previous response with id '${previousId}' is still ${previous.response.status}: wait for it to end (or cancel it) before continuing it.`,
        "previous_response_id",
      );
    }
    const conversationId = conversationIdOf(body.conversation);
    if (conversationId !== null && previousId) {
      throw ApiError.badRequest(
        "Mutually exclusive parameters: give either previous_response_id or conversation, not both.",
        "conversation",
      );
    }
    const conversation = conversationId === null ? null : conversations.find(tenant, conversationId);
    // the conversation's items as they are now: a response ending meanwhile adds to the list, not to this copy
    const conversationItems = conversation?.items.slice() ?? [];
    const given = withReferencedItems(body, store, tenant);
    const request = chatRequestOf(
      given,
      previous?.conversation ??
        inputMessages(conversationItems as unknown as ResponsesBody["input"], "conversation.items"),
    );
    const newItems = inputItemsOf(given.input);
    if (conversation !== null) conversations.checkRoom(conversation, newItems);
    // what the model sees before its output: the previous response's items and output, or the
    // conversation's items, then this input
    const inputItems = (): ListedItem[] => [
      ...(previous ? [...previous.inputItems, ...previous.response.output] : []),
      ...conversationItems,
      ...newItems,
    ];
    /** Adds this input and the output of `response` to the conversation, unless the response was stopped. */
    const extendConversation = (response: ResponseObject, done: DoneEvent | null) => {
      if (conversationId === null || done?.finishReason === "abort") return;
      if (response.status !== "completed" && response.status !== "incomplete") return;
      conversations.append(tenant, conversationId, [...newItems, ...response.output]);
    };
    for (const type of request.tools.dropped) {
      if (announcedDrops.has(type)) continue;
      announcedDrops.add(type);
      log(
        `continuum server: /v1/responses drops tools of type "${type}" (function and custom tools run here, also those in a namespace)`,
      );
    }
    const chat = request.chat;
    const program = requestProgramOf("responses", body, (name) => c.req.header(name));
    const limit = { tokens: body.max_output_tokens ?? null, field: "max_output_tokens", capToContext: false };
    const metaOf = (requestId: string): ResponseMeta => ({
      id: `resp_${requestId}`,
      created_at: unixSeconds(),
      model,
      tools: request.tools,
      body,
    });
    const grammar = responseFormatGrammar(responseFormatOf(body.text?.format), "text.format.schema");
    const options = {
      programId: program.id,
      parentProgramId: program.parentId,
      ...(grammar === null ? {} : { formatGrammar: { grammar, param: "text.format" } }),
    };
    const dropped = request.tools.dropped.join(",");
    const headersFor = (meta: ResponseMeta): Record<string, string> => ({
      ...(dropped ? { [DROPPED_TOOLS_HEADER]: dropped } : {}),
      ...(body.store ? { [RESPONSE_ID_HEADER]: meta.id } : {}),
      ...(conversationId === null ? {} : { [CONVERSATION_ID_HEADER]: conversationId }),
    });
    const withHeaders = (response: Response, meta: ResponseMeta): Response => {
      for (const [name, value] of Object.entries(headersFor(meta))) response.headers.set(name, value);
      return response;
    };

    if (body.background) {
      // in flight until the run ends, not with this exchange; its generation answers to no client signal
      const exchange = inflight.begin();
      let started: ChatGeneration;
      try {
        // queued on the engine, not waited for: the response is returned at once
        started = await startChat(
          detachedContext(c, exchange),
          ctx,
          { ...chat, stream: true },
          limit,
          options,
        );
      } catch (error) {
        inflight.end(exchange);
        throw error instanceof ContextOverflow ? error.responsesError() : error;
      }
      const meta = metaOf(started.requestId);
      const run = new BackgroundRun(started, meta, {
        conversation: request.conversation,
        inputItems: inputItems(),
        streamed: body.stream === true,
        exchange,
        onEnd: (ended) => {
          inflight.end(exchange);
          keepEvents(ended);
          extendConversation(ended.response, null);
        },
      });
      store.set(tenant, meta.id, run.record);
      run.start();
      if (body.stream) {
        // the client going away leaves the run going: its events can be picked up again with GET
        return withHeaders(
          sseResponse(run.events(-1), () => {}),
          meta,
        );
      }
      return c.json(run.response, 200, headersFor(meta));
    }

    let started: ChatGeneration;
    try {
      started = await startChat(c, ctx, chat, limit, options);
    } catch (error) {
      if (!(error instanceof ContextOverflow)) throw error;
      if (!body.stream) throw error.responsesError();
      const failed = { code: "context_length_exceeded", message: RESPONSES_OVERFLOW_MESSAGE };
      return sseResponse(failedResponseEvents(metaOf(ctx.newRequestId(c)), failed), () => {});
    }
    const { requestId, generation } = started;
    const meta = metaOf(requestId);
    const keep = (response: ResponseObject, done: DoneEvent) => {
      extendConversation(response, done);
      if (!body.store) return;
      const conversation = [...request.conversation, assistantTurn(response.output)];
      store.set(tenant, meta.id, { conversation, response, inputItems: inputItems() });
    };
    if (body.stream) {
      return withHeaders(
        sseResponse(responseEventStream(started, meta, keep), () => generation.abort()),
        meta,
      );
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
      meta.tools,
    );
    const response = responseObject(meta, status, output, done.usage);
    keep(response, done);
    return c.json(response, 200, headersFor(meta));
  };
  return { create, retrieve, remove, cancel, inputItems };
}
