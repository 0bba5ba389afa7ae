import { applyRetentionHints } from "./client-hints.js";
import type { Clock } from "./clock.js";
import type { CostModel } from "./cost/cost-model.js";
import { MinHeap } from "./heaps/min-heap.js";
import type { KvBlockObserver } from "./kv/block-events.js";
import { BlockPool } from "./kv/block-pool.js";
import { KvCacheManager, type PrefixMatch } from "./kv/kv-cache-manager.js";
import { copiesTakeBlocks, type KvSpec, PAGED_KV } from "./kv/kv-spec.js";
import { OffloadTiers, type TierConfig } from "./kv/offload-tiers.js";
import { SequenceMap } from "./kv/sequences/sequence-map.js";
import { PinBook } from "./pin-book.js";
import type { PolicyContext, SchedulingPolicy } from "./policy.js";
import { anonymousProgramId, type Program } from "./program.js";
import { ProgramRegistry, RequestRejectedError } from "./program-registry.js";
import type { EventRecorder } from "./recorder/recorder.js";
import { type FinishReason, Request, type RequestSpec } from "./request.js";
import { buildSnapshot, DepartedPrograms, type SchedulerSnapshot } from "./scheduler-snapshot.js";
import type {
  KvChanges,
  KvPinned,
  KvRelease,
  ReleaseReason,
  Reload,
  ScheduledChunk,
  StepPlan,
  StepResult,
} from "./step-plan.js";
import { SubagentLinks } from "./subagent-links.js";
import { ToolCallTracker, UNKNOWN_TOOL } from "./tools/tool-call-tracker.js";
import { TtlEstimator, type TtlEstimatorOptions } from "./ttl/ttl-model.js";
import { runsBefore, WaitingQueue } from "./waiting-queue.js";

export interface SchedulerConfig {
  /** KV pool size in blocks */
  readonly numBlocks: number;
  readonly blockSizeTokens?: number;
  /** token budget of one step (chunked prefill) */
  readonly maxNumBatchedTokens?: number;
  readonly maxNumSeqs?: number;
  readonly kvBytesPerToken: number;
  /** offload tiers, fastest first (CPU RAM, then disk) */
  readonly tiers?: readonly TierConfig[];
  readonly costs: CostModel;
  readonly ttl?: TtlEstimatorOptions;
  /** programs idle (no pin, nothing in flight) this long are forgotten */
  readonly programIdleTimeoutS?: number;
  /** programs the scheduler keeps at most; beyond, idle ones are forgotten early, then new ones refused */
  readonly maxPrograms?: number;
  /** what the executor's KV memory is (default paged): with llama-seq the scheduler places KV in its sequences */
  readonly kvSpec?: KvSpec;
}

export interface SchedulerDeps {
  readonly clock: Clock;
  readonly policy: SchedulingPolicy;
  readonly recorder?: EventRecorder;
  /** hears every block hash the KV pool's prefix cache gains and loses (`serve --kv-events-endpoint`) */
  readonly kvObserver?: KvBlockObserver;
}

/** A request the scheduler refuses at the door; the server maps it to a 4xx. */
export { DEFAULT_MAX_PROGRAMS, RequestRejectedError } from "./program-registry.js";

export interface SchedulerStats {
  steps: number;
  preemptions: number;
  /**
   * Prompt tokens looked up when requests were first scheduled, how many of them were reused (resident or
   * reloaded, as the executor reports), and the reloaded part. Re-admissions after a preemption do not
   * count (vLLM counts a request's cached tokens once).
   */
  prefixQueryTokens: number;
  prefixHitTokens: number;
  reloadTokens: number;
  pinsCreated: number;
  pinsReused: number;
  pinsExpired: number;
  pinsSacrificed: number;
  finished: number;
  aborted: number;
}

export interface UpdateOutcome {
  readonly finished: readonly Request[];
  /** KV ownership changes of this update: finished turns pinned or released */
  readonly kvChanges: KvChanges;
}

const SWEEP_EVERY_STEPS = 1024;
/** Programs that left the scheduler kept for its snapshot (the dashboard's finished programs). */
const DEPARTED_KEPT = 256;

/**
 * The step scheduler shared by the real engine and the simulator: continuous batching with chunked prefill
 * under a token budget, vLLM-style block accounting with prefix caching, and the policy's ordering,
 * retention (pins with a TTL) and sacrifice rules. Contract: schedule() -> executor runs the plan ->
 * update(plan, result). Time comes only from the injected clock.
 */
export class Scheduler {
  readonly kv: KvCacheManager;
  readonly kvSpec: KvSpec;
  readonly ttl: TtlEstimator;
  readonly policy: SchedulingPolicy;
  readonly maxNumBatchedTokens: number;
  readonly maxNumSeqs: number;
  readonly stats: SchedulerStats = {
    steps: 0,
    preemptions: 0,
    prefixQueryTokens: 0,
    prefixHitTokens: 0,
    reloadTokens: 0,
    pinsCreated: 0,
    pinsReused: 0,
    pinsExpired: 0,
    pinsSacrificed: 0,
    finished: 0,
    aborted: 0,
  };

  private readonly clock: Clock;
  private readonly recorder: EventRecorder | null;
  private readonly tracker = new ToolCallTracker();
  private readonly waiting = new WaitingQueue();
  /** waiting requests by the time their priority changes (policies with nextPriorityChangeS) */
  private readonly priorityTimers = new MinHeap<Request>();
  /** programs with a waiting request whose attained service moved this step */
  private readonly serviceMoved = new Set<Program>();
  private readonly running: Request[] = [];
  private readonly programs: ProgramRegistry;
  private readonly departed = new DepartedPrograms(DEPARTED_KEPT);
  private readonly pins: PinBook;
  private readonly subagents = new SubagentLinks();
  private readonly live = new Map<string, Request>();
  private readonly ctx: { -readonly [K in keyof PolicyContext]: PolicyContext[K] };
  /** the head that could not fit, and the free blocks then: nothing to retry until more are free */
  private blockedHead: Request | null = null;
  private blockedHeadFreeBlocks = 0;
  private pendingPins: KvPinned[] = [];
  private pendingReleases: KvRelease[] = [];
  /** requests the scheduler ended itself inside schedule(), reported by the next update() */
  private finishedOutsideUpdate: Request[] = [];
  private nextSequenceNumber = 0;
  private nextAdmissionNumber = 0;

  constructor(config: SchedulerConfig, deps: SchedulerDeps) {
    const blockSizeTokens = config.blockSizeTokens ?? 16;
    this.maxNumBatchedTokens = positiveInt(config.maxNumBatchedTokens ?? 2048, "maxNumBatchedTokens");
    this.maxNumSeqs = positiveInt(config.maxNumSeqs ?? 256, "maxNumSeqs");
    const pool = new BlockPool(config.numBlocks, blockSizeTokens, deps.kvObserver ?? null);
    const spec = config.kvSpec ?? PAGED_KV;
    this.kvSpec = spec;
    const tierConfigs = config.tiers ?? [];
    const tiers =
      spec.kind === "paged" && tierConfigs.length > 0
        ? new OffloadTiers(tierConfigs, config.kvBytesPerToken * blockSizeTokens)
        : null;
    const sequences =
      spec.kind === "llama-seq"
        ? new SequenceMap(spec, pool, tierConfigs, config.kvBytesPerToken, (seq, tokens, savedTo) => {
            // the executor dropping KV nobody runs (pinned or cached), and where it went
            const base = { programId: seq.programId, requestId: seq.requestId, timeS: this.clock.nowS() };
            if (savedTo) this.record({ ...base, kind: "offloaded", tokens, tier: savedTo });
            this.record({ ...base, kind: "evicted", tokens });
          })
        : null;
    this.kv = new KvCacheManager(pool, tiers, config.kvBytesPerToken, sequences);
    this.ttl = new TtlEstimator(config.ttl);
    this.policy = deps.policy;
    this.clock = deps.clock;
    this.recorder = deps.recorder ?? null;
    this.programs = new ProgramRegistry({
      ...(config.maxPrograms === undefined ? {} : { maxPrograms: config.maxPrograms }),
      ...(config.programIdleTimeoutS === undefined ? {} : { idleTimeoutS: config.programIdleTimeoutS }),
      onForget: (programId) => {
        this.tracker.forgetProgram(programId);
        this.subagents.forget(programId);
      },
      onLeave: (program) => {
        program.lastTurnBlockHashes = null;
        this.departed.add(program, this.clock.nowS());
      },
    });
    this.pins = new PinBook({
      kv: this.kv,
      policy: this.policy,
      programs: this.programs,
      counters: this.stats,
      record: (event) => this.record(event),
      onPinned: (change) => this.pendingPins.push(change),
      onReleased: (change) => this.pendingReleases.push(change),
      onPinChanged: (program, released, nowS) => {
        if (program.numWaiting > 0) this.reprioritizeProgram(program);
        if (released) {
          this.markUnheld(program, nowS);
          this.programs.forgetIfDone(program);
        }
      },
    });
    this.ctx = {
      nowS: 0,
      ttl: this.ttl,
      costs: config.costs,
      offloadTier: this.kv.tierIndex?.names[0] ?? null,
      runningKvTokens: 0,
      numRunning: 0,
      kvCapacityTokens: config.numBlocks * blockSizeTokens,
      blockSizeTokens,
      offloadCapacityTokens: (config.tiers ?? []).reduce(
        (tokens, tier) => tokens + Math.floor(tier.capacityBytes / config.kvBytesPerToken),
        0,
      ),
      programs: () => this.programs.values(),
      liveSubagents: (program) => this.liveSubagents(program),
    };
  }

  /** The subagents `program` spawned, as their clients said, that have not ended. */
  liveSubagents(program: Program): Program[] {
    const live: Program[] = [];
    for (const id of this.subagents.children(program.id)) {
      const child = this.programs.get(id);
      if (child && !child.ended) live.push(child);
    }
    return live;
  }

  get numWaiting(): number {
    return this.waiting.length;
  }

  /**
   * Seconds the request waiting longest to start has waited so far (0 when none waits): a request a policy
   * holds back shows here while it waits, before any latency histogram sees it. Preempted requests, which
   * have started, are not counted.
   */
  longestWaitS(): number {
    const nowS = this.clock.nowS();
    let longest = 0;
    for (const request of this.waiting) {
      if (request.numAdmissions === 0) longest = Math.max(longest, nowS - request.arrivalS);
    }
    return longest;
  }

  get numRunning(): number {
    return this.running.length;
  }

  get numPinnedPrograms(): number {
    return this.pins.size;
  }

  get numPinnedTokens(): number {
    return this.pins.tokens;
  }

  /** Fraction of KV blocks held by running requests and pins (1 = the whole pool). */
  kvUsageFraction(): number {
    return this.kv.pool.usageFraction();
  }

  get numKvBlocks(): number {
    return this.kv.pool.numBlocks;
  }

  /** What the scheduler holds now, for dashboards and scripts: a scan of the pool and the programs. */
  snapshot(maxPrograms = 200): SchedulerSnapshot {
    return buildSnapshot(
      this.clock.nowS(),
      this.kv.pool,
      this.kv.tierIndex,
      this.programs.values(),
      this.live.values(),
      this.departed,
      maxPrograms,
    );
  }

  /** A program whose turns this scheduler serves and that has not ended. */
  hasLiveProgram(programId: string): boolean {
    const program = this.programs.get(programId);
    return program !== undefined && !program.ended;
  }

  get numLivePrograms(): number {
    return this.programs.size;
  }

  hasUnfinishedRequests(): boolean {
    return this.live.size > 0;
  }

  getRequest(requestId: string): Request | undefined {
    return this.live.get(requestId);
  }

  /** Earliest pin expiry, so an event loop knows when the scheduler next has something to do. */
  nextPinExpiryS(): number | null {
    return this.pins.nextExpiryS();
  }

  /** A new LLM call arrives. Throws RequestRejectedError for requests that can never run. */
  addRequest(spec: RequestSpec): Request {
    if (this.live.has(spec.requestId)) {
      throw new RequestRejectedError(
        `request id ${spec.requestId} is already in flight`,
        "duplicate_request",
      );
    }
    if (!Number.isInteger(spec.promptTokens) || spec.promptTokens < 1) {
      throw new RequestRejectedError(
        `prompt must have at least 1 token, got ${spec.promptTokens}`,
        "invalid_request",
      );
    }
    if (!Number.isInteger(spec.maxOutputTokens) || spec.maxOutputTokens < 1) {
      throw new RequestRejectedError(
        `max output tokens must be >= 1, got ${spec.maxOutputTokens}`,
        "invalid_request",
      );
    }
    const capacityTokens = this.kv.pool.numBlocks * this.kv.blockSizeTokens;
    if (spec.promptTokens + 1 > capacityTokens) {
      throw new RequestRejectedError(
        `prompt of ${spec.promptTokens} tokens does not fit the KV pool of ${capacityTokens} tokens`,
        "prompt_too_long",
      );
    }
    const nowS = this.clock.nowS();
    const programId = spec.programId ?? anonymousProgramId(spec.requestId);
    const program = this.programs.programFor(programId, nowS);
    if (spec.parentProgramId) this.subagents.link(programId, spec.parentProgramId);
    const arrivalS = Math.min(spec.arrivalS ?? nowS, nowS);
    const sample = this.tracker.onRequestArrived(programId, arrivalS);
    if (sample) this.ttl.tools.record(sample.tool, sample.durationS);
    const request = new Request(spec, program, arrivalS, this.nextSequenceNumber++);
    const reusableTokens = this.reusableTokens(request, program);
    program.contextTokens = spec.promptTokens;
    if (program.unheldSinceS !== null) {
      program.unheldS += nowS - program.unheldSinceS;
      program.unheldSinceS = null;
    }
    request.arrivedEvicted = program.numArrived > 0 && program.pin === null;
    program.numArrived++;
    program.numWaiting++;
    this.live.set(request.id, request);
    this.enqueue(request, program);
    this.record({
      kind: "arrival",
      programId,
      requestId: request.id,
      timeS: nowS,
      ...(reusableTokens === null ? {} : { reusableTokens }),
    });
    return request;
  }

  /**
   * Leading prompt tokens of a turn identical to its program's previous finished turn's prompt + output,
   * in whole blocks: equal chained hashes mean equal prefixes, so the first differing block ends it. Null
   * without a previous turn. The prompt's hashes are the ones its prefix lookup asks for (memoised by the
   * engine's content), so this hashes nothing twice.
   */
  private reusableTokens(request: Request, program: Program): number | null {
    const previous = program.lastTurnBlockHashes;
    if (previous === null) return null;
    const blockSizeTokens = this.kv.blockSizeTokens;
    const limit = Math.min(previous.length, Math.floor(request.promptTokens / blockSizeTokens));
    const content = request.content;
    let blocks = 0;
    while (blocks < limit && content.blockHash(blocks) === previous[blocks]) blocks++;
    return blocks * blockSizeTokens;
  }

  /** The hashes of a finished turn's full blocks (prompt + output), which its next turn is measured against. */
  private turnBlockHashes(request: Request): Float64Array {
    const hashes = new Float64Array(Math.floor(request.numTokens / this.kv.blockSizeTokens));
    let blocks = 0;
    try {
      for (; blocks < hashes.length; blocks++) hashes[blocks] = request.content.blockHash(blocks);
    } catch {
      // content holding fewer tokens than the scheduler counted (an executor that dropped a sample, content
      // describing the prompt alone): the blocks it has
      return hashes.subarray(0, blocks);
    }
    return hashes;
  }

  /**
   * The request of `programId` in flight is a side request of it, not a turn (Request.sideRequest). False
   * when no such request is in flight or it is its program's last step.
   */
  markSideRequest(programId: string, requestId: string): boolean {
    const request = this.live.get(requestId);
    if (!request || request.programId !== programId || request.isLastStep) return false;
    request.sideRequest = true;
    return true;
  }

  /** Client went away: drop the request wherever it is. Returns false if it is not in flight. */
  abort(requestId: string): boolean {
    const request = this.live.get(requestId);
    if (!request) return false;
    const program = request.program;
    if (request.status === "waiting") {
      this.waiting.remove(request);
      program.numWaiting--;
    } else {
      this.removeRunning(request);
      program.numRunning--;
      this.releaseRequestKv(request, "aborted");
    }
    request.status = "aborted";
    request.finishReason = "abort";
    request.finishS = this.clock.nowS();
    this.live.delete(requestId);
    this.stats.aborted++;
    this.record({ kind: "aborted", programId: program.id, requestId, timeS: request.finishS });
    if (request.isLastStep && program.numWaiting + program.numRunning === 0) {
      // The client gave up on its program's last call (or its only one): the program is over.
      if (program.pin) this.pins.release(program, "last_step", request.finishS);
      program.ended = true;
      this.tracker.forgetProgram(program.id);
    }
    this.programs.forgetIfDone(program);
    return true;
  }

  /**
   * The client ends a program without a turn (a router's finish-session call): its pin goes at once and
   * its id is forgotten once nothing of it is in flight. False for a program that is not live.
   */
  endProgramById(programId: string): boolean {
    const program = this.programs.get(programId);
    if (!program || program.ended) return false;
    if (program.pin) this.pins.release(program, "last_step", this.clock.nowS());
    this.endProgram(program);
    return true;
  }

  /** Builds the next step. The plan is read-only for the executor. */
  schedule(): StepPlan {
    const nowS = this.clock.nowS();
    this.ctx.nowS = nowS;
    this.stats.steps++;
    if (this.stats.steps % SWEEP_EVERY_STEPS === 0) this.programs.forgetIdle(nowS);
    this.pins.expireDue(nowS);
    this.pins.compact();
    this.kv.sequences?.startStep();
    if (this.policy.dynamicPriorities) {
      if (this.policy.nextPriorityChangeS) this.refreshDuePriorities(nowS);
      else this.refreshAllPriorities();
    }

    const chunks: ScheduledChunk[] = [];
    const preempted: Request[] = [];
    const budget = { tokens: this.maxNumBatchedTokens };
    this.preemptForHead(preempted);
    const preemptedForHead = preempted.length;
    this.scheduleRunning(chunks, preempted, budget);
    const admitted: Request[] = [];
    const reloads: Reload[] = [];
    // As in vLLM, a step that had to preempt running requests for memory admits nobody new.
    if (preempted.length === preemptedForHead) this.admitWaiting(chunks, admitted, reloads, budget, nowS);
    this.kv.sequences?.endStep();

    return {
      stepIndex: this.stats.steps,
      nowS,
      chunks,
      admitted,
      reloads,
      preempted,
      ...this.takeKvChanges(),
      numBatchedTokens: this.maxNumBatchedTokens - budget.tokens,
    };
  }

  /** Applies the executor's outcome of a plan: computed tokens, sampled tokens, finishes. */
  update(plan: StepPlan, result: StepResult): UpdateOutcome {
    const nowS = this.clock.nowS();
    this.ctx.nowS = nowS;
    const finished: Request[] = this.finishedOutsideUpdate;
    this.finishedOutsideUpdate = [];
    for (const requestId of result.failed ?? []) {
      const request = this.live.get(requestId);
      if (request) this.kv.sequences?.discard(request);
      this.abort(requestId);
    }
    const lost = new Set(this.kv.sequences?.lostEntries(result.lostEntries ?? []) ?? []);
    for (const request of lost) this.recomputeLost(request);
    for (const request of plan.admitted) if (!lost.has(request)) this.accountAdmission(request, plan.nowS);
    const held = result.held;
    for (const chunk of plan.chunks) {
      const request = chunk.request;
      if (request.status !== "running" || held?.has(request.id)) continue;
      request.numComputedTokens += chunk.numTokens;
      this.kv.cacheFullBlocks(request);
      const program = request.program;
      program.attainedServiceS += result.durationS;
      if (program.numWaiting > 0 && this.policy.nextPriorityChangeS) this.serviceMoved.add(program);
      if (!chunk.samples) continue;
      request.numOutputTokens++;
      if (request.firstTokenS === null) request.firstTokenS = nowS;
      const sampled = result.sampled?.get(request.id);
      if (sampled?.tool !== undefined) request.calledTool = sampled.tool;
      const reason = sampled?.stop
        ? "stop"
        : request.reachesLengthLimit(request.numOutputTokens)
          ? "length"
          : null;
      if (reason === null) continue;
      this.finish(request, program, reason, nowS);
      finished.push(request);
    }
    return { finished, kvChanges: this.takeKvChanges() };
  }

  /**
   * KV ownership changes since they were last taken (schedule() and update() take them for their plan and
   * outcome; an idle loop takes those of expired pins and aborts).
   */
  takeKvChanges(): KvChanges {
    const changes = {
      pinned: this.pendingPins,
      released: this.pendingReleases,
      ops: this.kv.sequences?.takeOps() ?? [],
    };
    this.pendingPins = [];
    this.pendingReleases = [];
    return changes;
  }

  /** Throws if block accounting, pins or queues are inconsistent. O(pool + requests): tests only. */
  checkInvariants(): void {
    const pool = this.kv.pool;
    pool.checkInvariants();
    const holders = new Int32Array(pool.numBlocks);
    for (const request of this.running)
      for (const b of request.blockIds) holders[b] = (holders[b] as number) + 1;
    for (const program of this.pins.programs()) {
      if (!program.pin) throw new Error(`program ${program.id} is in the pinned set without a pin`);
      if (!this.programs.holds(program)) {
        throw new Error(
          `pinned program ${program.id} is not the live program of that id: unsacrificable pin`,
        );
      }
      for (const b of program.pin.blockIds) holders[b] = (holders[b] as number) + 1;
    }
    for (let b = 0; b < pool.numBlocks; b++) {
      if (holders[b] !== pool.refCount(b)) {
        throw new Error(
          `block ${b}: ref count ${pool.refCount(b)} but ${holders[b]} holders (leak or double free)`,
        );
      }
      if (copiesTakeBlocks(this.kvSpec) && (holders[b] as number) > 1)
        throw new Error(`block ${b} has ${holders[b]} holders, but held prefixes are copied`);
    }
    this.kv.sequences?.checkInvariants();
    if (this.running.length > this.maxNumSeqs) throw new Error("more running requests than maxNumSeqs");
    let previous: Request | undefined;
    for (const request of this.waiting) {
      if (request.status !== "waiting")
        throw new Error(`request ${request.id} in waiting queue is ${request.status}`);
      if (request.blockIds.length > 0) throw new Error(`waiting request ${request.id} holds blocks`);
      if (previous && runsBefore(request, previous)) throw new Error("waiting queue is out of order");
      previous = request;
    }
    if (this.waiting.length + this.running.length !== this.live.size) {
      throw new Error(
        `${this.live.size} live requests but ${this.waiting.length} waiting + ${this.running.length} running`,
      );
    }
  }

  /** Pins past their TTL whose program has no waiting request. Empty right after schedule() by design. */
  overduePins(nowS: number): Program[] {
    return this.pins.overdue(nowS);
  }

  private scheduleRunning(chunks: ScheduledChunk[], preempted: Request[], budget: { tokens: number }): void {
    for (let i = 0; i < this.running.length && budget.tokens > 0; i++) {
      const request = this.running[i] as Request;
      const numTokens = Math.min(
        request.numTokens - request.numComputedTokens,
        budget.tokens,
        this.kv.chunkLimit(request),
      );
      let scheduled = true;
      while (!this.kv.allocateSlots(request, numTokens)) {
        if (this.pins.sacrifice(null, request.program, this.running.length > 1, this.clock.nowS())) continue;
        const victim = this.preemptionVictim(i) ?? request;
        if (victim === request && this.running.length === 1) {
          // Alone, with every pin gone, and still short: the sequence outgrew the whole pool.
          this.finish(request, request.program, "kv_capacity", this.clock.nowS());
          this.finishedOutsideUpdate.push(request);
          i--;
          scheduled = false;
          break;
        }
        this.preempt(victim);
        preempted.push(victim);
        if (victim === request) {
          i--;
          scheduled = false;
          break;
        }
      }
      if (!scheduled) continue;
      budget.tokens -= numTokens;
      chunks.push(this.chunkFor(request, numTokens));
    }
  }

  private admitWaiting(
    chunks: ScheduledChunk[],
    admitted: Request[],
    reloads: Reload[],
    budget: { tokens: number },
    nowS: number,
  ): void {
    while (budget.tokens > 0 && this.running.length < this.maxNumSeqs) {
      const head = this.waiting.peek();
      if (!head) return;
      if (this.stillBlocked(head)) return;
      if (this.holdsBackNewProgram(head)) return;
      if (this.kv.blocksFor(head.numTokens) > this.kv.pool.numBlocks) {
        this.dropOversizedHead(head, nowS);
        continue;
      }
      const match = this.kv.findPrefix(head);
      const numTokens = this.admissionChunk(head, match, budget.tokens);
      const fits = this.admissionFits(head, match, numTokens);
      if (!fits || !this.kv.placeable(head, match)) {
        // Unpinning may reorder the queue (a program losing its pin drops back), so look at the head again.
        if (this.pins.sacrifice(head.programId, head.program, this.running.length > 0, this.clock.nowS()))
          continue;
        // short of blocks, nothing changes until some are freed; short of a sequence or of cells to restore
        // a saved state into (the executor's), the next step looks again
        if (!fits) {
          this.blockedHead = head;
          this.blockedHeadFreeBlocks = this.kv.pool.numFreeBlocks;
        }
        return;
      }
      this.admit(head, match, nowS);
      if (!this.kv.allocateSlots(head, numTokens)) throw new Error("admission space was checked");
      if (match.tier !== null && match.tierTokens > 0) {
        reloads.push({ request: head, tokens: match.tierTokens, tier: match.tier });
      }
      admitted.push(head);
      budget.tokens -= numTokens;
      chunks.push(this.chunkFor(head, numTokens));
    }
  }

  private admissionFits(head: Request, match: PrefixMatch, firstChunkTokens: number): boolean {
    const known = this.knownTokens(match);
    const ownPin = head.program.pin?.blockIds;
    if (!this.policy.admitsWholePrompts) {
      return (
        this.kv.admissionCostBlocks(match, known + firstChunkTokens, ownPin) <= this.kv.pool.numFreeBlocks
      );
    }
    const needed = this.kv.admissionCostBlocks(
      match,
      Math.max(head.numTokens, known + firstChunkTokens),
      ownPin,
    );
    return needed + this.blocksOwedToRunning() <= this.kv.pool.numFreeBlocks;
  }

  /** Blocks running requests still need for the tokens they know (the rest of a prompt being prefilled). */
  private blocksOwedToRunning(): number {
    let owed = 0;
    for (const request of this.running) {
      owed += Math.max(0, this.kv.blocksFor(request.numTokens) - request.blockIds.length);
    }
    return owed;
  }

  /** The policy keeps a turn (admitsTurn) or a new program's first turn waiting (never while nothing runs: no stall). */
  private holdsBackNewProgram(head: Request): boolean {
    const gate = this.policy.admitsNewProgram;
    const turnGate = this.policy.admitsTurn;
    if ((!gate && !turnGate) || head.numAdmissions > 0 || this.running.length === 0) return false;
    this.ctx.numRunning = this.running.length;
    if (turnGate && !turnGate.call(this.policy, head, head.program, this.ctx)) return true;
    const returning = head.turnIndex !== 0 || head.continuesProgram;
    return gate !== undefined && !returning && !gate.call(this.policy, head, head.program, this.ctx);
  }

  /** Same head as last time, no more free blocks, no pin to give up: the lookup would fail again. */
  private stillBlocked(head: Request): boolean {
    if (head !== this.blockedHead) return false;
    // Any pin counts, the head's own too: PinBook.sacrifice gives it up when it is the last one, and a pin
    // created since (an overlapping turn of the head's program) may also be a prefix hit for the head.
    return this.pins.size === 0 && this.kv.pool.numFreeBlocks <= this.blockedHeadFreeBlocks;
  }

  /** A preempted request whose sequence grew past the whole pool can never run again. */
  private dropOversizedHead(head: Request, nowS: number): void {
    const program = head.program;
    this.waiting.shift();
    program.numWaiting--;
    program.numRunning++;
    head.status = "running";
    this.running.push(head);
    this.finish(head, program, "kv_capacity", nowS);
    this.finishedOutsideUpdate.push(head);
  }

  private knownTokens(match: PrefixMatch): number {
    return match.gpuTokens + match.tierTokens;
  }

  /** The first chunk: the rest of the sequence within the budget, stopping where a checkpoint is to be kept. */
  private admissionChunk(request: Request, match: PrefixMatch, budgetTokens: number): number {
    const known = this.knownTokens(match);
    const upTo =
      match.checkpointAt !== undefined && match.checkpointAt > known ? match.checkpointAt : request.numTokens;
    return Math.min(upTo - known, budgetTokens);
  }

  /**
   * Policies where a better waiting request displaces running ones (Autellix's queue levels) preempt before
   * the running phase, so no preempted request already holds a chunk of this step.
   */
  private preemptForHead(preempted: Request[]): void {
    const preemptsForAdmission = this.policy.preemptsForAdmission;
    const head = this.waiting.peek();
    if (!preemptsForAdmission || !head) return;
    const headProgram = head.program;
    for (;;) {
      const match = this.kv.findPrefix(head);
      const numTokens = this.admissionChunk(head, match, this.maxNumBatchedTokens);
      const fits = this.admissionFits(head, match, numTokens) && this.kv.placeable(head, match);
      if (fits && this.running.length < this.maxNumSeqs) return;
      let victim: Request | undefined;
      for (let i = this.running.length - 1; i >= 0 && !victim; i--) {
        const candidate = this.running[i] as Request;
        if (preemptsForAdmission.call(this.policy, head, headProgram, candidate, candidate.program)) {
          victim = candidate;
        }
      }
      if (!victim) return;
      this.preempt(victim);
      preempted.push(victim);
    }
  }

  private admit(request: Request, match: PrefixMatch, nowS: number): void {
    const program = request.program;
    this.waiting.shift();
    program.numWaiting--;
    program.numRunning++;
    // the pin goes first: its blocks and sequence the turn hits are taken back, not copied
    if (program.pin) {
      this.stats.pinsReused++;
      this.pins.release(program, "reused", nowS);
    }
    this.kv.admit(request, match);
    const wasPreempted = request.preempted;
    request.status = "running";
    request.preempted = false;
    request.admittedS = nowS;
    request.admissionNumber = this.nextAdmissionNumber++;
    request.numAdmissions++;
    this.running.push(request);
    if (!wasPreempted && request.arrivedEvicted) this.ttl.queueing.observe(nowS - request.arrivalS);
  }

  /**
   * An admission carried out: the prefix it reused (hits and reloads), counted once per request at its first
   * scheduling, and logged.
   */
  private accountAdmission(request: Request, admittedS: number): void {
    const reloaded = request.reloadTokens;
    const reused = request.hitTokens + request.reloadTokens;
    const first = request.numAdmissions === 1;
    if (first) {
      request.cachedTokens = reused;
      request.cachedReloadTokens = reloaded;
      request.program.promptTokensServed += request.promptTokens;
      request.program.cachedTokensServed += reused;
      this.stats.prefixQueryTokens += request.promptTokens;
      this.stats.prefixHitTokens += reused;
      this.stats.reloadTokens += reloaded;
    }
    const base = { programId: request.programId, requestId: request.id, timeS: admittedS };
    this.record({
      ...base,
      kind: first ? "waiting_to_running" : "evicted_to_running",
      promptTokens: request.numTokens,
      hitTokens: reused,
    });
    const tier = request.reloadTier;
    if (tier !== null && reloaded > 0) this.record({ ...base, kind: "reloaded", tokens: reloaded, tier });
  }

  private chunkFor(request: Request, numTokens: number): ScheduledChunk {
    const startToken = request.numComputedTokens;
    return {
      request,
      startToken,
      numTokens,
      samples: startToken + numTokens === request.numTokens,
      contextTokens: startToken,
      seq: this.kv.sequences?.seqOf(request)?.id ?? null,
    };
  }

  /**
   * An admission whose saved state the executor could not read: its chunk did not run; it waits again to be
   * computed afresh, and its first scheduling is counted when it next runs.
   */
  private recomputeLost(request: Request): void {
    if (request.status !== "running") return;
    this.preempt(request);
    request.numAdmissions--;
  }

  /** Worst-priority running request at or after index `from` (the ones not yet scheduled this step). */
  private preemptionVictim(from: number): Request | undefined {
    let victim: Request | undefined;
    for (let i = from; i < this.running.length; i++) {
      const candidate = this.running[i] as Request;
      if (!victim || !runsBefore(candidate, victim)) victim = candidate;
    }
    return victim;
  }

  private preempt(request: Request): void {
    const program = request.program;
    this.removeRunning(request);
    program.numRunning--;
    this.releaseRequestKv(request, "preempted");
    request.numComputedTokens = 0;
    request.status = "waiting";
    request.preempted = true;
    request.numPreemptions++;
    program.numWaiting++;
    this.stats.preemptions++;
    this.enqueue(request, program);
    this.record({
      kind: "preempted",
      programId: program.id,
      requestId: request.id,
      timeS: this.clock.nowS(),
    });
  }

  private finish(request: Request, program: Program, reason: FinishReason, nowS: number): void {
    this.removeRunning(request);
    program.numRunning--;
    if (!request.sideRequest) {
      program.numFinished++;
      program.lastFinishS = nowS;
      program.contextTokens = request.numTokens;
    }
    request.status = "finished";
    request.finishReason = reason;
    request.finishS = nowS;
    this.live.delete(request.id);
    this.stats.finished++;
    const tool = request.sideRequest ? null : this.toolOf(request);
    this.record({
      kind: "departure",
      programId: program.id,
      requestId: request.id,
      timeS: nowS,
      outputTokens: request.numOutputTokens,
      ...(tool === null ? {} : { tool }),
      ...(request.sideRequest ? { side: true as const } : {}),
    });
    if (request.sideRequest) {
      this.releaseRequestKv(request, "finished");
      this.markUnheld(program, nowS);
      return;
    }
    this.tracker.onRequestFinished(program.id, tool, nowS);
    program.lastTurnTool = tool;
    if (request.isLastStep) {
      this.releaseRequestKv(request, "last_step");
      if (program.pin) this.pins.release(program, "last_step", nowS);
      this.endProgram(program);
      return;
    }
    // only a recorder reads the reusable prefix: without one, no turn keeps hashes for the next
    if (this.recorder !== null && !program.ended) program.lastTurnBlockHashes = this.turnBlockHashes(request);
    this.ctx.runningKvTokens = this.runningKvTokens();
    this.ctx.numRunning = this.running.length;
    const retention = applyRetentionHints(
      this.policy.retain(request, program, tool ?? UNKNOWN_TOOL, this.ctx),
      request.retentionHints,
    );
    // A turn that outlives its program's last step (overlapping requests) has no next turn to pin for; a TTL
    // too small to move the clock past now (a tool seen taking 5e-324 s) would be a pin already expired.
    if (retention.kind === "pin" && nowS + retention.ttlS > nowS && !program.ended) {
      this.pins.pin(request, program, retention.ttlS, nowS);
    } else {
      this.releaseRequestKv(request, "finished");
      this.markUnheld(program, nowS);
    }
  }

  private markUnheld(program: Program, nowS: number): void {
    if (program.pin === null && program.numRunning === 0 && program.numWaiting === 0 && !program.ended) {
      program.unheldSinceS = nowS;
    }
  }

  /** Expires pins that are due, outside a step (an idle engine's timer). */
  expireDuePins(): void {
    this.pins.expireDue(this.clock.nowS());
  }

  /** A request leaves the running set: its blocks go back to the pool, its executor's sequence with them. */
  private releaseRequestKv(request: Request, reason: ReleaseReason): void {
    const tokens = request.numComputedTokens;
    this.kv.freeRequest(request);
    this.pendingReleases.push({
      requestId: request.id,
      programId: request.programId,
      holder: "request",
      reason,
      tokens,
    });
  }

  private endProgram(program: Program): void {
    program.ended = true;
    program.lastTurnBlockHashes = null;
    this.policy.onProgramEnded?.(program);
    this.ttl.memoryfulness.observeFinishedProgram(program.numFinished);
    this.tracker.forgetProgram(program.id);
    this.programs.forgetIfDone(program);
  }

  /** The tool a finished turn called: its client's word, else what its executor read from the output. */
  private toolOf(request: Request): string | null {
    return request.toolHint ? request.toolHint : request.calledTool;
  }

  private enqueue(request: Request, program: Program): void {
    this.policy.prioritize(request, program, this.ctx);
    this.waiting.insert(request);
    const changesAtS =
      this.policy.nextPriorityChangeS?.(request, program, this.ctx.nowS) ?? Number.POSITIVE_INFINITY;
    request.priorityTimerS = changesAtS;
    if (changesAtS < Number.POSITIVE_INFINITY) this.priorityTimers.push(changesAtS, request);
  }

  /** Re-prioritizes the waiting requests whose time has come, and those whose program's service moved. */
  private refreshDuePriorities(nowS: number): void {
    for (const program of this.serviceMoved) this.reprioritizeProgram(program);
    this.serviceMoved.clear();
    for (let atS = this.priorityTimers.peekKey(); atS !== undefined && atS <= nowS; ) {
      const request = this.priorityTimers.pop() as Request;
      const due = atS;
      atS = this.priorityTimers.peekKey();
      // A request that left the queue or was re-queued since has a newer timer (or none).
      if (request.status !== "waiting" || request.priorityTimerS !== due) continue;
      this.waiting.remove(request);
      this.enqueue(request, request.program);
    }
  }

  private reprioritizeProgram(program: Program): void {
    const mine: Request[] = [];
    for (const request of this.waiting) if (request.programId === program.id) mine.push(request);
    for (const request of mine) {
      this.waiting.remove(request);
      this.enqueue(request, program);
    }
  }

  private refreshAllPriorities(): void {
    let changed = false;
    for (const request of this.waiting) {
      const p = request.priority;
      const a = p[0];
      const b = p[1];
      const c = p[2];
      this.policy.prioritize(request, request.program, this.ctx);
      if (p[0] !== a || p[1] !== b || p[2] !== c) changed = true;
    }
    // Priorities move rarely (a queue level crossed, a starvation promotion): skip the sort otherwise.
    if (changed) this.waiting.resort();
  }

  private removeRunning(request: Request): void {
    const index = this.running.indexOf(request);
    if (index >= 0) this.running.splice(index, 1);
  }

  private runningKvTokens(): number {
    let tokens = 0;
    for (const request of this.running) tokens += request.numComputedTokens;
    return tokens;
  }

  private record(event: Parameters<EventRecorder["record"]>[0]): void {
    this.recorder?.record(event);
  }
}

function positiveInt(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`${name} must be a positive integer, got ${value}`);
  return value;
}
