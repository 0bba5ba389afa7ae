/**
 * The Responses API through the gateway. No engine behind it keeps responses the way OpenAI does
 * (llama-server refuses `previous_response_id`; vLLM keeps them only with its store switched on), so the
 * gateway keeps them: a request is translated into a chat completion as `serve` translates it
 * (responses-input.ts, with the conversation of the response it continues), forwarded as Chat Completions,
 * and the backend's answer translated back into response items and events (responses-output.ts,
 * responses-stream.ts). Kept responses continue with `previous_response_id`, are read with `GET`, listed
 * with `input_items` and forgotten with `DELETE`; a response chain whose client names no program is one
 * program (its first response's), so its turns stay on one backend. Not here: `background` and
 * `conversation` (refused with a 400 that says so).
 */
import type { Context } from "hono";
import type { GenerateUsage } from "../../engine/engine-api.js";
import { readJsonBody } from "../chat/chat-completions.js";
import { ApiError, errorBody, toApiError } from "../errors.js";
import { ContextOverflow, RESPONSES_OVERFLOW_MESSAGE } from "../generation/context-overflow.js";
import { type AppEnv, sseResponse, unixSeconds } from "../generation/generation.js";
import { chatRequestOf } from "../responses/responses-input.js";
import { inputItemsOf, type ListedItem, listItems } from "../responses/responses-items.js";
import {
  assistantTurn,
  outputItems,
  type ResponseMeta,
  type ResponseObject,
  type ResponseStatus,
  responseObject,
} from "../responses/responses-output.js";
import { type ResponsesBody, responsesSchema } from "../responses/responses-schema.js";
import { type LiveRun, ResponseStore } from "../responses/responses-store.js";
import { failedResponseEvents, ResponseEvents } from "../responses/responses-stream.js";
import { backendError } from "./backend-errors.js";
import { ChatReply } from "./chat-reply.js";
import { checkGatewayModel, type GatewayContext, submitTurn } from "./gateway-context.js";
import { turnIdentity } from "./gateway-identity.js";
import { BACKEND_HEADER } from "./gateway-routes.js";

const STORED_RESPONSES = 1024;
const STORED_RESPONSE_BYTES = 256 * 2 ** 20;

type Handler = (c: Context<AppEnv>) => Promise<Response>;

/** What a kept response carries beside it: the program its chain is (so that a continuation finds its backend). */
interface Kept extends LiveRun {
  readonly programId: string | null;
}

const UNSERVED: Readonly<Record<string, string>> = {
  background:
    "background responses are not served by the gateway: send the request without background (streamed, if the client must not wait)",
  conversation:
    "conversation (the Conversations API) is not served by the gateway: continue a response with previous_response_id",
  prompt:
    "prompt (a prompt template stored at OpenAI) is not served here: send its text as instructions and input.",
};

function statusOf(reply: ChatReply): ResponseStatus {
  return reply.finishReason === "length" ? "incomplete" : "completed";
}

function usageOf(reply: ChatReply): GenerateUsage | null {
  return reply.usage;
}

export function gatewayResponsesApi(ctx: GatewayContext) {
  const store = new ResponseStore<Kept>(STORED_RESPONSES, STORED_RESPONSE_BYTES);

  const found = (c: Context<AppEnv>) => {
    const id = c.req.param("id") as string;
    const kept = store.get(c.get("tenant") ?? null, id);
    if (kept === undefined) {
      throw new ApiError(
        404,
        `Response with id '${id}' not found (responses created with store: false are not kept, nor the least recently used past the last ${STORED_RESPONSES}).`,
        "invalid_request_error",
        "not_found",
      );
    }
    return kept;
  };

  const retrieve: Handler = async (c) => c.json(found(c).response);
  const inputItems: Handler = async (c) => c.json(listItems(found(c).inputItems, c.req.query()));
  const remove: Handler = async (c) => {
    found(c);
    const id = c.req.param("id") as string;
    store.delete(c.get("tenant") ?? null, id);
    return c.json({ id, object: "response", deleted: true });
  };

  const create: Handler = async (c) => {
    const parsed = responsesSchema.parse(await readJsonBody(c));
    for (const [param, message] of Object.entries(UNSERVED)) {
      const value = parsed[param as keyof ResponsesBody];
      if (value != null && value !== false)
        throw new ApiError(400, message, "invalid_request_error", "unsupported_parameter", param);
    }
    const body = { ...parsed, store: parsed.store ?? true };
    const model = checkGatewayModel(ctx, body.model);
    const tenant = c.get("tenant") ?? null;
    const previous = store.previous(tenant, body.previous_response_id);
    const request = chatRequestOf(body, previous?.conversation ?? []);
    const chat = request.chat;
    const requestId = ctx.newRequestId(c);
    const meta: ResponseMeta = {
      id: `resp_${requestId}`,
      created_at: unixSeconds(),
      model,
      tools: request.tools,
      body,
    };
    const named = turnIdentity(ctx, c, "responses", body, chat);
    // a chain whose client names no program is one program: its first response's
    const programId = named.programId ?? previous?.run?.programId ?? `${tenant ?? ""}/${meta.id}`;
    const newItems = inputItemsOf(body.input);
    const inputItemsNow = (): ListedItem[] => [
      ...(previous ? [...previous.inputItems, ...previous.response.output] : []),
      ...newItems,
    ];
    const keep = (response: ResponseObject) => {
      if (!body.store) return;
      const conversation = [...request.conversation, assistantTurn(response.output)];
      store.set(tenant, meta.id, {
        conversation,
        response,
        inputItems: inputItemsNow(),
        run: { programId, live: false },
      });
    };
    const { job_id, program_id, session_id, session_params, ...forwarded } = chat;
    const stream = body.stream === true;
    const reply = await submitTurn(ctx, c, {
      requestId,
      programId,
      isLastStep: named.isLastStep,
      toolHint: named.toolHint,
      retentionHints: named.retentionHints,
      priorTurns: chat.messages.filter((m) => m.role === "assistant").length,
      cacheSalt: named.cacheSalt,
      promptText: `${JSON.stringify(chat.tools ?? null)}\n${JSON.stringify(chat.messages)}`,
      maxOutputTokens: chat.max_completion_tokens ?? null,
      request: {
        api: "chat",
        body: { ...forwarded, stream, ...(named.tenant === null ? {} : { cache_salt: named.cacheSalt }) },
        stream,
        streamUsage: false,
      },
    });
    const headers: Record<string, string> = {
      [BACKEND_HEADER]: reply.backend,
      ...(body.store ? { "X-Continuum-Response-Id": meta.id } : {}),
    };
    if (reply.kind === "json") {
      if (reply.status >= 400) {
        const error = backendError(reply.backend, reply.status, reply.body);
        if (error instanceof ContextOverflow) {
          if (!stream) throw error.responsesError();
          const failed = { code: "context_length_exceeded", message: RESPONSES_OVERFLOW_MESSAGE };
          return sseResponse(failedResponseEvents(meta, failed), () => {});
        }
        throw error;
      }
      const answer = new ChatReply();
      answer.whole(reply.body);
      const status = statusOf(answer);
      const output = outputItems(
        { reasoning: answer.reasoning || null, content: answer.content || null, calls: answer.toolCalls },
        status,
        meta.tools,
      );
      const response = responseObject(meta, status, output, usageOf(answer));
      keep(response);
      return c.json(response, 200, headers);
    }
    async function* events(frames: AsyncIterable<{ data: string }>): AsyncGenerator<string> {
      const out = new ResponseEvents(false, meta.tools);
      const inProgress = { response: responseObject(meta, "in_progress", [], null) };
      yield out.frame("response.created", inProgress);
      yield out.frame("response.in_progress", inProgress);
      const answer = new ChatReply();
      let openCall: number | null = null;
      try {
        for await (const frame of frames) {
          const delta = answer.chunk(frame.data);
          if (delta === null) continue;
          yield* out.thinkingDelta(delta.reasoning);
          if (delta.content.length > 0) yield* out.textDelta(delta.content);
          for (const part of delta.argumentParts) {
            if (part.index !== openCall) continue;
            yield* out.callArguments(part.part);
          }
          for (const opened of delta.openedCalls) {
            if (openCall !== null) yield* out.endCall(answer.argumentsOf(openCall), "completed");
            openCall = opened.index;
            yield* out.startCall(opened.id, opened.name);
            const first = delta.argumentParts
              .filter((p) => p.index === opened.index)
              .map((p) => p.part)
              .join("");
            yield* out.callArguments(first);
          }
        }
        const status = statusOf(answer);
        yield* out.endThinking();
        yield* out.endText(status);
        if (openCall !== null) yield* out.endCall(answer.argumentsOf(openCall), status);
        const response = responseObject(meta, status, out.items, usageOf(answer));
        keep(response);
        yield out.frame(status === "completed" ? "response.completed" : "response.incomplete", { response });
      } catch (error) {
        const { error: detail } = errorBody(toApiError(error));
        const lost = {
          ...detail,
          code: "backend_lost",
          message: `backend ${reply.backend} stopped answering in the middle of the reply; send the turn again`,
        };
        yield out.frame("error", { code: lost.code, message: lost.message, param: null, error: lost });
      }
    }
    const response = sseResponse(events(reply.frames), () => {});
    for (const [name, value] of Object.entries(headers)) response.headers.set(name, value);
    return response;
  };

  return { create, retrieve, remove, inputItems };
}
