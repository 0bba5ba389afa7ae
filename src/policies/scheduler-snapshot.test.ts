import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { addRequest, runUntilIdle, step } from "../core/test-support/drive.js";
import { testScheduler } from "../core/test-support/harness.js";
import { createVllmPolicy } from "./vllm.js";

describe("snapshot: programs that left the scheduler", () => {
  it("records a program as it ends, with every turn it ran, even between two snapshots", () => {
    const { scheduler, clock } = testScheduler(createVllmPolicy({ offload: false }), { numBlocks: 64 });
    const before = scheduler.snapshot();
    assert.deepEqual(before.departed, []);
    for (let turn = 0; turn < 10; turn++) {
      addRequest(scheduler, `a${turn}`, 32, { programId: "A", isLastStep: turn === 9 });
      runUntilIdle(scheduler, clock);
      clock.advanceTo(clock.nowS() + 1);
    }
    const after = scheduler.snapshot();
    assert.deepEqual(after.programs, [], "no live program is left");
    assert.equal(after.departed.length, 1);
    const a = after.departed[0]!;
    assert.equal(a.id, "A");
    assert.equal(a.turns, 10, "the last turn counts");
    assert.equal(a.ended, true);
    assert.ok(a.lifeS > 9 && a.lifeS < 10, `lived from its first arrival to its last step, ${a.lifeS} s`);
    assert.ok(Math.abs(a.leftAgoS - 1) < 1e-9, "left a second before the snapshot");
  });

  it("calls a waiting turn waiting, whatever became of its KV, and records programs forgotten when idle", () => {
    const { scheduler, clock } = testScheduler(createVllmPolicy({ offload: false }), {
      numBlocks: 64,
      maxNumSeqs: 1,
    });
    addRequest(scheduler, "b0", 32, { programId: "B", maxOutputTokens: 3 });
    addRequest(scheduler, "c0", 32, { programId: "C" });
    step(scheduler, clock);
    assert.deepEqual(
      scheduler.snapshot().programs.map((p) => [p.id, p.state]),
      [
        ["B", "running"],
        ["C", "waiting"],
      ],
    );
    runUntilIdle(scheduler, clock);
    clock.advanceTo(clock.nowS() + 7200);
    // the scheduler sweeps idle programs every 1024 steps
    for (let i = 0; i < 1024; i++) step(scheduler, clock, 0.001);
    const departed = scheduler.snapshot().departed;
    assert.deepEqual(
      departed.map((p) => [p.id, p.ended, p.turns]).sort(),
      [
        ["B", false, 1],
        ["C", false, 1],
      ],
      "idle an hour: forgotten, not ended",
    );
  });

  it("tells a program whose last turn called a tool (in a tool call) from one whose last turn called none (idle)", () => {
    const { scheduler, clock } = testScheduler(createVllmPolicy({ offload: false }), { numBlocks: 64 });
    addRequest(scheduler, "t0", 32, { programId: "T", toolHint: "pytest" });
    addRequest(scheduler, "n0", 32, { programId: "N", toolHint: null });
    runUntilIdle(scheduler, clock);
    assert.deepEqual(
      scheduler.snapshot().programs.map((p) => [p.id, p.state]),
      [
        ["T", "tool"],
        ["N", "idle"],
      ],
    );
    // its next turn called one: back in a tool call
    addRequest(scheduler, "n1", 32, { programId: "N", toolHint: "grep" });
    runUntilIdle(scheduler, clock);
    assert.deepEqual(
      scheduler
        .snapshot()
        .programs.map((p) => [p.id, p.state])
        .sort(),
      [
        ["N", "tool"],
        ["T", "tool"],
      ],
    );
  });
});
