/**
 * One backend as the gateway schedules it: the core scheduler, under the gateway's policy, over a model of the
 * backend's KV (its capacity, read from the backend), run by the one step loop with the GatewayExecutor.
 * Turns wait here until the scheduler admits them, then go to the backend; the backend's answer passes
 * through to the client as it comes, and tells the model what the backend did. As in the engine, the
 * scheduler changes only inside the loop: submit and abort post to an inbox the loop delivers.
 */

import { type Clock, RealClock } from "../../core/clock.js";
import { CalibratedCostModel } from "../../core/cost/calibrated-cost-model.js";
import { type CostModel, quadraticCostModel } from "../../core/cost/cost-model.js";
import { ROOT_HASH, saltedRootHash } from "../../core/kv/prefix-hash.js";
import type { SchedulingPolicy } from "../../core/policy.js";
import type { Request, RequestSpec } from "../../core/request.js";
import { RequestRejectedError, Scheduler } from "../../core/scheduler.js";
import { type LoopEnvironment, runStepLoopAsync, StepLoop } from "../../core/step-loop.js";
import { parseToolName } from "../../tool-calls/parse-tool-call.js";
import { GatewayExecutor, TurnProgress } from "../gateway-executor.js";
import { ReplyTap } from "../reply-tap.js";
import type { Retention } from "../retention/retention.js";
import { type ForwardRequest, type GatewayTurn, requestFor } from "../turn.js";
import { CharsPerToken, TurnContent } from "../turn-content.js";
import type { BackendKvIndex } from "./backend-kv-index.js";
import type { BackendInfo } from "./backend-probe.js";
import {
  type BackendReply,
  BackendUnreachable,
  backendBody,
  type ForwardTarget,
  forwardTurn,
} from "./forward.js";

/** The model counts KV in blocks of at least this many tokens (SGLang's page of 1 would be a block per token). */
const MIN_MODEL_BLOCK = 16;
/** A plan with nothing to run while work waits: the scheduler looks again this much later. */
const STALL_RETRY_S = 0.01;
/** The `vllm` policy forwards at once: its model is this many times the backend, so it never holds a turn. */
const PASS_THROUGH_FACTOR = 64;
const PASS_THROUGH_SEQS = 65536;
/** PrefillReload before the backend's own answers priced it: ~10k prompt tokens/s, as a GPU prefills. */
const PRIOR_COSTS = quadraticCostModel({
  prefillQuadratic: { a: 0, b: 1e-4, c: 0.01 },
  kvBytesPerToken: 1,
  reloadBandwidthBps: {},
});

export interface LaneOptions {
  readonly target: ForwardTarget;
  readonly info: BackendInfo;
  readonly policy: SchedulingPolicy;
  readonly retention: Retention;
  /** the backend's KV as its events say, when it publishes them */
  readonly kvIndex: BackendKvIndex | null;
  /** requests forwarded at once at most (the backend's own limit where it says) */
  readonly maxNumSeqs: number;
  /** PrefillReload for the TTL model; default: learnt from the backend's times to first token */
  readonly costs?: CostModel;
  /** the turn never reached the backend: the gateway takes it elsewhere and marks the backend down */
  onUnreachable(error: BackendUnreachable): void;
  readonly clock?: Clock;
}

interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
  settled: boolean;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  const d: Deferred<T> = {
    promise,
    settled: false,
    resolve: (value) => {
      if (d.settled) return;
      d.settled = true;
      resolve(value);
    },
    reject: (error) => {
      if (d.settled) return;
      d.settled = true;
      reject(error);
    },
  };
  // a reply nobody waits for any more (the client left) must not be an unhandled rejection
  promise.catch(() => {});
  return d;
}

interface LaneEntry {
  readonly turn: GatewayTurn;
  /** what the backend is sent: the turn's request in the backend's API */
  readonly request: ForwardRequest;
  readonly spec: RequestSpec;
  readonly progress: TurnProgress;
  readonly tap: ReplyTap;
  readonly reply: Deferred<BackendReply>;
  readonly controller: AbortController;
  readonly submittedS: number;
  forwarded: boolean;
  forwardedS: number | null;
  forwardedAtMs: number;
  firstTokenS: number | null;
  /** the scheduler is done with it (finished or aborted) */
  modelDone: boolean;
  replyDone: boolean;
}

type InboxMessage =
  | { kind: "add"; entry: LaneEntry }
  | { kind: "abort"; requestId: string }
  | { kind: "end"; programId: string };

export interface LaneStats {
  turnsForwarded: number;
  /** seconds forwarded turns waited in the gateway before they went to the backend */
  heldSeconds: number;
  turnsFailed: number;
  /** what the backend reported of its answers */
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  /** returning turns whose previous turn's chain the backend's KV events had, and how much of it was still held */
  returningChainTokens: number;
  returningResidentTokens: number;
}

export class BackendLane {
  readonly scheduler: Scheduler;
  readonly stats: LaneStats = {
    turnsForwarded: 0,
    heldSeconds: 0,
    turnsFailed: 0,
    promptTokens: 0,
    cachedTokens: 0,
    completionTokens: 0,
    returningChainTokens: 0,
    returningResidentTokens: 0,
  };
  readonly blockSizeTokens: number;
  readonly maxNumSeqs: number;
  private readonly clock: Clock;
  private readonly entries = new Map<string, LaneEntry>();
  private inbox: InboxMessage[] = [];
  private readonly executor: GatewayExecutor;
  private readonly loop: Promise<void>;
  private readonly chars = new CharsPerToken();
  private readonly calibrated: CalibratedCostModel | null;
  private wakeUp: (() => void) | null = null;
  private stopping = false;
  private turnNumber = 0;

  constructor(private readonly options: LaneOptions) {
    this.clock = options.clock ?? new RealClock();
    const { info, policy } = options;
    const passThrough = policy.name === "vllm";
    this.blockSizeTokens = Math.max(MIN_MODEL_BLOCK, info.blockSizeTokens);
    const numBlocks =
      Math.floor(info.capacityTokens / this.blockSizeTokens) * (passThrough ? PASS_THROUGH_FACTOR : 1);
    this.maxNumSeqs = passThrough ? PASS_THROUGH_SEQS : options.maxNumSeqs;
    this.calibrated = options.costs ? null : new CalibratedCostModel(PRIOR_COSTS, 2048);
    this.scheduler = new Scheduler(
      {
        numBlocks,
        blockSizeTokens: this.blockSizeTokens,
        maxNumBatchedTokens: numBlocks * this.blockSizeTokens,
        maxNumSeqs: this.maxNumSeqs,
        kvBytesPerToken: 1,
        costs: options.costs ?? (this.calibrated as CalibratedCostModel),
      },
      { clock: this.clock, policy },
    );
    this.executor = new GatewayExecutor({
      clock: this.clock,
      entries: this.entries,
      forward: (requestId) => {
        const entry = this.entries.get(requestId);
        if (entry) void this.forward(entry);
      },
      hasPosts: () => this.inbox.length > 0,
      nextWakeS: () => this.scheduler.nextPinExpiryS(),
      applyKvChanges: (changes) => this.options.retention.applyKvChanges(changes),
      afterStep: () => this.options.retention.tick(),
    });
    const loop = new StepLoop(this.scheduler, this.clock, this.environment, this.executor, {
      onFinished: (finished) => {
        for (const request of finished) this.modelFinished(request);
      },
      stallRetryS: STALL_RETRY_S,
    });
    this.loop = runStepLoopAsync(loop);
  }

  get name(): string {
    return this.options.target.name;
  }

  get info(): BackendInfo {
    return this.options.info;
  }

  get retention(): Retention {
    return this.options.retention;
  }

  /** Turns waiting in the gateway for this backend (posted or queued in the scheduler). */
  get heldTurns(): number {
    let posted = 0;
    for (const message of this.inbox) if (message.kind === "add") posted++;
    return this.scheduler.numWaiting + posted;
  }

  get forwardedTurns(): number {
    return this.scheduler.numRunning;
  }

  /** How busy the backend is in the model: running and waiting turns over what it runs at once, plus KV in use. */
  load(): number {
    return (
      (this.scheduler.numRunning + this.heldTurns) / this.options.maxNumSeqs +
      this.scheduler.kvUsageFraction()
    );
  }

  /** KV tokens the backend holds beside its running turns (its LRU room), in the model. */
  idleTokens(): number {
    const capacity = this.options.info.capacityTokens;
    const used = this.scheduler.kvUsageFraction() * this.scheduler.numKvBlocks * this.blockSizeTokens;
    return Math.max(0, capacity - (used - this.scheduler.numPinnedTokens));
  }

  /**
   * Queues a turn; resolves with the backend's answer once the scheduler forwarded it and the backend answered,
   * rejects with BackendUnreachable when the backend could not be reached (the turn may go elsewhere).
   */
  submit(turn: GatewayTurn, signal: AbortSignal): Promise<BackendReply> {
    const requestId = turn.requestId;
    if (this.stopping) return Promise.reject(new BackendUnreachable(this.name, "the gateway is stopping"));
    const content = new TurnContent(
      turn.promptText,
      this.blockSizeTokens,
      turn.cacheSalt ? saltedRootHash(turn.cacheSalt) : ROOT_HASH,
      ++this.turnNumber,
    );
    const info = this.options.info;
    const promptTokens = Math.min(this.chars.tokensOf(turn.promptText.length), info.contextTokens - 1);
    const progress = new TurnProgress();
    const request = requestFor(turn.request, info.messagesApi);
    const entry: LaneEntry = {
      turn,
      request,
      spec: {
        requestId,
        programId: turn.programId,
        promptTokens: Math.max(1, promptTokens),
        maxOutputTokens: Math.max(1, turn.maxOutputTokens ?? info.contextTokens),
        isLastStep: turn.isLastStep,
        toolHint: turn.toolHint,
        retentionHints: turn.retentionHints,
        ...(turn.priorTurns === null ? {} : { priorTurns: turn.priorTurns }),
        content,
        arrivalS: this.clock.nowS(),
      },
      progress,
      tap: new ReplyTap(request.api, {
        onTokens: (count) => {
          progress.received += count;
          if (entry.firstTokenS === null) entry.firstTokenS = this.clock.nowS();
          this.executor.notify();
        },
        onEnd: (error) => this.replyEnded(entry, error),
      }),
      reply: deferred<BackendReply>(),
      controller: new AbortController(),
      submittedS: this.clock.nowS(),
      forwarded: false,
      forwardedS: null,
      forwardedAtMs: 0,
      firstTokenS: null,
      modelDone: false,
      replyDone: false,
    };
    if (signal.aborted) return Promise.reject(signal.reason);
    signal.addEventListener("abort", () => this.abort(requestId, signal.reason), { once: true });
    this.entries.set(requestId, entry);
    this.post({ kind: "add", entry });
    return entry.reply.promise;
  }

  /** The client went away: the backend's request is cancelled, the scheduler hears of it at the loop's next turn. */
  abort(requestId: string, reason?: unknown): void {
    const entry = this.entries.get(requestId);
    // an answer that came whole is not taken back: the model is only catching up with it
    if (!entry || (entry.replyDone && !entry.progress.failed)) return;
    entry.reply.reject(reason ?? new Error("client disconnected"));
    if (!entry.replyDone) entry.controller.abort(reason);
    entry.replyDone = true;
    this.entries.delete(requestId);
    if (!entry.modelDone) this.post({ kind: "abort", requestId });
  }

  /** Ends a live program (a client's finish-session): its pin goes at the loop's next turn. False: none here. */
  endProgram(programId: string): boolean {
    if (!this.scheduler.hasLiveProgram(programId)) return false;
    this.post({ kind: "end", programId });
    return true;
  }

  /**
   * The backend is gone: turns still waiting here are handed back (BackendUnreachable: the gateway sends them
   * elsewhere), turns sent to it end as their requests do (one that got no answer is handed back the same way,
   * a stream it cut ends with an error); the loop ends once they have.
   */
  async retire(why: string): Promise<void> {
    this.stopping = true;
    for (const entry of [...this.entries.values()]) {
      if (!entry.forwarded) this.abort(entry.turn.requestId, new BackendUnreachable(this.name, why));
    }
    await this.stop();
  }

  /** The gateway stops: every turn here ends now (its client is told the gateway is stopping). */
  async close(): Promise<void> {
    this.stopping = true;
    for (const entry of [...this.entries.values()]) {
      this.abort(entry.turn.requestId, new BackendUnreachable(this.name, "the gateway is stopping"));
    }
    await this.stop();
  }

  private async stop(): Promise<void> {
    this.wake();
    this.executor.notify();
    await this.loop;
    await this.options.retention.close();
  }

  private post(message: InboxMessage): void {
    this.inbox.push(message);
    this.wake();
    this.executor.notify();
  }

  private wake(): void {
    this.wakeUp?.();
  }

  private readonly environment: LoopEnvironment<Promise<boolean>> = {
    deliverDue: () => this.deliver(),
    nextEventS: () => (this.inbox.length === 0 ? null : this.clock.nowS()),
    isOver: (_nowS, idle) => this.stopping && idle && this.inbox.length === 0,
    waitUntil: async (untilS) => {
      if (this.inbox.length > 0 || this.stopping) return !this.stopping || this.inbox.length > 0;
      await new Promise<void>((resolve) => {
        const timer =
          untilS === null
            ? null
            : setTimeout(() => this.wakeUp?.(), Math.max(0, (untilS - this.clock.nowS()) * 1000 + 1));
        this.wakeUp = () => {
          if (timer) clearTimeout(timer);
          this.wakeUp = null;
          resolve();
        };
      });
      return true;
    },
  };

  private deliver(): void {
    if (this.inbox.length === 0) return;
    const messages = this.inbox;
    this.inbox = [];
    for (const message of messages) {
      if (message.kind === "abort") {
        this.scheduler.abort(message.requestId);
        continue;
      }
      if (message.kind === "end") {
        this.scheduler.endProgramById(message.programId);
        continue;
      }
      const { entry } = message;
      if (entry.replyDone) continue;
      try {
        this.scheduler.addRequest(entry.spec);
      } catch (error) {
        entry.modelDone = true;
        this.entries.delete(entry.turn.requestId);
        entry.reply.reject(
          error instanceof RequestRejectedError ? new GatewayRejection(error.message, error.code) : error,
        );
      }
    }
  }

  private async forward(entry: LaneEntry): Promise<void> {
    const { turn } = entry;
    entry.forwardedS = this.clock.nowS();
    entry.forwardedAtMs = Date.now();
    this.stats.turnsForwarded++;
    this.stats.heldSeconds += entry.forwardedS - entry.submittedS;
    const index = this.options.kvIndex;
    if (index !== null && turn.programId !== null) {
      const chain = index.chainTokens(turn.programId);
      if (chain !== null) {
        this.stats.returningChainTokens += chain;
        this.stats.returningResidentTokens += index.residentPrefixTokens(turn.programId) ?? 0;
      }
    }
    try {
      const extra = await this.options.retention.prepare(turn, turn.requestId);
      const body = backendBody(entry.request, this.options.target.modelId, extra);
      const reply = await forwardTurn(
        this.options.target,
        entry.request,
        body,
        entry.tap,
        entry.controller.signal,
      );
      entry.reply.resolve(reply);
    } catch (error) {
      entry.tap.end(error instanceof Error ? error.message : String(error));
      entry.reply.reject(error);
      if (error instanceof BackendUnreachable) this.options.onUnreachable(error);
    }
  }

  private replyEnded(entry: LaneEntry, error: string | null): void {
    const { progress, tap, turn } = entry;
    progress.ended = true;
    progress.total = Math.max(progress.received, tap.outputTokens);
    // the answer's structured call, else a call the model wrote as text (a backend with no call parser)
    progress.tool = tap.toolName ?? parseToolName(tap.text);
    progress.failed = error !== null;
    entry.replyDone = true;
    if (error !== null) this.stats.turnsFailed++;
    const usage = tap.usage;
    if (error === null && usage !== null) {
      this.stats.promptTokens += usage.promptTokens;
      this.stats.cachedTokens += usage.cachedTokens ?? 0;
      this.stats.completionTokens += usage.completionTokens;
      this.chars.observe(turn.promptText.length, usage.promptTokens);
      this.observeCosts(entry, usage.promptTokens, usage.cachedTokens ?? 0);
      const index = this.options.kvIndex;
      if (index !== null && turn.programId !== null) {
        const kvTokens = usage.promptTokens + usage.completionTokens - 1;
        // the backend's events for the turn's last blocks may still be on their way
        setTimeout(
          () => index.attribute(turn.programId as string, entry.forwardedAtMs, Date.now(), kvTokens),
          200,
        ).unref();
      }
    }
    if (entry.forwarded) this.options.retention.ended(turn, turn.requestId, tap, error === null);
    // a failed turn's entry goes now: the executor then reports it failed, and the scheduler ends it
    if (entry.modelDone || error !== null) this.entries.delete(turn.requestId);
    this.executor.notify();
  }

  /** A prefill's price, from how long the backend took to its first token (queueing there included). */
  private observeCosts(entry: LaneEntry, promptTokens: number, cachedTokens: number): void {
    if (this.calibrated === null || entry.forwardedS === null || entry.firstTokenS === null) return;
    const computed = promptTokens - cachedTokens;
    if (computed <= 0) return;
    this.calibrated.observe([[computed, cachedTokens]], entry.firstTokenS - entry.forwardedS);
  }

  private modelFinished(request: Request): void {
    const entry = this.entries.get(request.id);
    if (!entry) return;
    entry.modelDone = true;
    if (entry.replyDone) this.entries.delete(request.id);
  }
}

/** The scheduler refused a turn at the door (a program table full, a prompt larger than the backend). */
export class GatewayRejection extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
    this.name = "GatewayRejection";
  }
}
