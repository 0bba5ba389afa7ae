import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { VirtualClock } from "../../core/clock.js";
import type { Scheduler } from "../../core/scheduler.js";
import { addRequest, loggedScheduler, step, tokenRange } from "../../core/test-support/drive.js";
import { createThunderAgentPolicy, THUNDERAGENT_DYNAMO, THUNDERAGENT_PAPER } from "./thunderagent.js";

/** 400 blocks of 16 tokens: a pool of 6400 tokens; whole prompts prefill in one step. */
function thunder(options = THUNDERAGENT_PAPER) {
  const policy = createThunderAgentPolicy(options);
  const logged = loggedScheduler(policy, { numBlocks: 400, maxNumBatchedTokens: 8192 });
  return { ...logged, policy, ta: policy.thunder };
}

/** Steps of 1 s for `seconds` of simulated time; returns the ids of the turns admitted meanwhile. */
function runFor(scheduler: Scheduler, clock: VirtualClock, seconds: number, stops: string[] = []): string[] {
  const admitted: string[] = [];
  for (let i = 0; i < seconds; i++) {
    admitted.push(...step(scheduler, clock, 1, stops).plan.admitted.map((r) => r.id));
  }
  return admitted;
}

/** A turn that decodes for as long as the test runs (a long-reasoning program). */
const LONG = { maxOutputTokens: 100_000 };

describe("thunderagent", () => {
  it("a paused program resumes smallest first, and new programs queue behind paused ones", () => {
    const { scheduler, clock, ta } = thunder();
    addRequest(scheduler, "A0", 3000, { programId: "A", ...LONG });
    addRequest(scheduler, "B0", 2000, { programId: "B", ...LONG });
    assert.deepEqual(runFor(scheduler, clock, 1), ["A0", "B0"], "3100 + 2100 of 6400 tokens: both start");
    // 1200 tokens are left beside A and B (with 100 per program for their decode).
    addRequest(scheduler, "D0", 1500, { programId: "D" });
    addRequest(scheduler, "E0", 300, { programId: "E" });
    addRequest(scheduler, "F0", 1000, { programId: "F" });
    assert.deepEqual(runFor(scheduler, clock, 3), [], "D does not fit; E and F wait behind paused D");
    assert.equal(ta.pausedPrograms().length, 3);
    // The tick at 5 s resumes the smallest first: E (400 with its buffer) fits, then neither F nor D does.
    assert.deepEqual(runFor(scheduler, clock, 2), ["E0"], "E, the smallest, though D came first");
    assert.ok(ta.isPaused(scheduler.getRequest("D0")?.program ?? assert.fail("D0 waits")));
    assert.deepEqual(runFor(scheduler, clock, 6), [], "still no room for D or F");
    // A's turn ends and the program with it: the next tick has room for both, smallest first.
    const admitted = runFor(scheduler, clock, 6, ["A0"]);
    assert.deepEqual(admitted.sort(), ["D0", "F0"]);
    assert.equal(ta.counters.resumes, 3);
  });

  it("over the pool, acting programs pause smallest first; a paused program's next turn waits for a resume", () => {
    const { scheduler, clock, ta } = thunder();
    const contexts = {
      A: tokenRange(2001, 1_000_000),
      B: tokenRange(1501, 2_000_000),
      C: tokenRange(1001, 3_000_000),
    };
    addRequest(scheduler, "A0", 2000, { programId: "A", sequence: contexts.A });
    addRequest(scheduler, "B0", 1500, { programId: "B", sequence: contexts.B });
    addRequest(scheduler, "C0", 1000, { programId: "C", sequence: contexts.C });
    runFor(scheduler, clock, 2);
    assert.equal(scheduler.numRunning, 0, "all three turns ended in tool calls (acting)");
    // A comes back with 2000 more tokens of tool output: 4100 + 1601 + 1101 > 6400 at the tick at 5 s.
    addRequest(scheduler, "A1", 4000, {
      programId: "A",
      ...LONG,
      sequence: [...contexts.A, ...tokenRange(2000, 4_000_000)],
    });
    runFor(scheduler, clock, 4);
    // B and C come back at 6 s. Their arrival is the policy's first call since 5 s, so the tick at 5 s runs
    // now (ticks run at the scheduler's first call after their time: nothing between could see them).
    addRequest(scheduler, "C1", 1100, {
      programId: "C",
      sequence: [...contexts.C, ...tokenRange(100, 5_000_000)],
    });
    assert.equal(ta.counters.pauses, 1, "pausing C (the smallest acting program) was enough");
    assert.equal(ta.pausedPrograms()[0]?.id, "C");
    addRequest(scheduler, "B1", 1600, {
      programId: "B",
      sequence: [...contexts.B, ...tokenRange(100, 6_000_000)],
    });
    const beforeTick = runFor(scheduler, clock, 3);
    assert.deepEqual(beforeTick, ["B1"], "B, never paused, goes at once; C waits");
    // At 10 s B has acted for 2 s: it counts a quarter on the resume side, which leaves room for C.
    const atTick = runFor(scheduler, clock, 2);
    assert.deepEqual(atTick, ["C1"], "the tick at 10 s resumes C");
  });

  it("a turn held longer than the forced-resume time goes whatever the memory", () => {
    const { scheduler, clock, ta } = thunder({ ...THUNDERAGENT_PAPER, resumeTimeoutS: 12 });
    addRequest(scheduler, "A0", 6000, { programId: "A", ...LONG });
    runFor(scheduler, clock, 1);
    addRequest(scheduler, "B0", 200, { programId: "B" });
    assert.deepEqual(runFor(scheduler, clock, 11), [], "no room beside A");
    assert.deepEqual(runFor(scheduler, clock, 2), ["B0"], "12 s later B is resumed anyway");
    assert.equal(ta.counters.forcedResumes, 1);
  });

  it("with Dynamo's defaults, past 0.95 of the pool every reasoning program is marked to pause", () => {
    const { scheduler, clock, ta } = thunder(THUNDERAGENT_DYNAMO);
    addRequest(scheduler, "A0", 3000, { programId: "A", ...LONG });
    addRequest(scheduler, "B0", 2000, { programId: "B", ...LONG });
    addRequest(scheduler, "C0", 1000, { programId: "C", ...LONG });
    runFor(scheduler, clock, 6);
    // 6300 of 6400 tokens (admission checks the whole pool). The tick at 5 s, run at D's arrival, finds more
    // than 0.95 of the pool, no acting program to pause, and marks all three (paper: only enough for Delta C).
    addRequest(scheduler, "D0", 100, { programId: "D" });
    assert.equal(ta.counters.marks, 3);
    assert.deepEqual(runFor(scheduler, clock, 1), [], "D waits: no room beside A, B and C");
    // A's turn ends: marked, A is paused at once, and the next tick resumes D in its place.
    assert.deepEqual(runFor(scheduler, clock, 5, ["A0"]), ["D0"]);
  });
});
