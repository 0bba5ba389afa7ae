import { CalibratedCostModel } from "../core/calibrated-cost-model.js";
import { type Clock, RealClock } from "../core/clock.js";
import { type CostModel, quadraticCostModel } from "../core/cost-model.js";
import { GIB, tierConfigs } from "../core/kv/offload-tiers.js";
import { ROOT_HASH, saltedRootHash } from "../core/kv/prefix-hash.js";
import { TokenIdContent } from "../core/kv/token-content.js";
import type { SchedulingPolicy } from "../core/policy.js";
import type { EventRecorder } from "../core/recorder/recorder.js";
import type { Request } from "../core/request.js";
import { RequestRejectedError, Scheduler } from "../core/scheduler.js";
import type { SchedulerSnapshot } from "../core/scheduler-snapshot.js";
import {
  type LoopEnvironment,
  runStepLoopAsync,
  StepLoop,
  type StepLoopCounters,
} from "../core/step-loop.js";
import type { KvChanges, SampledToken, ScheduledChunk, StepPlan, StepResult } from "../core/step-plan.js";
import type { TtlEstimatorOptions } from "../core/ttl/ttl-model.js";
import { createPolicy } from "../policies/index.js";
import type { DeviceInfo } from "./device-info.js";
import {
  type ChatTurn,
  type EngineMetrics,
  EngineRejection,
  type EngineService,
  type FinishReason,
  type GenerateEvent,
  type GenerateRequest,
  type ModelChatTemplate,
  type SamplingParams,
} from "./engine-api.js";
import { EventChannel } from "./event-channel.js";
import { type KvSlotStats, KvSlots } from "./kv-slots.js";
import { KvTierStore } from "./kv-tier-store.js";
import { type ModelRunner, RunnerBatch, type RunnerSampling } from "./model-runner.js";
import { OutputText } from "./output-text.js";
import type { StepLogFile } from "./step-log.js";
import { TurnContinuations } from "./turn-continuation.js";

/** RAM and disk tiers for KV the engine drops from the pool (both optional). */
export interface EngineTierOptions {
  readonly cpuBytes?: number;
  readonly diskBytes?: number;
  readonly diskDir?: string | null;
  /** transfer rates the scheduler's cost model assumes for reloads (bytes/s) */
  readonly cpuBandwidthBps?: number;
  readonly diskBandwidthBps?: number;
}

export interface EngineOptions {
  readonly runner: ModelRunner;
  /** a policy name (src/policies) or instance */
  readonly policy: string | SchedulingPolicy;
  /** running requests at once (default min(64, runner slots / 2)) */
  readonly maxNumSeqs?: number;
  /** tokens per step, decodes and prefill chunks together (default 512) */
  readonly maxNumBatchedTokens?: number;
  readonly blockSizeTokens?: number;
  /** KV tokens the scheduler may account for (default: the runner's cells minus a small headroom) */
  readonly kvPoolTokens?: number;
  readonly tiers?: EngineTierOptions;
  /**
   * Only running sequences stay in the runner's pool; pinned KV waits in the RAM tier (KvSlotsOptions). For a
   * model on the CPU with a RAM tier, where both are the same memory (default false).
   */
  readonly kvRunningOnly?: boolean;
  /**
   * PrefillReload for the TTL model, e.g. from a `continuum profile`. Default: prefill priced from the
   * engine's own steps as they run (CalibratedCostModel), defaultCostModel until it has seen enough.
   */
  readonly costs?: CostModel;
  readonly ttl?: TtlEstimatorOptions;
  /** waiting requests beyond which new ones are refused as overloaded (default 1024) */
  readonly maxWaiting?: number;
  /** programs kept at most (default 65536): idle ones are forgotten early, then new ones get 429 */
  readonly maxPrograms?: number;
  readonly recorder?: EventRecorder;
  readonly clock?: Clock;
  /** one record per executed step (`serve --step-log`) */
  readonly stepLog?: StepLogFile;
  /** close the runner at shutdown (default true) */
  readonly closeRunner?: boolean;
}

/** Counters of the engine's executor (for benchmarks and the TS overhead measurement). */
export interface EngineLoopStats {
  steps: number;
  /** rows sent to the runner: prefill (prompt and recompute) and decode tokens */
  batchedTokens: number;
  sampledTokens: number;
  /** wall time of steps, and the part the runner reported as model compute */
  stepWallS: number;
  computeS: number;
  failedSteps: number;
}

interface Active {
  readonly spec: GenerateRequest;
  readonly request: Request;
  readonly content: TokenIdContent;
  readonly output: OutputText;
  readonly channel: EventChannel<GenerateEvent>;
  readonly signal: AbortSignal;
  readonly onAbort: () => void;
  firstAdmittedS: number | null;
  done: boolean;
}

/** Requests counted at once whose tokens are kept for their generate() (others tokenize again). */
const COUNTED_PROMPTS_KEPT = 32;
/** Token ids of programs' last turns kept to splice their next prompts (4 bytes each: 16 MB). */
const CONTINUATION_TOKENS_KEPT = 4_000_000;

/** A program's turns continue each other within one tenant and cache salt only. */
function continuationKey(spec: Pick<GenerateRequest, "programId" | "cacheSalt">): string | null {
  return spec.programId === null ? null : `${spec.cacheSalt ?? ""}\u0000${spec.programId}`;
}

/** Counted prompts are kept per program: the same text continues each program's own last turn. */
function countedKey(program: string | null, text: string): string {
  return `${program ?? ""}\u0001${text}`;
}
const DEFAULT_CPU_BANDWIDTH_BPS = 4e9;
/** a plan with nothing to run while work waits (never expected): look again this much later */
const STALL_RETRY_S = 0.005;
const DEFAULT_DISK_BANDWIDTH_BPS = 1e9;

/** Prefill of a small CPU model: ~5k tokens/s plus 5 ms per call (a profile file replaces it). */
export function defaultCostModel(kvBytesPerToken: number, tiers: EngineTierOptions = {}): CostModel {
  return quadraticCostModel({
    prefillQuadratic: { a: 0, b: 2e-4, c: 0.005 },
    kvBytesPerToken,
    reloadBandwidthBps: {
      cpu: tiers.cpuBandwidthBps ?? DEFAULT_CPU_BANDWIDTH_BPS,
      disk: tiers.diskBandwidthBps ?? DEFAULT_DISK_BANDWIDTH_BPS,
    },
  });
}

function toRunnerSampling(s: SamplingParams): RunnerSampling | null {
  const logitBias = s.logitBias ?? [];
  if (s.temperature <= 0 && s.grammar === null && logitBias.length === 0) return null;
  return {
    temperature: s.temperature,
    topK: s.topK,
    topP: s.topP,
    minP: s.minP,
    seed: s.seed,
    grammar: s.grammar,
    logitBias,
  };
}

function tokenIdsOf(content: TokenIdContent, promptTokens: number): { prompt: number[]; output: number[] } {
  const ids = Array.from({ length: content.length }, (_, pos) => content.tokenAt(pos));
  return { prompt: ids.slice(0, promptTokens), output: ids.slice(promptTokens) };
}

function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * The serving engine: one async loop that drives the core scheduler step by step over a model runner.
 * Each step: schedule() -> materialise admitted requests' prefixes in runner slots -> ONE batch of every
 * chunk (decode tokens, prefill chunks, recomputed ranges) -> execute -> sampled tokens appended,
 * detokenized, checked against stop strings / EOS / max tokens, streamed -> update(plan, result).
 */
export class Engine implements EngineService {
  readonly modelId: string;
  readonly maxContextTokens: number;
  readonly vocabSize: number;
  readonly kvSummary: string;
  readonly device: DeviceInfo;
  readonly scheduler: Scheduler;
  readonly kv: KvSlots;
  readonly loopStats: EngineLoopStats = {
    steps: 0,
    batchedTokens: 0,
    sampledTokens: 0,
    stepWallS: 0,
    computeS: 0,
    failedSteps: 0,
  };
  readonly runner: ModelRunner;
  private readonly clock: Clock;
  private readonly recorder: EventRecorder | null;
  private readonly stepLog: StepLogFile | null;
  /** the TTL model's prices learnt from the steps and restores run; null when the caller gave the costs */
  readonly calibratedCosts: CalibratedCostModel | null;
  private readonly costs: CostModel;
  private readonly tierStore: KvTierStore | null;
  private readonly blockSizeTokens: number;
  private readonly maxWaiting: number;
  /** prompts counted and not yet queued, oldest first: generate() takes their tokens instead of tokenizing again */
  private readonly counted = new Map<string, Int32Array>();
  private readonly continuations = new TurnContinuations(CONTINUATION_TOKENS_KEPT);
  private readonly closeRunner: boolean;
  private readonly active = new Map<string, Active>();
  private readonly batch = new RunnerBatch(1024);
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
    this.maxWaiting = options.maxWaiting ?? 1024;
    const b = options.blockSizeTokens ?? 16;
    this.blockSizeTokens = b;
    const headroom = Math.min(256, Math.floor(runner.kvCells / 64));
    const poolTokens = Math.min(options.kvPoolTokens ?? runner.kvCells - headroom, runner.kvCells);
    const numBlocks = Math.floor(poolTokens / b);
    if (numBlocks < 2) throw new Error(`KV pool of ${poolTokens} tokens is too small`);
    // a running request needs a slot; keep at least one for resident (pinned / cached) KV
    const maxNumSeqs = options.maxNumSeqs ?? Math.max(1, Math.min(64, Math.floor(runner.maxSeqs / 2)));
    if (maxNumSeqs > runner.maxSeqs - 1) {
      throw new Error(`maxNumSeqs ${maxNumSeqs} needs more than the runner's ${runner.maxSeqs} slots`);
    }
    this.maxContextTokens = Math.min(runner.maxContextTokens, numBlocks * b);

    const tierOpts = options.tiers ?? {};
    const maxNumBatchedTokens = options.maxNumBatchedTokens ?? 512;
    const calibrated = options.costs
      ? null
      : new CalibratedCostModel(defaultCostModel(runner.kvBytesPerToken, tierOpts), maxNumBatchedTokens);
    this.calibratedCosts = calibrated;
    this.costs = options.costs ?? (calibrated as CalibratedCostModel);
    const cpuBytes = Math.max(0, Math.floor(tierOpts.cpuBytes ?? 0));
    const diskBytes = Math.max(0, Math.floor(tierOpts.diskBytes ?? 0));
    const tiers = tierConfigs({
      cpuBytes,
      diskBytes,
      cpuBandwidthBps: tierOpts.cpuBandwidthBps ?? DEFAULT_CPU_BANDWIDTH_BPS,
      diskBandwidthBps: tierOpts.diskBandwidthBps ?? DEFAULT_DISK_BANDWIDTH_BPS,
    });
    const gib = (bytes: number) => `${Number((bytes / GIB).toFixed(2))} GiB`;
    this.kvSummary = [
      `${numBlocks * b} KV tokens`,
      ...(runner.kvLayout === "streams"
        ? [
            `${runner.maxSeqs} streams of ${Math.floor(runner.kvCells / runner.maxSeqs)} (longest sequence ${this.maxContextTokens - 1} tokens)`,
          ]
        : []),
      ...(cpuBytes > 0 ? [`RAM tier ${gib(cpuBytes)}`] : []),
      ...(diskBytes > 0 ? [`disk tier ${gib(diskBytes)}`] : []),
    ].join(", ");
    this.tierStore =
      tiers.length > 0
        ? new KvTierStore({
            cpuBytes,
            diskBytes,
            diskDir: tierOpts.diskDir ?? null,
            blockSizeTokens: b,
            ...(runner.allocateStateBuffer ? { allocateState: runner.allocateStateBuffer.bind(runner) } : {}),
          })
        : null;

    const policy = typeof options.policy === "string" ? createPolicy(options.policy) : options.policy;
    this.scheduler = new Scheduler(
      {
        numBlocks,
        blockSizeTokens: b,
        maxNumBatchedTokens,
        maxNumSeqs,
        kvBytesPerToken: runner.kvBytesPerToken,
        tiers,
        costs: this.costs,
        ...(options.ttl ? { ttl: options.ttl } : {}),
        ...(options.maxPrograms ? { maxPrograms: options.maxPrograms } : {}),
      },
      { clock: this.clock, policy, ...(this.recorder ? { recorder: this.recorder } : {}) },
    );
    const recorder = this.recorder;
    this.kv = new KvSlots(
      runner,
      this.tierStore,
      b,
      recorder
        ? (slot, savedTo) => {
            // the engine dropping KV (pinned or cached) from the pool, and where it went
            const base = { programId: slot.programId, requestId: slot.requestId, timeS: this.clock.nowS() };
            if (savedTo) recorder.record({ ...base, kind: "offloaded", tokens: slot.length, tier: savedTo });
            recorder.record({ ...base, kind: "evicted", tokens: slot.length });
          }
        : null,
      {
        runningOnly: options.kvRunningOnly ?? false,
        ...(calibrated ? { onRestore: (tier, tokens, s) => calibrated.observeReload(tier, tokens, s) } : {}),
      },
    );
    const executor = {
      execute: (plan: StepPlan) => this.execute(plan),
      applyKvChanges: (changes: KvChanges) => this.kv.apply(changes),
    };
    this.stepLoop = new StepLoop(this.scheduler, this.clock, this.loopEnvironment, executor, {
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

  renderChat(messages: readonly ChatTurn[]): string {
    return this.runner.renderChat(messages);
  }

  countTokens(text: string): number {
    return this.remember(countedKey(null, text), this.runner.tokenize(text));
  }

  async countPromptTokens(
    text: string,
    program: Pick<GenerateRequest, "programId" | "cacheSalt"> | null = null,
  ): Promise<number> {
    const key = program === null ? null : continuationKey(program);
    const ids = (key === null ? null : this.splice(key, text)) ?? (await this.runner.tokenizeAsync(text));
    return this.remember(countedKey(key, text), ids);
  }

  private remember(key: string, ids: Int32Array): number {
    this.counted.delete(key);
    this.counted.set(key, ids);
    if (this.counted.size > COUNTED_PROMPTS_KEPT)
      this.counted.delete(this.counted.keys().next().value as string);
    return ids.length;
  }

  private splice(program: string, text: string): Int32Array | null {
    return this.continuations.splice(program, text, this.runner);
  }

  /** The server counts a prompt's tokens just before queueing it: that tokenization is reused. */
  private promptIds(spec: GenerateRequest): Int32Array {
    const program = continuationKey(spec);
    const key = countedKey(program, spec.prompt);
    const counted = this.counted.get(key);
    if (counted !== undefined) {
      this.counted.delete(key);
      return counted;
    }
    return (program === null ? null : this.splice(program, spec.prompt)) ?? this.runner.tokenize(spec.prompt);
  }

  private checkedTokenIds(ids: readonly number[]): Int32Array {
    const bad = ids.find((id) => !Number.isInteger(id) || id < 0 || id >= this.vocabSize);
    if (bad !== undefined) {
      throw new EngineRejection(
        `token id ${bad} is not in the vocabulary (0 to ${this.vocabSize - 1})`,
        "invalid_request",
      );
    }
    return Int32Array.from(ids);
  }

  generate(spec: GenerateRequest, signal: AbortSignal): AsyncIterable<GenerateEvent> {
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
    const sampling = spec.sampling;
    if (!Number.isInteger(sampling.maxTokens) || sampling.maxTokens < 1) {
      throw new EngineRejection(
        `max tokens must be a positive integer, got ${sampling.maxTokens}`,
        "invalid_request",
      );
    }
    if (this.active.has(spec.requestId)) {
      throw new EngineRejection(`request id ${spec.requestId} is already in flight`, "duplicate_request");
    }
    // Requests that free run slots will take at the next step are not waiting for long: count the rest.
    const freeRunSlots = Math.max(0, this.scheduler.maxNumSeqs - this.scheduler.numRunning);
    if (this.scheduler.numWaiting - freeRunSlots >= this.maxWaiting) {
      throw new EngineRejection(
        `${this.scheduler.numWaiting} requests are waiting for ${freeRunSlots} free run slots`,
        "overloaded",
        Math.min(60, Math.max(1, Math.ceil(this.recentE2eS))),
      );
    }
    const ids = spec.promptTokenIds ? this.checkedTokenIds(spec.promptTokenIds) : this.promptIds(spec);
    if (ids.length === 0) throw new EngineRejection("the prompt is empty", "invalid_request");
    if (ids.length >= this.maxContextTokens) {
      throw new EngineRejection(
        `the prompt has ${ids.length} tokens; this engine takes at most ${this.maxContextTokens - 1}`,
        "prompt_too_long",
      );
    }
    const content = new TokenIdContent(
      Array.from(ids),
      this.blockSizeTokens,
      spec.cacheSalt ? saltedRootHash(spec.cacheSalt) : ROOT_HASH,
    );
    const channel = new EventChannel<GenerateEvent>(() => this.abortRequest(spec.requestId));
    if (signal.aborted) {
      channel.push(this.abortedBeforeStart(ids.length));
      channel.end();
      return channel;
    }
    let request: Request;
    try {
      request = this.scheduler.addRequest({
        requestId: spec.requestId,
        programId: spec.programId,
        promptTokens: ids.length,
        maxOutputTokens: Math.min(sampling.maxTokens, this.maxContextTokens - ids.length),
        isLastStep: spec.isLastStep,
        toolHint: spec.toolHint,
        ...(spec.retentionHints ? { retentionHints: spec.retentionHints } : {}),
        ...(spec.priorTurns === undefined ? {} : { priorTurns: spec.priorTurns }),
        content,
      });
    } catch (error) {
      if (error instanceof RequestRejectedError) throw new EngineRejection(error.message, error.code);
      throw error;
    }
    const onAbort = () => this.abortRequest(spec.requestId);
    signal.addEventListener("abort", onAbort, { once: true });
    this.active.set(spec.requestId, {
      spec,
      request,
      content,
      output: new OutputText(sampling.stop),
      channel,
      signal,
      onAbort,
      firstAdmittedS: null,
      done: false,
    });
    this.wake();
    return channel;
  }

  drainPrograms(): void {
    this.drainingPrograms = true;
  }

  get numLivePrograms(): number {
    return this.scheduler.numLivePrograms;
  }

  endProgram(programId: string): boolean {
    const ended = this.scheduler.endProgramById(programId);
    // an idle loop hands the released pin to the KV mapping before it sleeps again
    if (ended) this.wake();
    return ended;
  }

  metrics(): EngineMetrics {
    const s = this.scheduler;
    return {
      running: s.numRunning,
      waiting: s.numWaiting,
      pinnedPrograms: s.numPinnedPrograms,
      kvUsage: s.kvUsageFraction(),
      kvBlockSizeTokens: this.blockSizeTokens,
      kvBlocks: s.numKvBlocks,
      prefixQueryTokens: s.stats.prefixQueryTokens,
      prefixHitTokens: s.stats.prefixHitTokens,
      preemptions: s.stats.preemptions,
      pinsCreated: s.stats.pinsCreated,
      pinsExpired: s.stats.pinsExpired,
      pinsSacrificed: s.stats.pinsSacrificed,
      prefill1kTokensS: this.costs.prefillS(1024),
      ramReload1kTokensS: this.costs.reloadS(1024, "cpu"),
    };
  }

  snapshot(): SchedulerSnapshot {
    return this.scheduler.snapshot();
  }

  /** The step loop's own counters: steps, idle waits, and the waits that ended to expire a pin. */
  get loopCounters(): Readonly<StepLoopCounters> {
    return this.stepLoop.counters;
  }

  /** KV mapping counters (prefix sharing, take-overs, restores, recomputes, evictions). */
  kvStats(): Readonly<KvSlotStats> & { residentSlots: number; poolCellsUsed: number } {
    return { ...this.kv.stats, residentSlots: this.kv.numResident, poolCellsUsed: this.kv.ledger.numUsed };
  }

  shutdown(): Promise<void> {
    this.shutdownPromise ??= this.drainAndClose();
    return this.shutdownPromise;
  }

  // -------------------------------------------------------------------------------------------------
  // the loop

  private async run(): Promise<void> {
    try {
      await runStepLoopAsync(this.stepLoop, yieldToEventLoop);
    } catch (error) {
      // a bug in the loop itself: refuse new work, fail what is in flight
      this.fatal = error instanceof Error ? error : new Error(String(error));
      for (const active of [...this.active.values()]) this.failRequest(active, this.fatal);
    }
  }

  /**
   * The serving world around the step loop: HTTP handlers add and abort requests on the scheduler
   * directly and wake the loop; an idle loop sleeps until then or until the next pin expiry.
   */
  private readonly loopEnvironment: LoopEnvironment<Promise<boolean>> = {
    deliverDue: () => {},
    nextEventS: () => null,
    isOver: (_nowS, idle) => this.stopping && idle,
    waitUntil: async (untilS) => {
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

  /**
   * The engine as the loop's executor: follow the plan's KV ownership changes, materialise admitted
   * requests' prefixes in runner slots, then ONE batch of every chunk (decode tokens, prefill chunks,
   * and whatever admitted prefix the engine no longer held), sampled tokens streamed.
   */
  private async execute(plan: StepPlan): Promise<StepResult> {
    const t0 = performance.now();
    const startS = this.clock.nowS();
    const restoredBefore = this.kv.stats.restoredTokens;
    this.kv.apply(plan);
    let computeS = 0;
    const sampled = new Map<string, SampledToken>();
    const recomputed = new Map<string, number>();
    const inBatch: { chunk: ScheduledChunk; rows: number }[] = [];
    try {
      await this.admit(plan, recomputed);
      await this.kv.spillCache();
      const batch = this.batch;
      batch.clear();
      for (const chunk of plan.chunks) {
        const request = chunk.request;
        if (request.status !== "running") continue;
        const slot = this.kv.slotOf(request);
        if (!slot) throw new Error(`running request ${request.id} has no sequence slot`);
        if (slot.length > chunk.startToken) this.kv.truncate(slot, chunk.startToken);
        const from = slot.length;
        const end = chunk.startToken + chunk.numTokens;
        const content = request.content as TokenIdContent;
        for (let pos = from; pos < end; pos++) {
          batch.add(content.tokenAt(pos), pos, slot.seqId, chunk.samples && pos === end - 1);
        }
        inBatch.push({ chunk, rows: end - from });
      }
      if (batch.length > 0) {
        await this.kv.ensureFree(batch.length);
        const result = await this.runner.execute(batch);
        computeS = result.computeS;
        for (const { chunk, rows } of inBatch) {
          const slot = this.kv.slotOf(chunk.request);
          if (slot) this.kv.extend(slot, rows);
        }
        for (const out of result.outputs) this.onSample(out.seqId, out.token, out.isEog, sampled);
        this.loopStats.batchedTokens += batch.length;
        this.loopStats.sampledTokens += result.outputs.length;
      }
    } catch (error) {
      sampled.clear();
      this.failStep(plan, error);
    }
    const durationS = (performance.now() - t0) / 1000;
    const ran = inBatch.map(({ chunk, rows }) => [rows, chunk.startToken + chunk.numTokens - rows] as const);
    this.calibratedCosts?.observe(ran, computeS);
    this.stepLog?.log({
      t: startS,
      wallS: durationS,
      computeS,
      planned: plan.chunks.map((c) => [c.numTokens, c.contextTokens] as const),
      ran,
      restoredTokens: this.kv.stats.restoredTokens - restoredBefore,
    });
    this.loopStats.steps++;
    this.loopStats.stepWallS += durationS;
    this.loopStats.computeS += computeS;
    return { durationS, sampled, recomputed };
  }

  /** Slots for newly admitted requests, their prefix materialised, their sampler set. */
  private async admit(plan: StepPlan, recomputed: Map<string, number>): Promise<void> {
    if (plan.admitted.length === 0) return;
    const startOf = new Map<Request, number>();
    for (const chunk of plan.chunks)
      if (!startOf.has(chunk.request)) startOf.set(chunk.request, chunk.startToken);
    for (const request of plan.admitted) {
      if (request.status !== "running") continue;
      const active = this.active.get(request.id);
      const { slot, recomputedTokens } = await this.kv.admit(
        request,
        startOf.get(request) ?? request.numComputedTokens,
      );
      if (recomputedTokens > 0) recomputed.set(request.id, recomputedTokens);
      if (!active || active.request !== request) continue;
      active.firstAdmittedS ??= request.admittedS;
      try {
        this.runner.setSampler(slot.seqId, toRunnerSampling(active.spec.sampling));
        if (active.spec.sampling.grammar !== null) {
          // a re-admitted (preempted) request's grammar resumes after the output it already has
          for (let pos = request.promptTokens; pos < active.content.length; pos++) {
            this.runner.acceptToken(slot.seqId, active.content.tokenAt(pos));
          }
        }
      } catch (error) {
        this.failRequest(
          active,
          new EngineRejection(`sampling setup failed: ${(error as Error).message}`, "invalid_request"),
        );
      }
    }
  }

  /** A sampled token of a slot: output text, stop checks, stream delta. */
  private onSample(seqId: number, token: number, isEog: boolean, sampled: Map<string, SampledToken>): void {
    const request = this.kv.slots[seqId]?.owner;
    if (request?.status !== "running") return;
    const active = this.active.get(request.id);
    if (!active || active.request !== request || active.done) return;
    active.content.append(token);
    let delta: string;
    let stop: boolean;
    if ((isEog || this.runner.isEog(token)) && !active.spec.sampling.ignoreEos) {
      delta = active.output.finish();
      stop = true;
    } else {
      const pushed = active.output.push(this.runner.tokenPiece(token));
      delta = pushed.delta;
      stop = pushed.stopped;
    }
    const lastToken = request.numOutputTokens + 1 >= request.maxOutputTokens;
    if (!stop && lastToken) delta += active.output.finish();
    if (delta.length > 0) active.channel.push({ type: "delta", text: delta });
    if (stop || lastToken) sampled.set(request.id, { stop, text: active.output.text });
  }

  /** A finished request (stop, length, kv_capacity) gets its done event. */
  private complete(request: Request): void {
    const active = this.active.get(request.id);
    if (!active || active.request !== request || active.done) return;
    const reason: FinishReason = request.finishReason ?? "stop";
    const tail = active.output.finish();
    if (tail.length > 0) active.channel.push({ type: "delta", text: tail });
    this.finishActive(active, reason);
  }

  private finishActive(active: Active, reason: FinishReason): void {
    active.done = true;
    this.active.delete(active.spec.requestId);
    active.signal.removeEventListener("abort", active.onAbort);
    const r = active.request;
    this.rememberTurn(active, reason);
    const nowS = this.clock.nowS();
    const finishS = r.finishS ?? nowS;
    const e2eS = Math.max(0, finishS - r.arrivalS);
    this.recentE2eS = 0.9 * this.recentE2eS + 0.1 * e2eS;
    const admittedS = active.firstAdmittedS ?? r.admittedS;
    active.channel.push({
      type: "done",
      finishReason: reason,
      text: reason === "abort" ? active.output.emittedText : active.output.text,
      stopSequence: reason === "stop" ? active.output.stopString : null,
      usage: {
        promptTokens: r.promptTokens,
        completionTokens: r.numOutputTokens,
        cachedTokens: r.cachedTokens ?? 0,
      },
      queueS: Math.max(0, (admittedS ?? finishS) - r.arrivalS),
      ttftS: r.firstTokenS === null ? null : Math.max(0, r.firstTokenS - r.arrivalS),
      e2eS,
      programJctS:
        active.spec.isLastStep && reason !== "abort" ? Math.max(0, finishS - r.program.firstArrivalS) : null,
      ...(active.spec.returnTokenIds ? { tokenIds: tokenIdsOf(active.content, r.promptTokens) } : {}),
    });
    active.channel.end();
  }

  /** A program's finished turn, for splicing its next prompt (turn-continuation.ts); its last turn, forgotten. */
  private rememberTurn(active: Active, reason: FinishReason): void {
    const program = continuationKey(active.spec);
    if (program === null) return;
    if (active.spec.isLastStep || reason === "abort") {
      this.continuations.forget(program);
      return;
    }
    const ids = Array.from({ length: active.content.length }, (_, i) => active.content.tokenAt(i));
    this.continuations.remember(program, active.spec.prompt, ids, active.request.promptTokens);
  }

  private abortRequest(requestId: string): void {
    const active = this.active.get(requestId);
    if (!active || active.done) return;
    this.scheduler.abort(requestId);
    this.finishActive(active, "abort");
    this.wake();
  }

  private failRequest(active: Active, error: unknown): void {
    if (active.done) return;
    active.done = true;
    this.active.delete(active.spec.requestId);
    active.signal.removeEventListener("abort", active.onAbort);
    this.scheduler.abort(active.spec.requestId);
    active.channel.fail(error);
  }

  /** A step that threw: its requests fail, their KV is dropped (it may be half written); serving goes on. */
  private failStep(plan: StepPlan, error: unknown): void {
    this.loopStats.failedSteps++;
    const err = error instanceof Error ? error : new Error(String(error));
    // every request of the plan: update() would otherwise count chunks that never ran as computed
    const victims = new Set<Request>(plan.admitted);
    for (const chunk of plan.chunks) victims.add(chunk.request);
    for (const request of victims) {
      const slot = this.kv.slotOf(request);
      if (slot) this.kv.drop(slot);
      const active = this.active.get(request.id);
      if (active && active.request === request) this.failRequest(active, err);
      else if (request.status === "running" || request.status === "waiting") this.scheduler.abort(request.id);
    }
  }

  private abortedBeforeStart(promptTokens: number): GenerateEvent {
    return {
      type: "done",
      finishReason: "abort",
      text: "",
      usage: { promptTokens, completionTokens: 0, cachedTokens: 0 },
      queueS: 0,
      ttftS: null,
      e2eS: 0,
      programJctS: null,
    };
  }

  private async drainAndClose(): Promise<void> {
    this.closing = true;
    this.stopping = true;
    this.wake();
    await this.loop;
    this.kv.clear();
    await this.tierStore?.close();
    await this.stepLog?.close();
    try {
      await this.recorder?.close();
    } finally {
      if (this.closeRunner) await this.runner.close();
    }
  }
}
