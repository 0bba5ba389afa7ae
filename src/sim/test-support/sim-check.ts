import assert from "node:assert/strict";
import type { TierConfig } from "../../core/kv/offload-tiers.js";
import type { SchedulingPolicy } from "../../core/policy.js";
import type { Rng } from "../../core/rng.js";
import type { Scheduler } from "../../core/scheduler.js";
import { linearStepTimeS, testScheduler } from "../../core/test-support/harness.js";
import { createPolicy } from "../../policies/index.js";
import type { SimProgramSpec, SimRunResult, SimTurn } from "../event-loop.js";
import { runSimulation } from "../event-loop.js";

export const BLOCK_SIZE = 16;
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
  readonly policy: string;
  readonly numBlocks: number;
  readonly maxNumBatchedTokens: number;
  readonly maxNumSeqs: number;
  /** tier sizes in blocks; a CPU tier is always added for policies that need offload */
  readonly cpuBlocks?: number;
  readonly diskBlocks?: number;
  readonly seedSalt?: number;
  /** a past queueing delay (T) seeded into the TTL model, so TTL policies pin for ln(T + ...) s */
  readonly queueingS?: number;
}

export interface RunReport {
  readonly result: SimRunResult;
  readonly scheduler: Scheduler;
  readonly arrivals: number;
  readonly aborts: number;
  readonly steps: number;
  readonly schedules: number;
}

/**
 * A request needing the whole pool (a program of its own) must get in whatever is pinned, and afterwards
 * every block is free. Call with nothing in flight.
 */
export function assertWholePoolFits(scheduler: Scheduler): void {
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
    scheduler.checkInvariants();
  }
  assert.equal(scheduler.hasUnfinishedRequests(), false, "a whole-pool request could not get in");
  assert.equal(scheduler.numPinnedPrograms, 0, "a pin survived a request needing the whole pool");
  assert.equal(pool.numFreeBlocks, pool.numBlocks, "blocks leaked");
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

/**
 * Runs a workload through runSimulation with every safety check on: scheduler invariants after every
 * step, no overdue pin right after any schedule(), no stall; then drains: the clock passes every finite
 * TTL, pins expire, and a request needing the whole pool must get in (sacrificing whatever pins remain).
 * Afterwards every block is free and every arrived request finished or was aborted.
 */
export function checkedRun(
  specs: readonly SimProgramSpec[],
  config: RunConfig,
  policy: SchedulingPolicy = createPolicy(config.policy),
): RunReport {
  const { scheduler, clock } = testScheduler(policy, {
    numBlocks: config.numBlocks,
    maxNumBatchedTokens: config.maxNumBatchedTokens,
    maxNumSeqs: config.maxNumSeqs,
    tiers: tiersFor(config, policy.needsOffload),
  });
  if ((config.queueingS ?? 0) > 0) scheduler.ttl.queueing.observe(config.queueingS ?? 0);
  let schedules = 0;
  const schedule = scheduler.schedule.bind(scheduler);
  scheduler.schedule = () => {
    const plan = schedule();
    schedules++;
    const overdue = scheduler.overduePins(plan.nowS);
    assert.equal(overdue.length, 0, `pins past their TTL with nothing waiting: ${overdue.map((p) => p.id)}`);
    assert.ok(plan.numBatchedTokens <= scheduler.maxNumBatchedTokens, "token budget exceeded");
    return plan;
  };
  const result = runSimulation(specs, {
    scheduler,
    clock,
    blockSizeTokens: BLOCK_SIZE,
    stepTimeS: linearStepTimeS,
    seedSalt: config.seedSalt ?? 0,
    onStep: () => scheduler.checkInvariants(),
  });

  let arrivals = 0;
  let aborts = 0;
  for (const program of result.programs) {
    arrivals += program.turns.length;
    for (const turn of program.turns) if (turn.aborted) aborts++;
  }
  assert.equal(scheduler.hasUnfinishedRequests(), false, "requests left in flight");
  assert.equal(scheduler.stats.aborted, aborts, "abort count");
  assert.equal(
    scheduler.stats.finished + scheduler.stats.aborted,
    arrivals,
    "every request finished or aborted",
  );

  // Drain: let every finite TTL pass. Pins still there are TTL-less (InferCept) or lost programs'.
  const finiteExpiry = scheduler.nextPinExpiryS();
  if (finiteExpiry !== null && Number.isFinite(finiteExpiry)) clock.advanceTo(clock.nowS() + 1e6);
  scheduler.schedule();
  scheduler.checkInvariants();
  const pool = scheduler.kv.pool;
  if (scheduler.numPinnedPrograms === 0) {
    assert.equal(pool.numFreeBlocks, pool.numBlocks, "blocks leaked with nothing live and no pin");
  } else {
    assert.equal(policy.name, "infercept", "only InferCept pins without a TTL");
    assert.equal(scheduler.nextPinExpiryS(), Number.POSITIVE_INFINITY);
  }
  assertWholePoolFits(scheduler);
  return { result, scheduler, arrivals, aborts, steps: result.steps, schedules };
}
