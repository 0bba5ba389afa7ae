/**
 * A recording HTTP proxy between a harness and `continuum serve`: every request is forwarded unchanged
 * (but for an `x-request-id` header added when the client sent none, so the server's recorder export
 * names the request) and the response streamed back as it comes, while both are kept: method, path,
 * status, the request's headers and body, and the response body (SSE included), one JSON line per
 * exchange. What the harness sent is the evidence a protocol failure is reported with.
 */
import { createWriteStream, type WriteStream } from "node:fs";
import { createServer, request as httpRequest, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface Exchange {
  readonly seq: number;
  /** ms since the proxy started */
  readonly startMs: number;
  readonly durationMs: number;
  readonly method: string;
  readonly path: string;
  /** the id the server's recorder knows the request by (x-request-id, ours when the client sent none) */
  readonly requestId: string;
  readonly requestHeaders: Record<string, string>;
  /** the request body as text (JSON for the APIs), cut at MAX_KEPT_CHARS */
  readonly requestBody: string;
  /** null: the upstream never answered (connection refused or reset) */
  readonly status: number | null;
  readonly responseContentType: string;
  /** the response body as text (SSE events included), cut at MAX_KEPT_CHARS */
  readonly responseBody: string;
  /** the client went away before the response ended, or the upstream failed */
  readonly error: string | null;
}

/** Request and response bodies are kept up to this many characters each (Claude Code's first body: ~200k). */
export const MAX_KEPT_CHARS = 4_000_000;

/** Headers that are credentials: never written to disk. */
const SECRET_HEADERS = new Set(["authorization", "x-api-key", "api-key", "cookie", "proxy-authorization"]);

function flatHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    out[name] = SECRET_HEADERS.has(name) ? "<redacted>" : Array.isArray(value) ? value.join(", ") : value;
  }
  return out;
}

function keep(chunks: Buffer[]): string {
  const text = Buffer.concat(chunks).toString("utf8");
  return text.length > MAX_KEPT_CHARS ? `${text.slice(0, MAX_KEPT_CHARS)}...<cut>` : text;
}

export interface RecordingProxy {
  readonly url: string;
  readonly exchanges: readonly Exchange[];
  /** Requests still in flight. */
  inFlight(): number;
  /** ms since the proxy started: the clock of Exchange.startMs */
  now(): number;
  close(): Promise<void>;
}

/**
 * Starts a proxy on 127.0.0.1 (`port`, or a free one) forwarding to `upstream` (`http://host:port`); every
 * exchange is appended to `logFile` as it ends. `idPrefix` names the request ids it adds.
 */
export async function startRecordingProxy(
  upstream: string,
  logFile: string,
  idPrefix: string,
  port = 0,
): Promise<RecordingProxy> {
  const target = new URL(upstream);
  const exchanges: Exchange[] = [];
  const log: WriteStream = createWriteStream(logFile, { flags: "a" });
  const t0 = performance.now();
  let seq = 0;
  let open = 0;

  const server: Server = createServer((req, res) => {
    const n = ++seq;
    open += 1;
    const startMs = performance.now() - t0;
    const given = req.headers["x-request-id"];
    const requestId = typeof given === "string" && given.trim() !== "" ? given.trim() : `${idPrefix}${n}`;
    const requestChunks: Buffer[] = [];
    const responseChunks: Buffer[] = [];
    let status: number | null = null;
    let contentType = "";
    let error: string | null = null;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      open -= 1;
      const exchange: Exchange = {
        seq: n,
        startMs: Math.round(startMs),
        durationMs: Math.round(performance.now() - t0 - startMs),
        method: req.method ?? "GET",
        path: req.url ?? "/",
        requestId,
        requestHeaders: flatHeaders(req.headers),
        requestBody: keep(requestChunks),
        status,
        responseContentType: contentType,
        responseBody: keep(responseChunks),
        error,
      };
      exchanges.push(exchange);
      log.write(`${JSON.stringify(exchange)}\n`);
    };
    req.on("data", (c: Buffer) => requestChunks.push(c));
    const headers: IncomingHttpHeaders = { ...req.headers, host: target.host };
    if (headers["x-request-id"] === undefined) headers["x-request-id"] = requestId;
    const up = httpRequest(
      {
        host: target.hostname,
        port: target.port,
        method: req.method,
        path: req.url,
        headers,
      },
      (upRes) => {
        status = upRes.statusCode ?? null;
        contentType = String(upRes.headers["content-type"] ?? "");
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.on("data", (c: Buffer) => {
          responseChunks.push(c);
          res.write(c);
        });
        upRes.on("end", () => {
          res.end();
          finish();
        });
        upRes.on("error", (e) => {
          error = `upstream response: ${e.message}`;
          res.destroy();
          finish();
        });
      },
    );
    up.on("error", (e) => {
      error = `upstream: ${e.message}`;
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end(`recording proxy: ${e.message}`);
      finish();
    });
    res.on("close", () => {
      if (!res.writableFinished && !done) {
        error = "client closed the connection before the response ended";
        up.destroy();
        finish();
      }
    });
    req.pipe(up);
  });

  await new Promise<void>((res, rej) => {
    server.once("error", rej);
    server.listen(port, "127.0.0.1", () => res());
  });
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${bound}`,
    exchanges,
    inFlight: () => open,
    now: () => performance.now() - t0,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await new Promise<void>((r) => log.end(r));
    },
  };
}
