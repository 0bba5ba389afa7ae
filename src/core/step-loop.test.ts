import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { VirtualClock } from "./clock.js";
import type { SchedulingPolicy } from "./policy.js";
import type { Scheduler } from "./scheduler.js";
import { type Executor, type LoopEnvironment, runStepLoop, StepLoop } from "./step-loop.js";
import type { KvChanges, StepResult } from "./step-plan.js";
import { addRequest } from "./test-support/drive.js";
import { testScheduler } from "./test-support/harness.js";

/** Pins every non-last turn for `ttlS` (Infinity: until the program returns, as InferCept's preserve). */
function pinFor(ttlS: number): SchedulingPolicy {
  return {
    name: `pin-${ttlS}`,
    description: "test",
    needsOffload: false,
    toolParser: "paper",
    dynamicPriorities: false,
    prioritize: (request, program) => {
      request.priority[0] = program.firstArrivalS;
    },
    retain: () => ({ kind: "pin", ttlS }),
    pinVictimRank: (program) => program.firstArrivalS,
  };
}

/** Requests added at given times; waits advance the virtual clock; every wait is remembered. */
class ScriptedWorld implements LoopEnvironment<boolean> {
  readonly waits: (number | null)[] = [];

  constructor(
    private readonly clock: VirtualClock,
    private readonly arrivals: { atS: number; add: () => void }[],
  ) {}

  deliverDue(nowS: number): void {
    while (this.arrivals.length > 0 && (this.arrivals[0]?.atS ?? 0) <= nowS) this.arrivals.shift()?.add();
  }

  nextEventS(): number | null {
    return this.arrivals[0]?.atS ?? null;
  }

  isOver(): boolean {
    return false;
  }

  waitUntil(untilS: number | null): boolean {
    this.waits.push(untilS);
    if (untilS === null) return false;
    this.clock.advanceTo(Math.max(this.clock.nowS(), untilS));
    return true;
  }
}

/** Every step takes 10 ms; KV changes handed to the executor between plans are kept. */
class RecordingExecutor implements Executor<StepResult> {
  readonly changes: KvChanges[] = [];

  constructor(private readonly clock: VirtualClock) {}

  execute(): StepResult {
    this.clock.advanceTo(this.clock.nowS() + 0.01);
    return { durationS: 0.01 };
  }

  applyKvChanges(changes: KvChanges): void {
    this.changes.push(changes);
  }
}

function world(
  policy: SchedulingPolicy,
  arrivals: (scheduler: Scheduler) => { atS: number; add: () => void }[],
) {
  const { scheduler, clock } = testScheduler(policy, { numBlocks: 64 });
  const env = new ScriptedWorld(clock, arrivals(scheduler));
  const executor = new RecordingExecutor(clock);
  const loop = new StepLoop(scheduler, clock, env, executor);
  return { scheduler, clock, env, executor, loop };
}

describe("StepLoop", () => {
  it("an idle loop wakes at the next arrival or the pin's expiry, whichever comes first", () => {
    const { scheduler, clock, env, executor, loop } = world(pinFor(2), (s) => [
      { atS: 0, add: () => addRequest(s, "a0", 40, { programId: "a" }) },
      { atS: 5, add: () => addRequest(s, "b0", 40, { programId: "b", isLastStep: true }) },
    ]);
    runStepLoop(loop);
    assert.equal(env.waits.length, 3);
    const [toExpiry, toArrival, end] = env.waits;
    assert.ok(toExpiry !== null && toExpiry !== undefined && Math.abs(toExpiry - 2.01) < 1e-9, `${toExpiry}`);
    assert.equal(toArrival, 5);
    assert.equal(end, null, "nothing left: the loop ends");
    assert.equal(loop.counters.pinExpiryWakes, 1);
    assert.equal(scheduler.stats.pinsExpired, 1);
    // the pin made by update() and its expiry while idle both reached the executor between plans
    const flat = executor.changes.flatMap((c) => [
      ...c.pinned.map((p) => `pinned ${p.requestId}`),
      ...c.released.map((r) => `${r.reason} ${r.holder} ${r.requestId}`),
    ]);
    assert.deepEqual(flat, ["pinned a0", "expired pin a0", "last_step request b0"]);
    assert.ok(clock.nowS() > 5);
  });

  it("a pin without a TTL never wakes an idle loop", () => {
    const { scheduler, env, loop } = world(pinFor(Number.POSITIVE_INFINITY), (s) => [
      { atS: 0, add: () => addRequest(s, "a0", 40, { programId: "a" }) },
    ]);
    runStepLoop(loop);
    assert.deepEqual(env.waits, [null]);
    assert.equal(loop.counters.pinExpiryWakes, 0);
    assert.equal(scheduler.numPinnedPrograms, 1, "the pin is still held: it waits for its program");
  });
});
