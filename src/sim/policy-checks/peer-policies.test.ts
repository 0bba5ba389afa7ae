import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createConcurPolicy } from "../../policies/admission-control/concur.js";
import { createMoriPolicy } from "../../policies/admission-control/mori.js";
import { checkedRun, layOut, type ProgramDraft } from "../test-support/sim-check.js";

/** An agent whose context grows 160 tokens a turn (40 new, 120 of output), with 0.2 s tool calls. */
function agent(arrivalS: number, turns: number): ProgramDraft {
  return {
    arrivalS,
    turns: Array.from({ length: turns }, () => ({ newTokens: 40, output: 120, tool: "pytest", toolS: 0.2 })),
  };
}

describe("concur in the simulator", () => {
  it("the admitted-agent window shrinks under thrash and grows back", () => {
    // Two agents warm the cache (the hit rate's reference), then twelve arrive at once into a pool of 4096
    // tokens that holds about two of them at their final contexts: their turns evict each other's contexts.
    const drafts = [
      agent(0, 12),
      agent(0.5, 12),
      ...Array.from({ length: 12 }, (_, i) => agent(20 + i * 0.2, 30)),
    ];
    const policy = createConcurPolicy();
    checkedRun(
      layOut(drafts, 4096),
      { policy: "concur", numBlocks: 256, maxNumBatchedTokens: 256, maxNumSeqs: 16 },
      policy,
    );
    const history = policy.concur.history;
    const firstDecrease = history.findIndex((h) => h.action === "decrease");
    assert.ok(firstDecrease >= 0, "thrash was detected");
    const before = history[firstDecrease]?.signal;
    assert.ok(before && before.usage >= 0.9, "usage reached saturation");
    assert.equal(
      history[firstDecrease]?.window,
      Math.floor(before.active / 2),
      "the window halves to the active agents",
    );
    const after = history.slice(firstDecrease);
    const smallest = Math.min(...after.map((h) => h.window));
    assert.ok(smallest < 12, `the window shrank below the twelve agents (to ${smallest})`);
    const grewAt = after.findIndex((h) => h.action === "increase" && h.window > smallest);
    assert.ok(grewAt > 0, "the window grew back while agents waited and usage stayed under 90%");
    assert.ok(
      after.some((h) => h.signal.waiting > 0),
      "agents waited for the window",
    );
    assert.ok(
      policy.concur.counters.pauses > 0 && policy.concur.counters.resumes > 0,
      "agents paused and resumed",
    );
  });
});

describe("mori in the simulator", () => {
  it("keeps the busiest in GPU memory, the next in the RAM tier, holds the rest, and finishes every agent", () => {
    // Ten agents whose contexts reach 4800 tokens, into a pool of 4096 tokens and a RAM tier of 8192:
    // the two tiers hold about four of them. Half call 0.2 s tools, half 20 s ones.
    const drafts: ProgramDraft[] = Array.from({ length: 10 }, (_, i) => ({
      arrivalS: i * 0.5,
      turns: Array.from({ length: 30 }, () => ({
        newTokens: 40,
        output: 120,
        tool: i % 2 === 0 ? "ls" : "pytest",
        toolS: i % 2 === 0 ? 0.2 : 20,
      })),
    }));
    const policy = createMoriPolicy();
    const report = checkedRun(
      layOut(drafts, 4096),
      { policy: "mori", numBlocks: 256, maxNumBatchedTokens: 256, maxNumSeqs: 16, cpuBlocks: 512 },
      policy,
    );
    assert.equal(report.result.programs.filter((p) => p.finishS !== null).length, 10);
    const c = policy.mori.counters;
    assert.ok(c.gpuPins > 0, "busy programs kept their KV in GPU memory");
    assert.ok(c.cpuPlacements > 0, "others went to the RAM tier");
    assert.ok(c.demotions > 0, "the idlest were demoted when both tiers were full");
    assert.ok(c.promotions > 10, "each promoted as it came, demoted ones again");
    assert.ok(report.scheduler.stats.reloadTokens > 0, "KV came back from the RAM tier");
  });
});
