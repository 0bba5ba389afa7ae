import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Rng } from "../core/rng.js";
import { POLICY_NAMES } from "../policies/index.js";
import { checkedRun, layOut, randomDrafts } from "./test-support/sim-check.js";

/**
 * Every policy runs the same randomized small workloads through the simulator: everything completes, no
 * stall, scheduler invariants after every step, no overdue pin after any schedule(), nothing leaked.
 */
// queueingS seeds the TTL model with a past queueing delay T, so the TTL policies pin for ln(T + ...) s.
const WORKLOADS = [
  { seed: 1, numBlocks: 64, maxNumBatchedTokens: 128, maxNumSeqs: 8, queueingS: 0 },
  { seed: 2, numBlocks: 40, maxNumBatchedTokens: 64, maxNumSeqs: 4, queueingS: 5 },
  { seed: 3, numBlocks: 128, maxNumBatchedTokens: 256, maxNumSeqs: 16, queueingS: 30 },
  { seed: 4, numBlocks: 24, maxNumBatchedTokens: 32, maxNumSeqs: 3, queueingS: 5 },
];

describe("policy conformance", () => {
  const pressure = { preemptions: 0, pinsSacrificed: 0, pinsExpired: 0, pinsReused: 0, hits: 0 };

  for (const policy of POLICY_NAMES) {
    it(`${policy}: every program of every workload completes, safely`, () => {
      for (const w of WORKLOADS) {
        const capacity = w.numBlocks * 16;
        const drafts = randomDrafts(new Rng(w.seed), {
          numPrograms: 14,
          maxTurns: 6,
          maxNewTokens: Math.floor(capacity / 6),
          maxOutput: 40,
          spanS: 2,
        });
        const specs = layOut(drafts, capacity);
        const report = checkedRun(specs, { policy, ...w, seedSalt: w.seed });
        for (const program of report.result.programs) {
          assert.ok(program.finishS !== null, `${policy} seed ${w.seed}: ${program.id} did not complete`);
          assert.equal(program.turns.length, program.numTurns);
        }
        const stats = report.scheduler.stats;
        pressure.preemptions += stats.preemptions;
        pressure.pinsSacrificed += stats.pinsSacrificed;
        pressure.pinsExpired += stats.pinsExpired;
        pressure.pinsReused += stats.pinsReused;
        pressure.hits += stats.prefixHitTokens;
      }
    });
  }

  it("the workloads put the scheduler under pressure (preemption, sacrificed, expired and reused pins)", () => {
    assert.ok(pressure.preemptions > 0, JSON.stringify(pressure));
    assert.ok(pressure.pinsSacrificed > 0, JSON.stringify(pressure));
    assert.ok(pressure.pinsExpired > 0, JSON.stringify(pressure));
    assert.ok(pressure.pinsReused > 0, JSON.stringify(pressure));
    assert.ok(pressure.hits > 0, JSON.stringify(pressure));
  });
});
