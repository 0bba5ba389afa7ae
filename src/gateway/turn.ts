/** What the gateway's front end hands it: one turn of an agent program (or a one-off), to forward to a backend. */
import type { RetentionHints } from "../core/client-hints.js";

/** The backend API a turn is forwarded in. */
export type BackendApi = "chat" | "completions" | "messages";

export const API_PATHS: Readonly<Record<BackendApi, string>> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  messages: "/v1/messages",
};

export interface ForwardRequest {
  readonly api: BackendApi;
  /** the request's JSON body as the client sent it (the gateway sets `model` and what retention needs) */
  readonly body: Readonly<Record<string, unknown>>;
  readonly stream: boolean;
  /** the client asked for usage in its stream (else the usage chunk the gateway asks for is not passed on) */
  readonly streamUsage: boolean;
  /**
   * the same request as a chat completion, for a backend without this API (Messages on SGLang); the reply
   * says which API answered
   */
  readonly asChat?: Readonly<Record<string, unknown>>;
}

/** The request a backend is sent: in its own API, else as the chat completion it carries. */
export function requestFor(request: ForwardRequest, hasMessagesApi: boolean): ForwardRequest {
  if (request.api !== "messages" || hasMessagesApi || request.asChat === undefined) return request;
  return { api: "chat", body: request.asChat, stream: request.stream, streamUsage: false };
}

export interface GatewayTurn {
  readonly requestId: string;
  /** tenant-scoped program id; null: a one-off request */
  readonly programId: string | null;
  readonly isLastStep: boolean;
  readonly toolHint: string | null;
  readonly retentionHints: RetentionHints;
  /** earlier turns the request carries (the model's answers in its history); null: not known */
  readonly priorTurns: number | null;
  /** tenant and the client's cache_salt: prefixes are shared only under equal salts */
  readonly cacheSalt: string | null;
  /**
   * What decides the prompt, as text (the messages, tools and system prompt, or the raw prompt): the gateway's
   * model of the backend's KV hashes it in blocks and estimates its tokens from it
   */
  readonly promptText: string;
  /** the client's max_tokens; null: the backend's context bounds it */
  readonly maxOutputTokens: number | null;
  readonly request: ForwardRequest;
}
