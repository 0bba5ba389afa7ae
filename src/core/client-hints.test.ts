import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { applyRetentionHints, EXPECTED_TOOL_SLACK, NO_HINTS } from "./client-hints.js";
import type { SchedulingPolicy } from "./policy.js";
import { addRequest, step } from "./test-support/drive.js";
import { testScheduler } from "./test-support/harness.js";

const pin = (ttlS: number) => ({ kind: "pin", ttlS }) as const;

describe("retention hints", () => {
  test("a client TTL bounds the policy's pin; it never creates one", () => {
    assert.deepEqual(applyRetentionHints(pin(10), { ttlS: 3, expectedToolS: null }), pin(3));
    assert.deepEqual(applyRetentionHints(pin(2), { ttlS: 30, expectedToolS: null }), pin(2));
    assert.deepEqual(applyRetentionHints(pin(10), { ttlS: 0, expectedToolS: null }), { kind: "free" });
    assert.deepEqual(applyRetentionHints({ kind: "free" }, { ttlS: 300, expectedToolS: 1 }), {
      kind: "free",
    });
    assert.deepEqual(
      applyRetentionHints(pin(Number.POSITIVE_INFINITY), { ttlS: 60, expectedToolS: null }),
      pin(60),
    );
  });

  test("an expected tool duration drops a pin that would expire first and trims one far longer", () => {
    assert.deepEqual(applyRetentionHints(pin(2), { ttlS: null, expectedToolS: 20 }), { kind: "free" });
    assert.deepEqual(
      applyRetentionHints(pin(100), { ttlS: null, expectedToolS: 8 }),
      pin(8 * (1 + EXPECTED_TOOL_SLACK)),
    );
    assert.deepEqual(applyRetentionHints(pin(9), { ttlS: null, expectedToolS: 8 }), pin(9));
    assert.deepEqual(applyRetentionHints(pin(9), NO_HINTS), pin(9));
  });

  test("through the scheduler: the pin gets the bounded TTL and is still sacrificed under pressure", () => {
    const pinLong: SchedulingPolicy = {
      name: "pin-60",
      description: "test",
      needsOffload: false,
      toolParser: "paper",
      dynamicPriorities: false,
      prioritize: (request, program) => {
        request.priority[0] = program.firstArrivalS;
      },
      retain: () => pin(60),
      pinVictimRank: (program) => program.firstArrivalS,
    };
    const { scheduler, clock } = testScheduler(pinLong, { numBlocks: 8 });
    scheduler.addRequest({
      requestId: "a0",
      programId: "a",
      promptTokens: 64,
      maxOutputTokens: 1,
      isLastStep: false,
      content: { blockHash: (i) => 0x1000 + i },
      retentionHints: { ttlS: 5, expectedToolS: null },
    });
    step(scheduler, clock);
    const expires = scheduler.nextPinExpiryS();
    assert.ok(expires !== null && Math.abs(expires - clock.nowS() - 5) < 1e-9, `pin expires at ${expires}`);
    // another program needing the whole pool takes the hinted pin's blocks: a hint is never a hard lock
    addRequest(scheduler, "b0", 127, { programId: "b", isLastStep: true });
    const { released } = step(scheduler, clock);
    assert.deepEqual(
      released.map((r) => [r.requestId, r.reason]),
      [["a0", "victim"]],
    );
  });
});
