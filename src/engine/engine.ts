import { type Clock, RealClock } from "../core/clock.js";
import type { CalibratedCostModel } from "../core/cost/calibrated-cost-model.js";
import type { CostModel } from "../core/cost/cost-model.js";
import { ROOT_HASH, saltedRootHash } from "../core/kv/prefix-hash.js";
import type { SequenceMap, SequenceMapStats } from "../core/kv/sequences/sequence-map.js";
import { TokenIdContent } from "../core/kv/token-content.js";
import type { EventRecorder } from "../core/recorder/recorder.js";
import type { Request } from "../core/request.js";
import type { Scheduler } from "../core/scheduler.js";
import type { SchedulerSnapshot } from "../core/scheduler-snapshot.js";
import {
  type LoopEnvironment,
  runStepLoopAsync,
  StepLoop,
  type StepLoopCounters,
} from "../core/step-loop.js";
import {
  type ActiveRequest,
  type ActiveRequests,
  abortedBeforeStart,
  doneEvent,
  failActive,
  pushDelta,
  pushPromptUsage,
  requestSpecOf,
} from "./active-request.js";
import {
  type ChatTurn,
  type EngineMetrics,
  EngineRejection,
  type EngineService,
  type FinishReason,
  type GenerateEvent,
  type GenerateRequest,
  type ModelChatTemplate,
  type ProgramKv,
  type PromptLogprob,
  type RenderChatOptions,
} from "./engine-api.js";
import { EngineInbox } from "./engine-inbox.js";
import { buildEngineParts, type EngineOptions } from "./engine-setup.js";
import { EventChannel } from "./event-channel.js";
import type { DeviceInfo } from "./gpu/device-info.js";
import type { KvEventPublisher } from "./kv/kv-event-publisher.js";
import { kvByProgram } from "./kv/kv-residency.js";
import type { KvTierStore } from "./kv/kv-tier-store.js";
import { type EngineLoopStats, LlamaExecutor } from "./llama-executor.js";
import type { ModelRunner } from "./runners/model-runner.js";
import type { StepLogFile } from "./step-log.js";
import { OutputText } from "./text/output-text.js";
import { OutputTokens } from "./text/output-tokens.js";
import { checkedTokenIds, PromptIds } from "./text/prompt-ids.js";
import { ThinkingBudgetWatch } from "./text/thinking-budget.js";
import { turnToolReader } from "./text/turn-tool.js";

export { defaultCostModel, type EngineOptions, type EngineTierOptions } from "./engine-setup.js";
export type { EngineLoopStats } from "./llama-executor.js";

/** a plan with nothing to run while work waits (never expected): look again this much later */
const STALL_RETRY_S = 0.005;

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * The serving engine: HTTP handlers call generate() and abort (by signal) and post what they want to an
 * inbox; ONE async step loop (core/step-loop.ts, the same the simulator runs) delivers the inbox to the
 * scheduler, schedules, has the LlamaExecutor run the plan on the model runner, and updates. Every scheduler
 * change happens inside that loop, in serving as in simulation; outside it the scheduler is only read.
 */
export class Engine implements EngineService {
  readonly modelId: string;
  readonly maxContextTokens: number;
  readonly vocabSize: number;
  readonly kvSummary: string;
  readonly device: DeviceInfo;
  readonly scheduler: Scheduler;
  /** where the scheduler places KV in the runner's sequences */
  readonly sequences: SequenceMap;
  readonly runner: ModelRunner;
  /** the TTL model's prices learnt from the steps and restores run; null when the caller gave the costs */
  readonly calibratedCosts: CalibratedCostModel | null;
  private readonly executor: LlamaExecutor;
  private readonly clock: Clock;
  private readonly recorder: EventRecorder | null;
  private readonly stepLog: StepLogFile | null;
  private readonly costs: CostModel;
  private readonly tierStore: KvTierStore | null;
  private readonly blockSizeTokens: number;
  private readonly maxWaiting: number;
  private readonly promptIds: PromptIds;
  private readonly closeRunner: boolean;
  private readonly kvEvents: KvEventPublisher | null;
  private readonly active: ActiveRequests = new Map();
  private readonly inbox = new EngineInbox(() => this.wake());
  private readonly stepLoop: StepLoop;
  private readonly loop: Promise<void>;
  private wakeUp: (() => void) | null = null;
  private closing = false;
  private drainingPrograms = false;
  private stopping = false;
  private shutdownPromise: Promise<void> | null = null;
  private fatal: Error | null = null;
  /** moving average of finished requests' end-to-end seconds (Retry-After hint) */
  private recentE2eS = 1;

  constructor(options: EngineOptions) {
    const runner = options.runner;
    this.runner = runner;
    this.modelId = runner.modelId;
    this.vocabSize = runner.vocabSize;
    this.device = runner.device;
    this.clock = options.clock ?? new RealClock();
    this.recorder = options.recorder ?? null;
    this.stepLog = options.stepLog ?? null;
    this.closeRunner = options.closeRunner ?? true;
    this.kvEvents = options.kvEvents ?? null;
    this.maxWaiting = options.maxWaiting ?? 1024;
    const parts = buildEngineParts(options, this.clock);
    this.scheduler = parts.scheduler;
    const sequences = this.scheduler.kv.sequences;
    if (!sequences) throw new Error("the engine's scheduler places KV in sequences (llama-seq spec)");
    this.sequences = sequences;
    this.tierStore = parts.tierStore;
    this.costs = parts.costs;
    this.calibratedCosts = parts.calibratedCosts;
    this.blockSizeTokens = parts.blockSizeTokens;
    this.maxContextTokens = parts.maxContextTokens;
    this.kvSummary = parts.kvSummary;
    this.promptIds = new PromptIds(runner);
    const calibrated = this.calibratedCosts;
    this.executor = new LlamaExecutor({
      runner,
      tierStore: this.tierStore,
      ...(calibrated ? { onRestore: (tier, tokens, s) => calibrated.observeReload(tier, tokens, s) } : {}),
      active: this.active,
      clock: this.clock,
      calibratedCosts: this.calibratedCosts,
      stepLog: this.stepLog,
    });
    this.stepLoop = new StepLoop(this.scheduler, this.clock, this.loopEnvironment, this.executor, {
      onStep: (plan) => {
        for (const request of plan.admitted) {
          const active = this.active.get(request.id);
          if (active?.request === request) pushPromptUsage(active);
        }
      },
      onFinished: (finished) => {
        for (const request of finished) this.complete(request);
      },
      stallRetryS: STALL_RETRY_S,
    });
    this.loop = this.run();
  }

  get chatTemplate(): ModelChatTemplate {
    return this.runner.chatTemplate;
  }

  /** Counters of the executor: steps, rows, sampled tokens, wall and compute time, failed steps. */
  get loopStats(): Readonly<EngineLoopStats> {
    return this.executor.stats;
  }

  renderChat(messages: readonly ChatTurn[], options?: RenderChatOptions): string {
    return this.runner.renderChat(messages, options);
  }

  async tokenize(text: string, { addSpecial }: { readonly addSpecial: boolean }): Promise<number[]> {
    return Array.from(await this.runner.tokenizeAsync(text, { addSpecial }));
  }

  tokenPieces(ids: readonly number[]): Uint8Array[] {
    return Array.from(checkedTokenIds(ids, this.vocabSize), (id) => this.runner.templatePiece(id));
  }

  detokenize(ids: readonly number[]): string {
    return this.runner.detokenize(checkedTokenIds(ids, this.vocabSize));
  }

  countTokens(text: string): number {
    return this.promptIds.countTokens(text);
  }

  countPromptTokens(
    text: string,
    program: Pick<GenerateRequest, "programId" | "cacheSalt"> | null = null,
  ): Promise<number> {
    return this.promptIds.countPromptTokens(text, program);
  }

  generate(spec: GenerateRequest, signal: AbortSignal): AsyncIterable<GenerateEvent> {
    const ids = this.promptIds.prepare(spec, this.vocabSize);
    this.checkAccepting(spec);
    if (ids.length === 0) throw new EngineRejection("the prompt is empty", "invalid_request");
    if (ids.length >= this.maxContextTokens) {
      throw new EngineRejection(
        `the prompt has ${ids.length} tokens; this engine takes at most ${this.maxContextTokens - 1}`,
        "prompt_too_long",
      );
    }
    const scoresPrompt = spec.sampling.promptLogprobs != null;
    // a prompt scored for its logprobs is computed whole: salted by its own id, no cached prefix matches it
    const salt = scoresPrompt ? `prompt-logprobs\u0000${spec.requestId}` : spec.cacheSalt;
    const content = new TokenIdContent(
      Array.from(ids),
      this.blockSizeTokens,
      salt ? saltedRootHash(salt) : ROOT_HASH,
    );
    const channel = new EventChannel<GenerateEvent>(() => this.abortRequest(spec.requestId));
    if (signal.aborted) {
      channel.push(abortedBeforeStart(ids.length));
      channel.end();
      return channel;
    }
    const requestSpec = requestSpecOf(spec, content, this.maxContextTokens, this.clock.nowS());
    const onAbort = () => this.abortRequest(spec.requestId);
    signal.addEventListener("abort", onAbort, { once: true });
    const active: ActiveRequest = {
      spec,
      requestSpec,
      request: null,
      content,
      output: new OutputText(spec.sampling.stop),
      logprobs: spec.sampling.logprobs == null ? null : new OutputTokens(),
      tokenIds: spec.returnTokenIds ? new OutputTokens() : null,
      promptLogprobs: scoresPrompt ? new Array<PromptLogprob | null>(ids.length).fill(null) : null,
      channel,
      signal,
      onAbort,
      firstAdmittedS: null,
      promptIdsOut: false,
      promptUsageOut: false,
      thinking: spec.sampling.thinkingBudget ? new ThinkingBudgetWatch(spec.sampling.thinkingBudget) : null,
      preserved: this.preservedIds(spec.sampling.preservedTokens ?? []),
      readTool: turnToolReader(this.scheduler.policy.toolParser, spec),
      done: false,
    };
    this.active.set(spec.requestId, active);
    this.inbox.postRequest(active);
    return channel;
  }

  private readonly singleTokens = new Map<string, number | null>();

  /** The ids of the texts that are one token each of this model's (looked up once per text). */
  private preservedIds(texts: readonly string[]): ReadonlySet<number> {
    const ids = new Set<number>();
    for (const text of texts) {
      let id = this.singleTokens.get(text);
      if (id === undefined) {
        const tokens = this.runner.tokenizeContinuation(text);
        id = tokens.length === 1 ? (tokens[0] as number) : null;
        this.singleTokens.set(text, id);
      }
      if (id !== null) ids.add(id);
    }
    return ids;
  }

  /** The checks generate() makes before anything is queued: shutdown, draining, duplicates, load. */
  private checkAccepting(spec: GenerateRequest): void {
    if (this.closing) throw new EngineRejection("the engine is shutting down", "shutting_down");
    if (
      this.drainingPrograms &&
      (spec.programId === null || !this.scheduler.hasLiveProgram(spec.programId))
    ) {
      throw new EngineRejection(
        "this replica is draining: it serves only programs it already holds; send new programs elsewhere",
        "draining",
      );
    }
    if (this.fatal) throw this.fatal;
    if (this.active.has(spec.requestId)) {
      throw new EngineRejection(`request id ${spec.requestId} is already in flight`, "duplicate_request");
    }
    // Requests that free run slots will take at the next step are not waiting for long: count the rest.
    const waiting = this.scheduler.numWaiting + this.inbox.numRequests;
    const freeRunSlots = Math.max(0, this.scheduler.maxNumSeqs - this.scheduler.numRunning);
    if (waiting - freeRunSlots >= this.maxWaiting) {
      throw new EngineRejection(
        `${waiting} requests are waiting for ${freeRunSlots} free run slots`,
        "overloaded",
        Math.min(60, Math.max(1, Math.ceil(this.recentE2eS))),
      );
    }
  }

  drainPrograms(): void {
    this.drainingPrograms = true;
  }

  /** Ends a live program (its pin goes at once); false when the scheduler holds no such program. */
  endProgram(programId: string): boolean {
    if (this.inbox.hasEndPosted(programId) || !this.scheduler.hasLiveProgram(programId)) return false;
    this.inbox.postEnd(programId);
    return true;
  }

  markSideRequest(programId: string, requestId: string): void {
    this.inbox.postSideRequest(programId, requestId);
  }

  metrics(): EngineMetrics {
    const s = this.scheduler;
    return {
      running: s.numRunning,
      waiting: s.numWaiting + this.inbox.numRequests,
      longestWaitS: s.longestWaitS(),
      pinnedPrograms: s.numPinnedPrograms,
      kvUsage: s.kvUsageFraction(),
      kvBlockSizeTokens: this.blockSizeTokens,
      kvBlocks: s.numKvBlocks,
      prefixQueryTokens: s.stats.prefixQueryTokens,
      prefixHitTokens: s.stats.prefixHitTokens,
      generatedTokens: this.executor.stats.sampledTokens,
      preemptions: s.stats.preemptions,
      pinsCreated: s.stats.pinsCreated,
      pinsExpired: s.stats.pinsExpired,
      pinsSacrificed: s.stats.pinsSacrificed,
      prefill1kTokensS: this.costs.prefillS(1024),
      ramReload1kTokensS: this.costs.reloadS(1024, "cpu"),
      modelComputeS: this.executor.stats.computeS,
      samplingS: this.executor.stats.sampleS,
      memory: {
        modelBytes: this.device.layersOffloaded === 0 ? this.runner.weightBytes : 0,
        kvPoolBytes: this.device.kvCache === "cpu" ? this.runner.kvCells * this.runner.kvBytesPerToken : 0,
        ramTierBytes: this.tierStore?.usage.cpuBytes ?? 0,
        stateBufferBytes: this.tierStore?.buffers.freeBytes ?? 0,
        programs: s.numLivePrograms,
      },
    };
  }

  snapshot(): SchedulerSnapshot {
    return this.scheduler.snapshot();
  }

  kvByProgram(): ReadonlyMap<string, ProgramKv> {
    return kvByProgram(this.sequences.seqs, this.sequences.tiers?.all() ?? []);
  }

  /** The step loop's own counters: steps, idle waits, and the waits that ended to expire a pin. */
  get loopCounters(): Readonly<StepLoopCounters> {
    return this.stepLoop.counters;
  }

  /** What the scheduler decided of the runner's KV (sharing, copies, take-overs, restores, evictions). */
  kvStats(): Readonly<SequenceMapStats> & { residentSlots: number; poolCellsUsed: number } {
    const sequences = this.sequences;
    return { ...sequences.stats, residentSlots: sequences.numResident, poolCellsUsed: sequences.cellsUsed() };
  }

  shutdown(): Promise<void> {
    this.shutdownPromise ??= this.drainAndClose();
    return this.shutdownPromise;
  }

  // -------------------------------------------------------------------------------------------------
  // the loop and its inbox

  private async run(): Promise<void> {
    try {
      await runStepLoopAsync(this.stepLoop, yieldToEventLoop);
    } catch (error) {
      // a bug in the loop itself: refuse new work, fail what is in flight
      this.fatal = error instanceof Error ? error : new Error(String(error));
      for (const active of [...this.active.values()]) failActive(active, this.active, this.fatal);
    }
  }

  /** The serving world around the step loop: the inbox, delivered at each turn; sleep until a post or a pin expiry. */
  private readonly loopEnvironment: LoopEnvironment<Promise<boolean>> = {
    deliverDue: () => this.inbox.deliver(this.scheduler, this.active),
    nextEventS: () => (this.inbox.isEmpty ? null : this.clock.nowS()),
    isOver: (_nowS, idle) => this.stopping && idle && this.inbox.isEmpty,
    waitUntil: async (untilS) => {
      if (!this.inbox.isEmpty) return true;
      await this.sleep(untilS === null ? null : (untilS - this.clock.nowS()) * 1000 + 1);
      return true;
    },
  };

  private sleep(ms: number | null): Promise<void> {
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | null = null;
      this.wakeUp = () => {
        if (timer) clearTimeout(timer);
        this.wakeUp = null;
        resolve();
      };
      if (ms !== null) {
        timer = setTimeout(() => this.wakeUp?.(), Math.max(0, ms));
        timer.unref();
      }
    });
  }

  private wake(): void {
    this.wakeUp?.();
  }

  /** A finished request (stop, length, kv_capacity) gets its done event. */
  private complete(request: Request): void {
    const active = this.active.get(request.id);
    if (!active || active.request !== request || active.done) return;
    const reason: FinishReason = request.finishReason ?? "stop";
    pushDelta(active, active.output.finish(), true);
    this.finishActive(active, reason);
  }

  private finishActive(active: ActiveRequest, reason: FinishReason): void {
    active.done = true;
    this.active.delete(active.spec.requestId);
    active.signal.removeEventListener("abort", active.onAbort);
    if (!active.request?.sideRequest) {
      this.promptIds.rememberTurn(active.spec, reason, active.content, active.requestSpec.promptTokens);
    }
    const event = doneEvent(active, reason, this.clock.nowS());
    if (event.type === "done") this.recentE2eS = 0.9 * this.recentE2eS + 0.1 * event.e2eS;
    active.channel.push(event);
    active.channel.end();
  }

  /** The client went away: its stream ends now, the scheduler hears of it at the loop's next turn. */
  private abortRequest(requestId: string): void {
    const active = this.active.get(requestId);
    if (!active || active.done) return;
    this.finishActive(active, "abort");
    this.inbox.postAbort(requestId);
  }

  private async drainAndClose(): Promise<void> {
    this.closing = true;
    this.stopping = true;
    this.wake();
    await this.loop;
    const keep = this.tierStore?.persists ?? false;
    this.sequences.shutdown(keep);
    await this.executor.flush(this.sequences.takeOps());
    await this.kvEvents?.close();
    await this.tierStore?.close(keep ? (this.sequences.tiers?.all() ?? []) : null);
    await this.stepLog?.close();
    try {
      await this.recorder?.close();
    } finally {
      if (this.closeRunner) await this.runner.close();
    }
  }
}
