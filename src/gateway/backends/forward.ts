/**
 * One turn sent to one backend: the client's body with the backend's model (and what retention adds), usage
 * asked for in a stream, and the answer handed back as it comes, read on the way by a ReplyTap. A backend
 * that cannot be reached (no connection, a connection closed before an answer) is a BackendUnreachable: the
 * turn never ran there and may go to another backend.
 */
import { Agent } from "undici";
import { type ReplyTap, readSseTapped } from "../reply-tap.js";
import { API_PATHS, type BackendApi, type ForwardRequest } from "../turn.js";
import type { SseFrame } from "./sse.js";

export class BackendUnreachable extends Error {
  constructor(
    readonly backend: string,
    message: string,
  ) {
    super(message);
    this.name = "BackendUnreachable";
  }
}

/** A backend's answer: a whole JSON body (an error too), or a stream of SSE frames. */
export type BackendReply =
  | {
      readonly kind: "json";
      readonly backend: string;
      /** the API the backend answered in */
      readonly api: BackendApi;
      readonly status: number;
      /** the parsed body, or the text when it was not JSON */
      readonly body: unknown;
    }
  | {
      readonly kind: "sse";
      readonly backend: string;
      readonly api: BackendApi;
      readonly status: number;
      readonly frames: AsyncIterable<SseFrame>;
    };

export interface ForwardTarget {
  readonly name: string;
  readonly url: string;
  readonly modelId: string;
}

/** The body the backend is sent: the client's, its model the backend's, `extra` fields added. */
export function backendBody(
  request: ForwardRequest,
  modelId: string,
  extra: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const body: Record<string, unknown> = { ...request.body, model: modelId, ...extra };
  if (request.stream && request.api !== "messages") {
    const options = (body["stream_options"] ?? {}) as Record<string, unknown>;
    body["stream_options"] = { ...options, include_usage: true };
  }
  return body;
}

function parsedBody(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * Posts `body` to the backend's endpoint for the request's API. Resolves once the backend answered (a stream:
 * its headers), the tap reading what follows; rejects with BackendUnreachable when no answer came.
 */
export async function forwardTurn(
  target: ForwardTarget,
  request: ForwardRequest,
  body: Record<string, unknown>,
  tap: ReplyTap,
  signal: AbortSignal,
): Promise<BackendReply> {
  const post = (dispatcher?: Agent) =>
    fetch(`${target.url}${API_PATHS[request.api]}`, {
      method: "POST",
      headers: {
        "Content-Type": "application/json",
        Accept: request.stream ? "text/event-stream" : "application/json",
      },
      body: JSON.stringify(body),
      signal,
      // Node's own fetch takes undici's dispatchers (it is undici 6 inside)
      ...(dispatcher ? ({ dispatcher } as RequestInit) : {}),
    });
  let response: Response;
  try {
    try {
      response = await post();
    } catch (error) {
      // A kept-alive connection the backend closed while idle (llama-server does) as the request went out on
      // it: sent once more on a connection of its own, as the pool's other idle ones may be closed too. A
      // backend that is gone fails again (refused).
      if (signal.aborted || !STALE_CONNECTION.has(causeOf(error))) throw error;
      const fresh = new Agent();
      try {
        response = await post(fresh);
      } finally {
        // graceful: the connection closes once the answer (a stream too) is read
        void fresh.close();
      }
    }
  } catch (error) {
    if (signal.aborted) throw error;
    throw new BackendUnreachable(target.name, `${target.url} did not answer: ${causeOf(error)}`);
  }
  const type = response.headers.get("content-type") ?? "";
  if (response.ok && type.includes("text/event-stream") && response.body !== null) {
    return {
      kind: "sse",
      backend: target.name,
      api: request.api,
      status: response.status,
      frames: readSseTapped(response.body, tap, !request.streamUsage),
    };
  }
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    if (signal.aborted) throw error;
    throw new BackendUnreachable(target.name, `${target.url} closed the connection: ${causeOf(error)}`);
  }
  const parsed = parsedBody(text);
  if (response.ok) tap.whole(parsed);
  tap.end(response.ok ? null : `HTTP ${response.status}`);
  return { kind: "json", backend: target.name, api: request.api, status: response.status, body: parsed };
}

/** How a request fails on a pooled connection the server had closed: undici's "other side closed", a reset. */
const STALE_CONNECTION = new Set(["UND_ERR_SOCKET", "ECONNRESET"]);

function causeOf(error: unknown): string {
  const cause = (error as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
}
