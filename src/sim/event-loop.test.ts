import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { StepLoopStalledError } from "../core/step-loop.js";
import { linearStepTimeS, testScheduler } from "../core/test-support/harness.js";
import { createPolicy } from "../policies/index.js";
import { runSimulation, type SimProgramSpec } from "./event-loop.js";

function run(specs: SimProgramSpec[], policy: string, numBlocks: number, maxNumSeqs = 16) {
  const { scheduler, clock } = testScheduler(createPolicy(policy), { numBlocks, maxNumSeqs });
  const result = runSimulation(specs, { scheduler, clock, blockSizeTokens: 16, stepTimeS: linearStepTimeS });
  return { result, scheduler };
}

describe("runSimulation", () => {
  it("runs a two-turn program: the tool time separates the turns and the second turn hits the first", () => {
    const { result, scheduler } = run(
      [
        {
          id: "a",
          arrivalS: 1,
          turns: [
            { input: 100, cached: 0, output: 10, tool: "ls", toolS: 2 },
            { input: 150, cached: 110, output: 5, tool: null, toolS: null },
          ],
        },
      ],
      "vllm",
      64,
    );
    const [program] = result.programs;
    assert.ok(program);
    const [t0, t1] = program.turns;
    assert.ok(t0 && t1);
    assert.equal(t0.arrivalS, 1);
    assert.ok(Math.abs(t1.arrivalS - ((t0.finishS ?? 0) + 2)) < 1e-9);
    assert.equal(t1.hitTokens, 96, "floor(110 / 16) blocks of the first turn's context");
    assert.equal(program.finishS, t1.finishS);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 64);
  });

  it("a turn that outgrows the pool ends with kv_capacity and the program goes on (no false stall)", () => {
    // 2 blocks = 32 tokens: the first turn (20 + 100 tokens) cannot finish; its program must continue.
    const specs: SimProgramSpec[] = [
      {
        id: "long",
        arrivalS: 0,
        turns: [
          { input: 20, cached: 0, output: 100, tool: "ls", toolS: 0.5 },
          { input: 10, cached: 0, output: 2, tool: null, toolS: null },
        ],
      },
    ];
    const { result, scheduler } = run(specs, "vllm", 2);
    const [program] = result.programs;
    assert.ok(program);
    assert.equal(program.turns.length, 2);
    assert.ok(program.finishS !== null);
    assert.equal(scheduler.stats.finished, 2);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 2);
  });

  it("aborts a waiting turn and stops the program there", () => {
    const specs: SimProgramSpec[] = [
      { id: "hog", arrivalS: 0, turns: [{ input: 500, cached: 0, output: 200, tool: null, toolS: null }] },
      {
        id: "impatient",
        arrivalS: 0.001,
        turns: [
          { input: 500, cached: 0, output: 10, tool: "ls", toolS: 1 },
          { input: 600, cached: 510, output: 10, tool: null, toolS: null },
        ],
        abortTurnAfterS: { turn: 0, afterS: 0.05 },
      },
    ];
    const { result, scheduler } = run(specs, "vllm", 64, 1);
    const impatient = result.programs[1];
    assert.ok(impatient);
    assert.equal(impatient.aborted, true);
    assert.equal(impatient.turns.length, 1);
    assert.equal(impatient.turns[0]?.aborted, true);
    assert.equal(impatient.turns[0]?.admittedS, null);
    assert.equal(impatient.finishS, null);
    assert.equal(scheduler.stats.aborted, 1);
    assert.ok(result.programs[0]?.finishS !== null);
  });

  it("StepLoopStalledError names the stuck state", () => {
    const error = new StepLoopStalledError(1.5, 3);
    assert.match(error.message, /t=1\.500 s with 3 waiting/);
  });
});
