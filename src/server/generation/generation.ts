import type { HttpBindings } from "@hono/node-server";
import type { Context } from "hono";
import {
  EngineRejection,
  type EngineService,
  type FinishReason,
  type GenerateEvent,
  type GenerateRequest,
  type GenerateUsage,
} from "../../engine/engine-api.js";
import type { ServerMetrics } from "../observability/metrics.js";
import type { MediaApi } from "../templates/media-notes.js";
import { ChoiceTally } from "./choice-tally.js";

export type DoneEvent = Extract<GenerateEvent, { type: "done" }>;
export type DeltaEvent = Extract<GenerateEvent, { type: "delta" }>;

/** One HTTP exchange on the API, from its arrival until its response has been sent or dropped. */
export interface Exchange {
  /** aborts its engine request, once one has started */
  controller: AbortController | null;
}

/** The exchanges being served: what draining waits for and what a forced stop aborts. */
export class InflightRequests {
  private readonly active = new Set<Exchange>();
  private idleWaiters: (() => void)[] = [];

  get size(): number {
    return this.active.size;
  }

  begin(): Exchange {
    const exchange: Exchange = { controller: null };
    this.active.add(exchange);
    return exchange;
  }

  end(exchange: Exchange): void {
    if (!this.active.delete(exchange) || this.active.size > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }

  /** Resolves once no exchange is in flight. */
  waitIdle(): Promise<void> {
    if (this.active.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  abortAll(reason: string): void {
    for (const exchange of this.active) exchange.controller?.abort(new Error(reason));
  }
}

/** Hono environment of the API: node's request/response, and the exchange the server tracks. */
export interface AppEnv {
  Bindings: Partial<HttpBindings>;
  /** tenant: which API key the request came with (null on an open server) */
  Variables: {
    exchange?: Exchange;
    tenant?: string | null;
    /** `--media-inputs note`: the API whose media parts this request's body has replaced by notes */
    notesMedia?: MediaApi;
  };
}

export interface GenerationDeps {
  readonly engine: EngineService;
  readonly metrics: ServerMetrics;
}

/**
 * One engine request. The engine refuses a request synchronously (an HTTP error status); a JSON response
 * also waits for the first event here, while a stream starts at once so its headers go out before the
 * request leaves the queue. Its events follow in `events()`; the client going away (request signal, or
 * the response stream cancelled) aborts it, and an abort nobody saw the end of is still counted.
 */
export class Generation {
  private released = false;
  private finished = false;
  private abandonCounted = false;
  private settled = false;
  private readonly doneListeners: ((done: DoneEvent) => void)[] = [];

  private constructor(
    private readonly deps: GenerationDeps,
    private readonly controller: AbortController,
    private readonly first: IteratorResult<GenerateEvent> | null,
    private readonly iterator: AsyncIterator<GenerateEvent>,
    private readonly detach: () => void,
    private readonly tally: ChoiceTally,
  ) {}

  /** `tally`: the request's choices it is one of (`n`; by default it is the request's only one). */
  static async start(
    deps: GenerationDeps,
    c: Context<AppEnv>,
    request: GenerateRequest,
    waitForFirstEvent = true,
    tally = new ChoiceTally(1),
  ): Promise<Generation> {
    const controller = new AbortController();
    const exchange = c.get("exchange");
    if (exchange) exchange.controller = controller;
    const clientSignal = c.req.raw.signal;
    const onClientGone = () => controller.abort(new Error("client disconnected"));
    if (clientSignal.aborted) onClientGone();
    else clientSignal.addEventListener("abort", onClientGone, { once: true });
    const detach = () => clientSignal.removeEventListener("abort", onClientGone);
    try {
      const iterator = deps.engine.generate(request, controller.signal)[Symbol.asyncIterator]();
      const first = waitForFirstEvent ? await iterator.next() : null;
      return new Generation(deps, controller, first, iterator, detach, tally);
    } catch (error) {
      detach();
      if (error instanceof EngineRejection) deps.metrics.observeRejected(error.code);
      throw error;
    }
  }

  /** Calls `listener` with the done event when the engine's events reach it. */
  onDone(listener: (done: DoneEvent) => void): void {
    this.doneListeners.push(listener);
  }

  /** Stops the engine request (the client went away). */
  abort(reason = "client disconnected"): void {
    if (this.finished) return;
    this.controller.abort(new Error(reason));
    this.countAbandoned();
  }

  private countAbandoned(): void {
    if (this.abandonCounted) return;
    this.abandonCounted = true;
    this.deps.metrics.observeAbandoned();
    this.settle(null);
  }

  /** Its end, done or left by its client (whichever came first), told to its request's choices. */
  private settle(done: DoneEvent | null): void {
    if (this.settled) return;
    this.settled = true;
    const mostTokens = this.tally.settle(done);
    if (mostTokens !== null) this.deps.metrics.observeMaxGenerationTokens(mostTokens);
  }

  /** The engine's events, first one included; ends the request however the loop is left. */
  async *events(): AsyncGenerator<GenerateEvent> {
    try {
      let next = this.first ?? (await this.iterator.next());
      let lastDeltaMs: number | null = null;
      while (!next.done) {
        const event = next.value;
        // the prompt's usage comes on a delta of its own, before any token
        if (event.type === "delta" && event.promptUsage === undefined) {
          const nowMs = performance.now();
          if (lastDeltaMs !== null) this.deps.metrics.observeInterToken((nowMs - lastDeltaMs) / 1000);
          lastDeltaMs = nowMs;
        }
        if (event.type === "done") {
          this.finished = true;
          // A client that left was counted as an abort already.
          if (!this.abandonCounted) this.deps.metrics.observeDone(event);
          this.settle(event);
          for (const listener of this.doneListeners) listener(event);
        }
        yield event;
        if (this.finished) return;
        next = await this.iterator.next();
      }
    } finally {
      this.release();
    }
  }

  /** Runs to completion; the done event, or null if the engine ended without one. */
  async done(): Promise<DoneEvent | null> {
    for await (const event of this.events()) if (event.type === "done") return event;
    return null;
  }

  private release(): void {
    if (this.released) return;
    this.released = true;
    if (!this.finished) {
      this.controller.abort(new Error("response ended early"));
      this.iterator.return?.().catch(() => {});
      this.countAbandoned();
    }
    this.detach();
  }
}

export interface OpenAIUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export function openAIUsage(usage: GenerateUsage): OpenAIUsage {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedTokens },
  };
}

/** The usage of several generations (a request's prompts, its `n` choices): each one's prompt counted. */
export function sumUsage(usages: readonly GenerateUsage[]): GenerateUsage {
  return usages.reduce(
    (sum, u) => ({
      promptTokens: sum.promptTokens + u.promptTokens,
      completionTokens: sum.completionTokens + u.completionTokens,
      cachedTokens: sum.cachedTokens + u.cachedTokens,
    }),
    { promptTokens: 0, completionTokens: 0, cachedTokens: 0 },
  );
}

/** OpenAI's finish_reason for the engine's (running out of KV reads as hitting the length limit). */
export function openAIFinishReason(reason: FinishReason): string {
  return reason === "kv_capacity" ? "length" : reason;
}

export function unixSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

const SSE_HEADERS = {
  "Content-Type": "text/event-stream; charset=utf-8",
  "Cache-Control": "no-cache",
  "X-Accel-Buffering": "no",
};

export function sseData(payload: unknown): string {
  return `data: ${JSON.stringify(payload)}\n\n`;
}

export const SSE_DONE = "data: [DONE]\n\n";

/**
 * A text/event-stream response pulling its frames from `frames`; a cancelled body (client gone)
 * calls `onCancel` and closes the generator.
 */
export function sseResponse(frames: AsyncGenerator<string>, onCancel: () => void): Response {
  const encoder = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const next = await frames.next();
        if (next.done) controller.close();
        else controller.enqueue(encoder.encode(next.value));
      } catch (error) {
        controller.error(error);
      }
    },
    async cancel() {
      onCancel();
      await frames.return(undefined);
    },
  });
  return new Response(body, { status: 200, headers: SSE_HEADERS });
}
