import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Program } from "../core/program.js";
import { addRequest, loggedScheduler, step } from "../core/test-support/drive.js";
import type { TraceProgram } from "../workload/trace.js";
import { CLAIRVOYANT_POLICY, createSimPolicy, traceClairvoyance } from "./clairvoyant.js";
import { simProgramId } from "./event-loop.js";

const turn = (input: number, cached: number, output: number) => ({
  input,
  cached,
  output,
  tool: "bash",
  toolS: 1,
});

const LONG: TraceProgram = { id: "long", turns: [turn(100, 0, 10), turn(300, 110, 10), turn(900, 310, 10)] };
const SHORT: TraceProgram = { id: "short", turns: [turn(100, 0, 10)] };

function programOn(index: number, trace: TraceProgram, turnsArrived: number): Program {
  const program = new Program(simProgramId(index, trace.id), 0);
  program.numArrived = turnsArrived;
  return program;
}

describe("traceClairvoyance", () => {
  const future = traceClairvoyance([LONG, SHORT]);

  it("knows the mean context and the work of a program's turns from the one it is on to its last", () => {
    assert.equal(future.meanRemainingContext(programOn(0, LONG, 1)), (110 + 310 + 910) / 3);
    assert.equal(future.remainingWork(programOn(0, LONG, 1)), 110 + 200 + 600);
    assert.equal(future.meanRemainingContext(programOn(0, LONG, 3)), 910);
    assert.equal(future.remainingWork(programOn(0, LONG, 3)), 600);
  });

  it("knows nothing of programs the simulation does not replay", () => {
    assert.equal(future.remainingWork(programOn(1, LONG, 1)), null, "index 1 is the short program");
    assert.equal(future.meanRemainingContext(new Program("anonymous:r1", 0)), null);
  });
});

describe(CLAIRVOYANT_POLICY, () => {
  it("starts the waiting turn whose program has the least work left, whatever arrived first", () => {
    const { scheduler, clock } = loggedScheduler(createSimPolicy(CLAIRVOYANT_POLICY, [LONG, SHORT]), {
      numBlocks: 64,
      maxNumSeqs: 1,
    });
    addRequest(scheduler, "busy", 16, { programId: "other", maxOutputTokens: 5 });
    step(scheduler, clock);
    addRequest(scheduler, "long-0", 100, { programId: simProgramId(0, LONG.id), maxOutputTokens: 10 });
    addRequest(scheduler, "short-0", 100, { programId: simProgramId(1, SHORT.id), maxOutputTokens: 10 });
    let admitted: string[] = [];
    while (admitted.length === 0) admitted = step(scheduler, clock).plan.admitted.map((r) => r.id);
    assert.deepEqual(admitted, ["short-0"], "program-level FCFS would have started long-0");
  });
});
