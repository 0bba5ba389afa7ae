/**
 * `background: true` on `POST /v1/responses`: the response is stored `queued` and returned at once, and its
 * generation runs detached from the HTTP exchange (a client that goes away does not stop it). Its state is
 * the stored response object, replaced as it runs: `in_progress` at the engine's first event, then
 * `completed` / `incomplete`, `failed` (with its `error`), or `cancelled` (`POST .../cancel`, which aborts
 * the generation and so frees its KV). A run created with `stream: true` keeps its events, numbered by
 * `sequence_number`, for `GET /v1/responses/{id}?stream=true&starting_after=N`.
 */
import { Context } from "hono";
import type { AppEnv, DoneEvent, Exchange } from "../generation/generation.js";
import type { ChatGeneration } from "../output/chat-output.js";
import type { ChatMessageInput } from "../schemas.js";
import type { ListedItem } from "./responses-items.js";
import { assistantTurn, type ResponseMeta, type ResponseObject, responseObject } from "./responses-output.js";
import type { StoredResponse } from "./responses-store.js";
import { responseEventStream, responseFrame } from "./responses-stream.js";

/**
 * A request context for a generation that outlives its HTTP exchange: the request's headers and tenant,
 * `exchange` as its exchange (what a forced stop aborts), and no client signal to abort it.
 */
export function detachedContext(c: Context<AppEnv>, exchange: Exchange): Context<AppEnv> {
  const request = new Request(c.req.url, { method: c.req.method, headers: c.req.raw.headers });
  const detached = new Context<AppEnv>(request, { env: {} });
  const tenant = c.get("tenant");
  if (tenant !== undefined) detached.set("tenant", tenant);
  detached.set("exchange", exchange);
  return detached;
}

export interface RunOptions {
  /** the conversation before the output, which the output's turn completes (for `previous_response_id`) */
  readonly conversation: readonly ChatMessageInput[];
  readonly inputItems: readonly ListedItem[];
  /** keep the events for `GET ...?stream=true` (the response was created with `stream: true`) */
  readonly streamed: boolean;
  /** the exchange the run is in flight as: the generation's controller, which a forced stop aborts */
  readonly exchange: Exchange;
  /** called once the run has ended (its last event is out, its generation released) */
  readonly onEnd: (run: BackgroundRun) => void;
}

/** One background response: its stored state, its events, its cancel. */
export class BackgroundRun {
  readonly record: StoredResponse<BackgroundRun>;
  /** the events so far (`frames[i]` has sequence_number i); null when not kept */
  private frames: string[] | null;
  private sequence = 0;
  /** no more events come */
  private closed = false;
  private waiters: (() => void)[] = [];

  constructor(
    private readonly choice: ChatGeneration,
    private readonly meta: ResponseMeta,
    private readonly options: RunOptions,
  ) {
    const response = responseObject(meta, "queued", [], null);
    this.record = { conversation: options.conversation, response, inputItems: options.inputItems, run: this };
    this.frames = options.streamed ? [] : null;
  }

  get response(): ResponseObject {
    return this.record.response;
  }

  /** Queued or in progress. */
  get live(): boolean {
    const { status } = this.record.response;
    return status === "queued" || status === "in_progress";
  }

  /** Created with `stream: true`. */
  get streamed(): boolean {
    return this.options.streamed;
  }

  /** Whether its events are kept (created with `stream: true`, not forgotten since). */
  get replayable(): boolean {
    return this.frames !== null;
  }

  /** Starts the generation's events flowing into the run; it ends on its own. */
  start(): void {
    void this.pump();
  }

  /** Cancels a live run (its generation is aborted); the response as it stands now. */
  cancel(): ResponseObject {
    if (this.live) {
      this.end(responseObject(this.meta, "cancelled", [], null));
      this.choice.generation.abort("response cancelled");
    }
    return this.record.response;
  }

  /** Drops the kept events of an ended run (its replay is refused from now on). */
  forgetEvents(): void {
    if (this.closed) this.frames = null;
  }

  /** Its events after sequence number `startingAfter`, those to come included, until its last. */
  async *events(startingAfter: number): AsyncGenerator<string> {
    const frames = this.frames;
    if (frames === null) return;
    let next = Math.max(0, startingAfter + 1);
    for (;;) {
      while (next < frames.length) yield frames[next++] as string;
      if (this.closed) return;
      await new Promise<void>((resolve) => this.waiters.push(resolve));
    }
  }

  private push(frame: string): void {
    this.sequence++;
    this.frames?.push(frame);
    this.wake();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }

  /** Ends the run as `response` (cancelled or failed), with its last event: `response.failed`. */
  private end(response: ResponseObject): void {
    this.record.response = response;
    this.push(responseFrame("response.failed", this.sequence, { response }));
    this.closed = true;
    this.wake();
  }

  private failed(message: string): ResponseObject {
    return responseObject(this.meta, "failed", [], null, { code: "server_error", message });
  }

  /** The engine's done event: the finished response, or a failure when something else aborted it. */
  private finish(response: ResponseObject, done: DoneEvent): void {
    if (!this.live) return;
    if (done.finishReason === "abort") {
      const reason = this.options.exchange.controller?.signal.reason;
      const why = reason instanceof Error ? reason.message : "the engine aborted the generation";
      this.end(this.failed(`the response was stopped before it finished: ${why}`));
      return;
    }
    this.record.response = response;
    this.record.conversation = [...this.options.conversation, assistantTurn(response.output)];
  }

  private async pump(): Promise<void> {
    const frames = responseEventStream(
      this.choice,
      this.meta,
      (response, done) => this.finish(response, done),
      {
        onStarted: (response) => {
          if (this.live) this.record.response = response;
        },
        onFailed: (response) => {
          if (this.live) this.record.response = response;
        },
      },
    );
    try {
      for await (const frame of frames) {
        // a cancelled or stopped run has had its last event
        if (this.closed) break;
        this.push(frame);
      }
    } catch (error) {
      if (this.live) this.end(this.failed(error instanceof Error ? error.message : String(error)));
    } finally {
      if (this.live) this.end(this.failed("the engine ended the request without a result"));
      this.closed = true;
      this.wake();
      this.options.onEnd(this);
    }
  }
}
