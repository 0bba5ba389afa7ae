/**
 * A minimal HTTP client for OpenAI-compatible completion endpoints, on node:http so no request has a
 * hidden timeout (fetch's headers timeout is 300 s; queued agent turns under load can wait longer):
 * each call has exactly the caller's timeout and abort signal. Streams are parsed as SSE, and the
 * time of the first non-empty content chunk is kept for TTFT.
 */
import http from "node:http";
import https from "node:https";

export type ReplayApi = "chat" | "completions";

export interface TurnCall {
  readonly api: ReplayApi;
  readonly body: Readonly<Record<string, unknown>>;
  readonly headers?: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  /** aborting it ends the call with an "abandoned" error */
  readonly signal?: AbortSignal;
}

export interface TurnReply {
  /** the generated text (chat: the message content) */
  readonly text: string;
  readonly promptTokens: number | null;
  /** usage.prompt_tokens_details.cached_tokens (llama-server: timings.cache_n); null if not reported */
  readonly cachedTokens: number | null;
  readonly completionTokens: number | null;
  readonly finishReason: string | null;
  /** ms from sending to the first non-empty content chunk (streams only) */
  readonly firstContentMs: number | null;
  /** ms between consecutive non-empty content chunks after the first (streams only): inter-token gaps */
  readonly chunkGapsMs: readonly number[];
  /** ms from sending to the end of the response */
  readonly totalMs: number;
}

/**
 * Why a call failed: "timeout", "abandoned", "http_<status>", "connection_refused",
 * "connection_reset", "connection", "stream_error" (an error frame in the stream), "bad_response".
 */
export class ReplayRequestError extends Error {
  constructor(
    readonly kind: string,
    message: string,
    /** the server closed a kept-alive connection as the request went out: nothing was processed */
    readonly staleConnection = false,
  ) {
    super(message);
    this.name = "ReplayRequestError";
  }
}

/** The server root of a URL given as http://host:port, with or without a trailing /v1. */
export function normalizeBaseUrl(raw: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new Error(`invalid URL ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new Error(`URL must be http:// or https://, got ${JSON.stringify(raw)}`);
  url.search = "";
  url.hash = "";
  url.pathname = url.pathname.replace(/\/+$/, "").replace(/\/v1$/, "");
  return url;
}

function errorKind(error: NodeJS.ErrnoException): string {
  if (error.code === "ECONNREFUSED") return "connection_refused";
  if (error.code === "ECONNRESET" || error.code === "EPIPE") return "connection_reset";
  return "connection";
}

interface Usage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  prompt_tokens_details?: { cached_tokens?: unknown } | null;
}

function num(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/** Accumulates a response's text, usage and finish reason from whole bodies or stream chunks. */
class ReplyBuilder {
  text = "";
  promptTokens: number | null = null;
  cachedTokens: number | null = null;
  completionTokens: number | null = null;
  finishReason: string | null = null;
  firstContentMs: number | null = null;
  readonly chunkGapsMs: number[] = [];
  private lastContentMs = 0;

  constructor(
    private readonly api: ReplayApi,
    private readonly sentAt: number,
  ) {}

  /** A body (`chunk` false) or a stream chunk; returns an error message if it carries one. */
  add(json: unknown, chunk: boolean): string | null {
    if (typeof json !== "object" || json === null) return "response is not a JSON object";
    const o = json as Record<string, unknown>;
    if (o["error"] !== undefined && o["error"] !== null) {
      const e = o["error"] as { message?: unknown };
      return typeof e.message === "string" ? e.message : JSON.stringify(o["error"]);
    }
    const choice = Array.isArray(o["choices"])
      ? (o["choices"][0] as Record<string, unknown> | undefined)
      : null;
    if (choice) {
      let piece: unknown;
      if (this.api === "completions") piece = choice["text"];
      else
        piece = ((chunk ? choice["delta"] : choice["message"]) as { content?: unknown } | undefined)?.content;
      if (typeof piece === "string" && piece.length > 0) {
        this.text += piece;
        if (chunk) {
          const atMs = performance.now() - this.sentAt;
          if (this.firstContentMs === null) this.firstContentMs = atMs;
          else this.chunkGapsMs.push(atMs - this.lastContentMs);
          this.lastContentMs = atMs;
        }
      }
      if (typeof choice["finish_reason"] === "string") this.finishReason = choice["finish_reason"];
    }
    const usage = o["usage"] as Usage | null | undefined;
    if (usage && typeof usage === "object") {
      this.promptTokens = num(usage.prompt_tokens) ?? this.promptTokens;
      this.completionTokens = num(usage.completion_tokens) ?? this.completionTokens;
      this.cachedTokens = num(usage.prompt_tokens_details?.cached_tokens) ?? this.cachedTokens;
    }
    const timings = o["timings"] as { cache_n?: unknown } | undefined;
    if (this.cachedTokens === null && timings && typeof timings === "object") {
      this.cachedTokens = num(timings.cache_n);
    }
    return null;
  }

  reply(): TurnReply {
    return {
      text: this.text,
      promptTokens: this.promptTokens,
      cachedTokens: this.cachedTokens,
      completionTokens: this.completionTokens,
      finishReason: this.finishReason,
      firstContentMs: this.firstContentMs,
      chunkGapsMs: this.chunkGapsMs,
      totalMs: performance.now() - this.sentAt,
    };
  }
}

/** Talks to one server only: every path is resolved against the base URL given at construction. */
export class ReplayHttpClient {
  readonly base: URL;
  private readonly agent: http.Agent;
  private readonly lib: typeof http | typeof https;

  constructor(
    baseUrl: string,
    private readonly apiKey: string | null = null,
  ) {
    this.base = normalizeBaseUrl(baseUrl);
    this.lib = this.base.protocol === "https:" ? https : http;
    const AgentClass = this.base.protocol === "https:" ? https.Agent : http.Agent;
    this.agent = new AgentClass({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  }

  endpoint(path: string): URL {
    const url = new URL(this.base.href);
    url.pathname = `${this.base.pathname.replace(/\/+$/, "")}${path}`;
    return url;
  }

  /** POST /v1/chat/completions or /v1/completions; streams when the body says `stream: true`. */
  async complete(call: TurnCall): Promise<TurnReply> {
    try {
      return await this.completeOnce(call);
    } catch (error) {
      // Node's documented race: a kept-alive socket the server had closed (llama-server closes
      // them often). Nothing reached the server; retry once on a new connection.
      if (error instanceof ReplayRequestError && error.staleConnection)
        return await this.completeOnce(call, true);
      throw error;
    }
  }

  private completeOnce(call: TurnCall, freshConnection = false): Promise<TurnReply> {
    const path = call.api === "chat" ? "/v1/chat/completions" : "/v1/completions";
    const headers: Record<string, string> = {
      "content-type": "application/json",
      accept: call.body["stream"] === true ? "text/event-stream" : "application/json",
      ...(this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {}),
      ...call.headers,
    };
    const payload = JSON.stringify(call.body);
    const options = { ...call, freshConnection };
    return this.send("POST", path, headers, payload, options, (res, builder, fail, succeed) => {
      const type = String(res.headers["content-type"] ?? "");
      if (type.includes("text/event-stream")) this.readSse(res, builder, fail, succeed);
      else
        this.readJson(
          res,
          (json) => {
            const error = builder.add(json, false);
            if (error !== null) fail("bad_response", error);
            else succeed();
          },
          fail,
        );
    });
  }

  /** GET a JSON document (e.g. /v1/models). */
  getJson(path: string, timeoutMs: number): Promise<unknown> {
    let result: unknown;
    const headers: Record<string, string> = this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {};
    return this.send("GET", path, headers, null, { api: "chat", timeoutMs }, (res, _b, fail, succeed) =>
      this.readJson(
        res,
        (json) => {
          result = json;
          succeed();
        },
        fail,
      ),
    ).then(() => result);
  }

  close(): void {
    this.agent.destroy();
  }

  private send(
    method: string,
    path: string,
    headers: Record<string, string>,
    payload: string | null,
    call: Pick<TurnCall, "api" | "timeoutMs" | "signal"> & { freshConnection?: boolean },
    onOk: (
      res: http.IncomingMessage,
      builder: ReplyBuilder,
      fail: (kind: string, message: string) => void,
      succeed: () => void,
    ) => void,
  ): Promise<TurnReply> {
    const sentAt = performance.now();
    const builder = new ReplyBuilder(call.api, sentAt);
    return new Promise<TurnReply>((resolve, reject) => {
      let settled = false;
      let responded = false;
      let req: http.ClientRequest | undefined;
      const cleanup = () => {
        clearTimeout(timer);
        call.signal?.removeEventListener("abort", onAbort);
      };
      const fail = (kind: string, message: string) => {
        if (settled) return;
        settled = true;
        cleanup();
        req?.destroy();
        reject(new ReplayRequestError(kind, message));
      };
      const succeed = () => {
        if (settled) return;
        settled = true;
        cleanup();
        resolve(builder.reply());
      };
      const onAbort = () => fail("abandoned", "abandoned: the drain timeout ended the run");
      const timer = setTimeout(
        () => fail("timeout", `no complete response within ${(call.timeoutMs / 1000).toFixed(1)} s`),
        call.timeoutMs,
      );
      if (call.signal?.aborted) {
        onAbort();
        return;
      }
      call.signal?.addEventListener("abort", onAbort, { once: true });
      req = this.lib.request(
        this.endpoint(path),
        {
          method,
          agent: call.freshConnection ? false : this.agent,
          headers: payload === null ? headers : { ...headers, "content-length": Buffer.byteLength(payload) },
        },
        (res) => {
          responded = true;
          res.setEncoding("utf8");
          res.on("error", (error) => fail(errorKind(error), error.message));
          res.on("close", () => {
            if (!res.complete) fail("connection_reset", "the server closed the response before its end");
          });
          const status = res.statusCode ?? 0;
          if (status < 200 || status > 299) {
            let text = "";
            res.on("data", (d: string) => {
              if (text.length < 4096) text += d;
            });
            res.on("end", () => fail(`http_${status}`, `HTTP ${status}: ${errorMessage(text)}`));
            return;
          }
          onOk(res, builder, fail, succeed);
        },
      );
      req.on("error", (error: NodeJS.ErrnoException) => {
        if (settled) return;
        if (req?.reusedSocket && !responded && error.code === "ECONNRESET") {
          settled = true;
          cleanup();
          reject(new ReplayRequestError("connection_reset", error.message, true));
          return;
        }
        fail(errorKind(error), error.message);
      });
      req.end(payload ?? undefined);
    });
  }

  private readJson(
    res: http.IncomingMessage,
    done: (json: unknown) => void,
    fail: (kind: string, message: string) => void,
  ): void {
    let text = "";
    res.on("data", (d: string) => {
      text += d;
    });
    res.on("end", () => {
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        fail("bad_response", `response is not JSON: ${text.slice(0, 200)}`);
        return;
      }
      done(json);
    });
  }

  private readSse(
    res: http.IncomingMessage,
    builder: ReplyBuilder,
    fail: (kind: string, message: string) => void,
    succeed: () => void,
  ): void {
    let buffer = "";
    let finished = false;
    const event = (block: string) => {
      const data = block
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data === "" || finished) return;
      if (data.trim() === "[DONE]") {
        finished = true;
        succeed();
        return;
      }
      let json: unknown;
      try {
        json = JSON.parse(data);
      } catch {
        fail("bad_response", `stream chunk is not JSON: ${data.slice(0, 200)}`);
        return;
      }
      const error = builder.add(json, true);
      if (error !== null) fail("stream_error", error);
    };
    res.on("data", (d: string) => {
      buffer += d;
      for (;;) {
        const match = /\r?\n\r?\n/.exec(buffer);
        if (!match) break;
        event(buffer.slice(0, match.index));
        buffer = buffer.slice(match.index + match[0].length);
      }
    });
    res.on("end", () => {
      if (buffer.trim() !== "") event(buffer);
      // A stream that ends without [DONE] still delivered what it had.
      succeed();
    });
  }
}

function errorMessage(body: string): string {
  try {
    const json = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown };
    if (typeof json.error === "string") return json.error;
    if (typeof json.error?.message === "string") return json.error.message;
    if (typeof json.message === "string") return json.message;
  } catch {
    // not JSON: fall through to the raw text
  }
  return body.trim().slice(0, 300) || "(empty body)";
}
