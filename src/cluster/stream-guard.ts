/**
 * The guard of streamed responses. HAProxy cannot add to a response its server cut: when a replica dies
 * in the middle of a stream the client's connection just closes, and an SSE client sees a stream that
 * stopped without an error or its terminator. So the balancer sends streamed requests (`"stream": true`)
 * through the cluster's supervisor, which passes them back to HAProxy's second frontend (same routing,
 * same retries) and relays the answer frame by frame; when the answer ends before it is complete, it
 * drops the partial frame and ends the stream with an error event in the API's own format (OpenAI's
 * `data: {"error": ...}` and `[DONE]`, Anthropic's `event: error`, the Responses API's `error` event), so
 * the client knows to send the turn again (it lands on a live replica). Responses that are not event
 * streams are relayed as they come.
 */
import {
  Agent,
  type IncomingHttpHeaders,
  type IncomingMessage,
  request,
  type ServerResponse,
} from "node:http";
import { ApiError, errorBody } from "../server/errors.js";
import { SSE_DONE, sseData } from "../server/generation/generation.js";
import { anthropicErrorBody, isMessagesPath } from "../server/messages/messages-errors.js";

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
]);

function endToEnd(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
  }
  return out;
}

export const REPLICA_LOST = new ApiError(
  502,
  "the replica serving this stream stopped before the response was complete; send the request again (the program's next turn goes to a live replica)",
  "server_error",
  "replica_lost",
);

/** The event that ends a stream cut after `frames` whole frames, in the format of the API at `path`. */
export function replicaLostEvent(path: string, frames: number): string {
  if (isMessagesPath(path))
    return `event: error\ndata: ${JSON.stringify(anthropicErrorBody(REPLICA_LOST))}\n\n`;
  if (path === "/v1/responses") {
    const error = errorBody(REPLICA_LOST).error;
    const { code, message, param } = error;
    // flat for OpenAI's SDKs, nested as the Open Responses spec has it (as responses-stream.ts writes it)
    const data = { type: "error", sequence_number: frames, code, message, param, error };
    return `event: error\ndata: ${JSON.stringify(data)}\n\n`;
  }
  return sseData(errorBody(REPLICA_LOST)) + SSE_DONE;
}

function countFrames(text: string): number {
  let n = 0;
  for (let i = text.indexOf("\n\n"); i >= 0; i = text.indexOf("\n\n", i + 2)) n++;
  return n;
}

/** Relays an event stream whole frame by whole frame; a cut answer ends with the error event. */
function relayEvents(path: string, upstream: IncomingMessage, res: ServerResponse): void {
  let pending = "";
  let frames = 0;
  let ended = false;
  upstream.setEncoding("utf8");
  upstream.on("data", (chunk: string) => {
    pending += chunk;
    const end = pending.lastIndexOf("\n\n");
    if (end < 0) return;
    const whole = pending.slice(0, end + 2);
    pending = pending.slice(end + 2);
    frames += countFrames(whole);
    if (!res.write(whole)) {
      upstream.pause();
      res.once("drain", () => upstream.resume());
    }
  });
  upstream.on("end", () => {
    ended = true;
    res.end(pending);
  });
  upstream.on("close", () => {
    if (ended || res.destroyed) return;
    // the replica went away mid-stream: what it sent of an unfinished frame is dropped
    res.end(replicaLostEvent(path, frames));
  });
}

/**
 * A request handler relaying to HAProxy's stream frontend at `socketPath` (a Unix socket; a leading NUL:
 * Linux's abstract namespace).
 */
export function streamGuard(socketPath: string): {
  handle(req: IncomingMessage, res: ServerResponse): void;
  close(): void;
} {
  // a connection per stream (a local socket: cheap), never one HAProxy may be closing as it idles
  const agent = new Agent({ keepAlive: false });
  return {
    handle(req, res) {
      const url = req.url ?? "/";
      const path = url.split("?")[0] as string;
      const out = request({
        socketPath,
        agent,
        method: req.method,
        path: url,
        headers: endToEnd(req.headers),
      });
      let answered = false;
      out.on("response", (upstream) => {
        answered = true;
        upstream.on("error", () => {}); // a cut answer: its close says so
        res.writeHead(upstream.statusCode ?? 502, endToEnd(upstream.headers));
        if (String(upstream.headers["content-type"] ?? "").startsWith("text/event-stream")) {
          relayEvents(path, upstream, res);
        } else {
          upstream.pipe(res);
          upstream.on("close", () => {
            if (!upstream.complete) res.destroy();
          });
        }
      });
      out.on("error", () => {
        if (answered || res.headersSent) return;
        const error = new ApiError(
          502,
          "the balancer's stream frontend did not answer",
          "server_error",
          "bad_gateway",
        );
        res.writeHead(502, { "content-type": "application/json" });
        res.end(JSON.stringify(errorBody(error)));
      });
      req.on("error", () => out.destroy());
      res.on("close", () => {
        if (!res.writableFinished) out.destroy();
      });
      req.pipe(out);
    },
    close() {
      agent.destroy();
    },
  };
}
