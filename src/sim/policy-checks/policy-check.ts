/**
 * The policy conformance check: a policy runs small randomized agent workloads through the simulator with
 * every safety check on (scheduler invariants after every step, no overdue pin after any schedule(), no
 * stall, nothing leaked). The conformance suite runs it for every built-in policy (policy-conformance.test.ts)
 * and `continuum policies --check <spec>` for any policy, a module's too, so one suite serves both.
 */

import { CHECK_BLOCK_TOKENS, checkScheduler, linearStepTimeS } from "../../core/check-scheduler.js";
import type { TierConfig } from "../../core/kv/offload-tiers.js";
import type { SchedulingPolicy } from "../../core/policy.js";
import { Rng } from "../../core/rng.js";
import type { Scheduler } from "../../core/scheduler.js";
import { StepLoopStalledError } from "../../core/step-loop.js";
import type { SimProgramSpec, SimRunResult, SimTurn } from "../event-loop.js";
import { runSimulation } from "../event-loop.js";

export const BLOCK_SIZE = CHECK_BLOCK_TOKENS;
export const TOOLS = ["ls", "pytest", "grep", "python"] as const;

/** A turn of a random program before it is laid out as a growing conversation. */
export interface TurnDraft {
  readonly newTokens: number;
  readonly output: number;
  readonly tool: string | null;
  /** tool time after this turn; Infinity = the tool never returns */
  readonly toolS: number;
}

export interface ProgramDraft {
  readonly arrivalS: number;
  readonly turns: readonly TurnDraft[];
  readonly abort?: { readonly turn: number; readonly afterS: number };
}

/**
 * Lays drafts out as agent conversations: turn i's prompt is turn i-1's prompt and output (all cached)
 * plus new tokens. Turns that would not fit the pool (prompt + 1 > capacity) are cut.
 */
export function layOut(drafts: readonly ProgramDraft[], capacityTokens: number): SimProgramSpec[] {
  return drafts.map((draft, index) => {
    const turns: SimTurn[] = [];
    let context = 0;
    for (const t of draft.turns) {
      const input = context + t.newTokens;
      if (input + 1 > capacityTokens) break;
      turns.push({ input, cached: context, output: t.output, tool: t.tool, toolS: t.toolS });
      context = input + t.output;
    }
    if (turns.length === 0) turns.push({ input: 1, cached: 0, output: 1, tool: null, toolS: null });
    const abort = draft.abort && draft.abort.turn < turns.length ? draft.abort : undefined;
    return { id: `prog${index}`, arrivalS: draft.arrivalS, turns, abortTurnAfterS: abort };
  });
}

/** Seeded random programs (no aborts, finite tools) for the conformance suite. */
export function randomDrafts(
  rng: Rng,
  options: { numPrograms: number; maxTurns: number; maxNewTokens: number; maxOutput: number; spanS: number },
): ProgramDraft[] {
  return Array.from({ length: options.numPrograms }, () => ({
    arrivalS: rng.next() * options.spanS,
    turns: Array.from({ length: rng.int(1, options.maxTurns) }, () => ({
      newTokens: rng.int(1, options.maxNewTokens),
      output: rng.int(1, options.maxOutput),
      tool: rng.next() < 0.1 ? null : rng.pick(TOOLS),
      toolS: rng.next() < 0.3 ? rng.exponential(0.05) : rng.exponential(2),
    })),
  }));
}

export interface RunConfig {
  readonly numBlocks: number;
  readonly maxNumBatchedTokens: number;
  readonly maxNumSeqs: number;
  /** tier sizes in blocks; a CPU tier is always added for policies that need offload */
  readonly cpuBlocks?: number;
  readonly diskBlocks?: number;
  readonly seedSalt?: number;
  /** a past queueing delay (T) seeded into the TTL model, so TTL policies pin for ln(T + ...) s */
  readonly queueingS?: number;
  /** schedule() calls after which the run is judged to make no progress (default: unlimited) */
  readonly maxSchedules?: number;
}

export interface RunReport {
  readonly result: SimRunResult;
  readonly scheduler: Scheduler;
  readonly arrivals: number;
  readonly aborts: number;
  readonly steps: number;
  readonly schedules: number;
  /** programs still pinned after every finite TTL passed: pins without a TTL (sacrificed at the end) */
  readonly endlessPins: number;
}

/** What kind of rule a failed run broke. */
export type CheckFailureKind =
  | "incomplete"
  | "stall"
  | "no progress"
  | "invariant"
  | "leak"
  | "policy threw"
  | "bad result"
  | "error";

/** A broken rule of the check; `kind` says which. */
export class PolicyCheckError extends Error {
  constructor(
    readonly kind: CheckFailureKind,
    message: string,
  ) {
    super(message);
    this.name = "PolicyCheckError";
  }
}

function check(condition: boolean, kind: CheckFailureKind, message: string): void {
  if (!condition) throw new PolicyCheckError(kind, message);
}

/**
 * A request needing the whole pool (a program of its own) must get in whatever is pinned, and afterwards
 * every block is free. Call with nothing in flight.
 */
export function checkWholePoolFits(scheduler: Scheduler): void {
  const pool = scheduler.kv.pool;
  scheduler.addRequest({
    requestId: "whole-pool",
    programId: null,
    promptTokens: pool.numBlocks * BLOCK_SIZE - 1,
    maxOutputTokens: 1,
    isLastStep: true,
    content: { blockHash: (i) => 0x7000_0000 + i },
  });
  for (let i = 0; i < 1000 && scheduler.hasUnfinishedRequests(); i++) {
    const plan = scheduler.schedule();
    scheduler.update(plan, { durationS: 0.01 });
    invariants(scheduler);
  }
  check(
    !scheduler.hasUnfinishedRequests(),
    "leak",
    "a request needing the whole KV pool could not get in once every program was done",
  );
  check(
    scheduler.numPinnedPrograms === 0,
    "leak",
    "a pin survived a request needing the whole KV pool (pins must give way to memory pressure)",
  );
  check(
    pool.numFreeBlocks === pool.numBlocks,
    "leak",
    `blocks leaked: ${pool.numBlocks - pool.numFreeBlocks} of ${pool.numBlocks} not free after the whole-pool request`,
  );
}

function tiersFor(config: RunConfig, needsOffload: boolean): TierConfig[] | undefined {
  const bytesPerBlock = BLOCK_SIZE * 1024;
  const tiers: TierConfig[] = [];
  const cpu = config.cpuBlocks ?? (needsOffload ? 64 : 0);
  if (cpu > 0) tiers.push({ name: "cpu", capacityBytes: cpu * bytesPerBlock, reloadBandwidthBps: 1e9 });
  if (cpu > 0 && (config.diskBlocks ?? 0) > 0) {
    tiers.push({
      name: "disk",
      capacityBytes: (config.diskBlocks ?? 0) * bytesPerBlock,
      reloadBandwidthBps: 1e8,
    });
  }
  return tiers.length > 0 ? tiers : undefined;
}

/** The scheduler's invariants, a break reported as one. */
function invariants(scheduler: Scheduler): void {
  try {
    scheduler.checkInvariants();
  } catch (error) {
    throw new PolicyCheckError("invariant", `scheduler invariant broken: ${(error as Error).message}`);
  }
}

/**
 * Runs a workload through runSimulation with every safety check on: scheduler invariants after every
 * step, no overdue pin right after any schedule(), no stall; then drains: the clock passes every finite
 * TTL, pins expire, and a request needing the whole pool must get in (sacrificing whatever pins remain).
 * Afterwards every block is free and every arrived request finished or was aborted. Throws a
 * PolicyCheckError at the first broken rule (a StepLoopStalledError for a stall).
 */
export function checkedRun(
  specs: readonly SimProgramSpec[],
  config: RunConfig,
  policy: SchedulingPolicy,
): RunReport {
  const { scheduler, clock } = checkScheduler(policy, {
    numBlocks: config.numBlocks,
    maxNumBatchedTokens: config.maxNumBatchedTokens,
    maxNumSeqs: config.maxNumSeqs,
    tiers: tiersFor(config, policy.needsOffload),
  });
  if ((config.queueingS ?? 0) > 0) scheduler.ttl.queueing.observe(config.queueingS ?? 0);
  let schedules = 0;
  const maxSchedules = config.maxSchedules ?? Number.POSITIVE_INFINITY;
  const schedule = scheduler.schedule.bind(scheduler);
  scheduler.schedule = () => {
    check(
      schedules < maxSchedules,
      "no progress",
      `no progress: ${maxSchedules} schedule() calls at t=${clock.nowS().toFixed(3)} s and ${scheduler.numWaiting} requests still waiting (a livelock, e.g. turns preempting each other for ever)`,
    );
    const plan = schedule();
    schedules++;
    const overdue = scheduler.overduePins(plan.nowS);
    check(
      overdue.length === 0,
      "invariant",
      `pins past their TTL with nothing waiting: ${overdue.map((p) => p.id)}`,
    );
    check(plan.numBatchedTokens <= scheduler.maxNumBatchedTokens, "invariant", "token budget exceeded");
    return plan;
  };
  const result = runSimulation(specs, {
    scheduler,
    clock,
    blockSizeTokens: BLOCK_SIZE,
    stepTimeS: linearStepTimeS,
    seedSalt: config.seedSalt ?? 0,
    onStep: () => invariants(scheduler),
  });

  let arrivals = 0;
  let aborts = 0;
  for (const program of result.programs) {
    arrivals += program.turns.length;
    for (const turn of program.turns) if (turn.aborted) aborts++;
  }
  check(!scheduler.hasUnfinishedRequests(), "incomplete", "requests left in flight at the end of the run");
  check(
    scheduler.stats.aborted === aborts,
    "invariant",
    `${scheduler.stats.aborted} requests aborted, the clients aborted ${aborts}`,
  );
  check(
    scheduler.stats.finished + scheduler.stats.aborted === arrivals,
    "incomplete",
    `${arrivals} requests arrived, ${scheduler.stats.finished} finished and ${scheduler.stats.aborted} were aborted`,
  );

  // Drain: let every finite TTL pass. Pins still there have no TTL (InferCept's) or are lost programs'.
  const finiteExpiry = scheduler.nextPinExpiryS();
  if (finiteExpiry !== null && Number.isFinite(finiteExpiry)) clock.advanceTo(clock.nowS() + 1e6);
  scheduler.schedule();
  invariants(scheduler);
  const pool = scheduler.kv.pool;
  const endlessPins = scheduler.numPinnedPrograms;
  if (endlessPins === 0) {
    check(
      pool.numFreeBlocks === pool.numBlocks,
      "leak",
      `blocks leaked: ${pool.numBlocks - pool.numFreeBlocks} of ${pool.numBlocks} not free with nothing live and no pin`,
    );
  } else {
    check(
      scheduler.nextPinExpiryS() === Number.POSITIVE_INFINITY,
      "invariant",
      "a pin with a finite TTL outlived it",
    );
  }
  checkWholePoolFits(scheduler);
  return { result, scheduler, arrivals, aborts, steps: result.steps, schedules, endlessPins };
}

/** One workload of the conformance check: a seed and a scheduler configuration. */
export interface ConformanceWorkload {
  readonly seed: number;
  readonly numBlocks: number;
  readonly maxNumBatchedTokens: number;
  readonly maxNumSeqs: number;
  /** a past queueing delay T seeded into the TTL model, so the TTL policies pin for ln(T + ...) s */
  readonly queueingS: number;
}

/** Small pools, small batches: preemption, sacrificed, expired and reused pins all happen. */
export const CONFORMANCE_WORKLOADS: readonly ConformanceWorkload[] = [
  { seed: 1, numBlocks: 64, maxNumBatchedTokens: 128, maxNumSeqs: 8, queueingS: 0 },
  { seed: 2, numBlocks: 40, maxNumBatchedTokens: 64, maxNumSeqs: 4, queueingS: 5 },
  { seed: 3, numBlocks: 128, maxNumBatchedTokens: 256, maxNumSeqs: 16, queueingS: 30 },
  { seed: 4, numBlocks: 24, maxNumBatchedTokens: 32, maxNumSeqs: 3, queueingS: 5 },
];

/**
 * schedule() calls a workload may take: the built-in policies need about a thousand at most, so a policy
 * still going at 50 times that livelocks (turns that preempt each other for ever) rather than runs slowly.
 */
export const CONFORMANCE_MAX_SCHEDULES = 50_000;

/** The programs of a conformance workload: 14 random agent programs of up to 6 turns, arriving within 2 s. */
export function conformancePrograms(workload: ConformanceWorkload): SimProgramSpec[] {
  const capacity = workload.numBlocks * BLOCK_SIZE;
  const drafts = randomDrafts(new Rng(workload.seed), {
    numPrograms: 14,
    maxTurns: 6,
    maxNewTokens: Math.floor(capacity / 6),
    maxOutput: 40,
    spanS: 2,
  });
  return layOut(drafts, capacity);
}

export function describeWorkload(w: ConformanceWorkload): string {
  return `seed ${w.seed}: ${w.numBlocks} blocks of ${BLOCK_SIZE} tokens, ${w.maxNumBatchedTokens} tokens per step, ${w.maxNumSeqs} sequences, past queueing ${w.queueingS} s`;
}

/** A workload's verdict: its run's report, or the rule it broke. */
export type WorkloadVerdict =
  | { readonly workload: ConformanceWorkload; readonly ok: true; readonly report: RunReport }
  | {
      readonly workload: ConformanceWorkload;
      readonly ok: false;
      readonly kind: CheckFailureKind;
      readonly message: string;
    };

/**
 * Runs one conformance workload on a fresh policy: every check of checkedRun, and every program completes
 * every turn. Never throws: a broken rule, a stall or a policy method that throws is the verdict.
 */
export function checkWorkload(
  createPolicy: () => SchedulingPolicy,
  workload: ConformanceWorkload,
): WorkloadVerdict {
  try {
    const policy = reportingThrows(createPolicy());
    const report = checkedRun(
      conformancePrograms(workload),
      { ...workload, seedSalt: workload.seed, maxSchedules: CONFORMANCE_MAX_SCHEDULES },
      policy,
    );
    for (const program of report.result.programs) {
      check(
        program.finishS !== null && program.turns.length === program.numTurns,
        "incomplete",
        `program ${program.id} did not complete: ${program.turns.filter((t) => t.finishS !== null).length} of ${program.numTurns} turns finished`,
      );
    }
    return { workload, ok: true, report };
  } catch (error) {
    const kind: CheckFailureKind =
      error instanceof PolicyCheckError
        ? error.kind
        : error instanceof StepLoopStalledError
          ? "stall"
          : "error";
    const message = error instanceof Error ? error.message : String(error);
    return { workload, ok: false, kind, message };
  }
}

/** Every conformance workload on a fresh policy each. */
export function checkPolicy(createPolicy: () => SchedulingPolicy): WorkloadVerdict[] {
  return CONFORMANCE_WORKLOADS.map((workload) => checkWorkload(createPolicy, workload));
}

/** What a policy method's result must be (null: fine), for the methods whose result the scheduler uses. */
const RESULT_CHECKS: Readonly<Record<string, (result: unknown, args: readonly unknown[]) => string | null>> =
  {
    prioritize: (_result, args) => {
      const priority = (args[0] as { priority: readonly unknown[] }).priority;
      return priority.every((x) => typeof x === "number" && !Number.isNaN(x))
        ? null
        : `left request.priority [${priority.map(String).join(", ")}]: three numbers, none NaN`;
    },
    retain: (result) => {
      const r = result as { kind?: unknown; ttlS?: unknown } | null | undefined;
      if (r?.kind === "free") return null;
      if (r?.kind === "pin" && typeof r.ttlS === "number" && r.ttlS >= 0) return null;
      return `returned ${describeResult(result)}: { kind: "free" } or { kind: "pin", ttlS: seconds >= 0 }`;
    },
    pinVictimRank: (result) => numberNotNaN(result),
    nextPriorityChangeS: (result) => numberNotNaN(result),
    admitsNewProgram: (result) => boolean(result),
    admitsTurn: (result) => boolean(result),
    preemptsForAdmission: (result) => boolean(result),
  };

function numberNotNaN(result: unknown): string | null {
  return typeof result === "number" && !Number.isNaN(result)
    ? null
    : `returned ${describeResult(result)}: a number, not NaN`;
}

function boolean(result: unknown): string | null {
  return typeof result === "boolean" ? null : `returned ${describeResult(result)}: a boolean`;
}

function describeResult(result: unknown): string {
  if (typeof result === "number" || result === undefined) return String(result);
  try {
    return JSON.stringify(result) ?? String(result);
  } catch {
    return String(result);
  }
}

/**
 * The policy with each method's exceptions reported as the policy's ("retain threw: ..."), and the results
 * the scheduler uses checked (no NaN priority or rank, a Retention, booleans from the admission gates). A
 * proxy: every other member is read from the policy as it is now, absent optional ones stay absent, and each
 * method is called on the policy itself, as the scheduler calls it.
 */
function reportingThrows(policy: SchedulingPolicy): SchedulingPolicy {
  const wrappers = new Map<string, { method: (...args: unknown[]) => unknown; wrapper: unknown }>();
  return new Proxy(policy, {
    get(target, key) {
      const member: unknown = Reflect.get(target, key, target);
      if (typeof member !== "function" || typeof key !== "string") return member;
      const cached = wrappers.get(key);
      if (cached?.method === member) return cached.wrapper;
      const method = member as (...args: unknown[]) => unknown;
      const checkResult = RESULT_CHECKS[key];
      const wrapper = (...args: unknown[]) => {
        let result: unknown;
        try {
          result = method.apply(target, args);
        } catch (error) {
          if (error instanceof PolicyCheckError) throw error;
          const message = error instanceof Error ? error.message : String(error);
          throw new PolicyCheckError("policy threw", `the policy's ${key} threw: ${message}`);
        }
        const problem = checkResult?.(result, args);
        if (problem) throw new PolicyCheckError("bad result", `the policy's ${key} ${problem}`);
        return result;
      };
      wrappers.set(key, { method, wrapper });
      return wrapper;
    },
  });
}
