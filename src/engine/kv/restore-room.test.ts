/**
 * A returning turn whose KV is in the RAM tier while another program's request holds the system prompt they
 * share: the engine restores the saved sequence whole, the shared prompt included, so it needs room for that
 * prompt again for a moment; the scheduler admits it once there is, and the turn reuses all of its KV.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { request, run } from "../test-support/engine-helpers.js";
import { createFakeEngine } from "../test-support/fake-model-runner.js";

const PROGRAMS = 6;
const TURNS = 8;

function words(topic: string, n: number): string {
  return Array.from({ length: n }, (_, i) => `${topic}${i % 7} item ${i}`).join(" ");
}

describe("a restore behind a prefix another request holds", () => {
  test("every returning turn reuses all the KV its program left (none computed again for want of room)", async () => {
    const engine = createFakeEngine({
      policy: "cachettl",
      kvCells: 4096,
      maxSeqs: 16,
      maxNumSeqs: 4,
      stepDelayMs: 1,
      tiers: { cpuBytes: 64 << 20 },
    });
    const system = `You are a coding agent. ${words("sys", 60)}`;
    const shortfalls: string[] = [];
    let returning = 0;
    try {
      await Promise.all(
        Array.from({ length: PROGRAMS }, async (_, p) => {
          const turns: { role: "system" | "user" | "assistant"; content: string }[] = [
            { role: "system", content: system },
            { role: "user", content: `Task ${p}: ${words(`task${p}`, 8)}` },
          ];
          let previous = 0;
          for (let t = 0; t < TURNS; t++) {
            const prompt = engine.renderChat(turns);
            const { done } = await run(
              engine,
              request(`p${p}t${t}`, prompt, {
                programId: `agent-${p}`,
                isLastStep: t === TURNS - 1,
                sampling: { maxTokens: 12 },
              }),
            );
            if (t > 0) {
              returning++;
              // the previous turn's prompt is this one's prefix: its whole blocks are there to reuse
              const reusable = Math.floor(previous / 16) * 16;
              if (done.usage.cachedTokens < reusable)
                shortfalls.push(`agent-${p} turn ${t}: ${done.usage.cachedTokens} of ${reusable}`);
            }
            previous = done.usage.promptTokens;
            turns.push({ role: "assistant", content: done.text });
            turns.push({ role: "user", content: `Observation ${t}: ${words(`obs${p}t${t}`, 4)}` });
          }
        }),
      );
    } finally {
      await engine.shutdown();
    }
    assert.equal(returning, PROGRAMS * (TURNS - 1));
    assert.ok(engine.kvStats().restoredTokens > 0, "turns came back from the RAM tier");
    assert.deepEqual(shortfalls, []);
  });
});
