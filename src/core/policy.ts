import type { CostModel } from "./cost/cost-model.js";
import type { TierName } from "./kv/offload-tiers.js";
import type { Program } from "./program.js";
import type { Request } from "./request.js";
import type { Retention } from "./retention.js";
import type { TtlEstimator } from "./ttl/ttl-model.js";

/** What a policy may read when it decides. */
export interface PolicyContext {
  readonly nowS: number;
  /** tool histories, memoryfulness and queueing statistics, fed by the scheduler */
  readonly ttl: TtlEstimator;
  readonly costs: CostModel;
  /** the tier an unpinned program's KV falls to (null: it is recomputed) */
  readonly offloadTier: TierName | null;
  /** KV tokens held by running requests (InferCept's "memory of the batch") */
  readonly runningKvTokens: number;
  readonly numRunning: number;
  /** tokens the KV pool holds in all */
  readonly kvCapacityTokens: number;
  /** tokens per KV block: prefixes are cached, and found, in whole blocks */
  readonly blockSizeTokens: number;
  /** tokens of KV the offload tiers hold in all (0 without a tier): evicted KV reloads from there */
  readonly offloadCapacityTokens: number;
  /** the programs the scheduler knows (running, waiting, pinned, or between turns and not forgotten) */
  programs(): Iterable<Program>;
  /** the subagents a program spawned (as their clients said) that have not ended */
  liveSubagents(program: Program): Program[];
}

/**
 * A scheduling policy: waiting order, KV retention at the end of a turn, and whom to sacrifice under
 * memory pressure. Everything else (batching, chunking, block accounting) is the scheduler's and is the
 * same for every policy.
 */
export interface SchedulingPolicy {
  readonly name: string;
  readonly description: string;
  /** needs an offload tier to mean what it says (the harness configures a default one) */
  readonly needsOffload: boolean;
  /**
   * how a serving engine reads the tool of a finished turn from model output when the client gave no hint
   * (`fork`: the authors' fork's first word of the bash block)
   */
  readonly toolParser: "paper" | "fork";
  /** priorities move with time, so the waiting queue is re-sorted every step */
  readonly dynamicPriorities: boolean;
  /**
   * With dynamicPriorities: the time (s) at which a waiting request's priority next changes with the clock
   * alone, Infinity if never. Given, the scheduler re-prioritizes a waiting request only then or when its
   * program's attained service moves, instead of every waiting request at every step.
   */
  nextPriorityChangeS?(request: Request, program: Program, nowS: number): number;

  /** Sets request.priority (lexicographic, smaller runs first; arrival order breaks ties). */
  prioritize(request: Request, program: Program, ctx: PolicyContext): void;

  /** Retention of a finished request that is not its program's last. */
  retain(request: Request, program: Program, tool: string, ctx: PolicyContext): Retention;

  /** Order of pin sacrifice under memory pressure: larger rank is unpinned first. */
  pinVictimRank(program: Program): number;

  /**
   * Which pins a turn short of memory may give up while other requests run: every pin (the paper's rule),
   * or only pins that rank as victims ahead of the turn's own program, so a later program never makes an
   * earlier one recompute its context: it waits for memory instead. With nothing else running every pin
   * may go, so waiting never stalls the scheduler. Default: "any".
   */
  readonly pinSacrifice?: "any" | "ranked-after";

  /**
   * A waiting turn starts only when the free blocks hold its whole prompt on top of what running requests
   * still need for the tokens they know, instead of just its first chunk: a turn admitted into too little
   * memory runs out in the middle of its prefill and preempts another turn, whose context is then
   * recomputed. Default: false (vLLM's rule).
   */
  readonly admitsWholePrompts?: boolean;

  /**
   * May the first turn of a new program start now? A policy can hold new programs back while the programs
   * already admitted need the memory. Asked only while something is running, so a refusal never stalls
   * the scheduler. Default: always.
   */
  admitsNewProgram?(request: Request, program: Program, ctx: PolicyContext): boolean;

  /**
   * May this waiting turn of any program, a returning one too, start now? A policy that pauses whole
   * programs (ThunderAgent, CONCUR) holds a paused program's next turn here, as their routers hold it
   * before the engine. Asked, like admitsNewProgram, only for a turn never admitted (a preempted turn is
   * never held) and only while something is running, so a refusal never stalls the scheduler. A held turn
   * keeps its place in the queue, and the queue stops at it: order held turns after the others
   * (dynamicPriorities with nextPriorityChangeS re-sorts them when they may go). Default: always.
   */
  admitsTurn?(request: Request, program: Program, ctx: PolicyContext): boolean;

  /** A program ended: its last step finished, or the client ended it (DELETE /v1/programs). */
  onProgramEnded?(program: Program): void;

  /** May `waiting` (stuck at the head of the queue) preempt `running` to get in? Default: never. */
  preemptsForAdmission?(
    waiting: Request,
    waitingProgram: Program,
    running: Request,
    runningProgram: Program,
  ): boolean;
}
