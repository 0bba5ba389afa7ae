import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Rng } from "../../core/rng.js";
import { createAutellixPolicy } from "../../policies/autellix.js";
import { checkedRun, layOut, randomDrafts } from "../test-support/sim-check.js";

describe("autellix", () => {
  it("re-prioritizing only when a request starves gives the same schedule as re-prioritizing every step", () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const rng = new Rng(seed);
      const drafts = randomDrafts(rng, {
        numPrograms: 40,
        maxTurns: 5,
        maxNewTokens: 300,
        maxOutput: 40,
        spanS: 2,
      });
      const specs = layOut(drafts, 60 * 16);
      const config = { policy: "autellix", numBlocks: 60, maxNumBatchedTokens: 128, maxNumSeqs: 2 };
      // Queues a few steps wide, so programs move between levels and long waiters starve in this short run.
      const options = { firstQueueS: 0.02, queueGrowth: 2, starvationBeta: 3 };
      const timed = createAutellixPolicy(options);
      assert.ok(timed.nextPriorityChangeS);
      const everyStep = { ...createAutellixPolicy(options), nextPriorityChangeS: undefined };
      const finishes = (r: ReturnType<typeof checkedRun>) => r.result.programs.map((p) => p.finishS);
      const a = checkedRun(specs, config, timed);
      const b = checkedRun(specs, config, everyStep);
      assert.deepEqual(finishes(a), finishes(b), `seed ${seed}`);
      assert.equal(a.steps, b.steps);
    }
  });
});
