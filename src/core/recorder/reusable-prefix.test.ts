import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { SchedulingPolicy } from "../policy.js";
import { FREE } from "../retention.js";
import { addRequest, loggedScheduler, runUntilIdle, tokenRange } from "../test-support/drive.js";

/** First come, first served; every finished turn's KV is freed (kept only as the pool's cached blocks). */
const fcfs: SchedulingPolicy = {
  name: "fcfs-free",
  description: "test",
  needsOffload: false,
  toolParser: "paper",
  dynamicPriorities: false,
  prioritize: (request) => {
    request.priority[0] = request.sequenceNumber;
  },
  retain: () => FREE,
  pinVictimRank: (program) => program.firstArrivalS,
};

describe("the arrival's reusable prefix", () => {
  it("is the prompt's leading blocks equal to the previous finished turn's prompt + output", () => {
    const { scheduler, clock, log } = loggedScheduler(fcfs, { numBlocks: 256 });
    // turn 0: a 64-token prompt and 32 output tokens (6 blocks of 16)
    const turn0 = tokenRange(96, 1000);
    const first = addRequest(scheduler, "t0", 64, { programId: "p", maxOutputTokens: 32, sequence: turn0 });
    runUntilIdle(scheduler, clock);
    // A side request of the program (a title) finishes between the turns: no turn, nothing to measure against.
    addRequest(scheduler, "title", 40, { programId: "p", maxOutputTokens: 8 });
    assert.ok(scheduler.markSideRequest("p", "title"));
    runUntilIdle(scheduler, clock);
    // turn 1 edits its history: token 40 (in block 2) changed, then 16 new tokens; 2 blocks still match
    const prompt1 = [...turn0.slice(0, 40), 7, ...turn0.slice(41), ...tokenRange(16, 5000)];
    const turn1 = [...prompt1, ...tokenRange(16, 6000)];
    addRequest(scheduler, "t1", prompt1.length, { programId: "p", maxOutputTokens: 16, sequence: turn1 });
    runUntilIdle(scheduler, clock);
    // turn 2 appends to turn 1's prompt + output (8 blocks) a 20-token tool result
    const prompt2 = [...turn1, ...tokenRange(20, 7000)];
    const last = addRequest(scheduler, "t2", prompt2.length, {
      programId: "p",
      maxOutputTokens: 4,
      isLastStep: true,
      sequence: [...prompt2, ...tokenRange(4, 8000)],
    });
    // A request without a program has no previous turn.
    addRequest(scheduler, "anon", 48, { programId: null });
    runUntilIdle(scheduler, clock);

    const reusable = log
      .ofKind("arrival")
      .map((event) => [event.requestId, event.reusableTokens ?? "absent"]);
    assert.deepEqual(reusable, [
      ["t0", "absent"],
      // measured against turn 0, like turn 1; the converter leaves side requests out
      ["title", 0],
      ["t1", 32],
      ["t2", 128],
      ["anon", "absent"],
    ]);
    // the hashes kept for the next turn go with the program's end
    assert.equal(first.program, last.program);
    assert.equal(last.program.lastTurnBlockHashes, null);
  });
});
