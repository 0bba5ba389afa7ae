import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { VirtualClock } from "../../core/clock.js";
import type { Scheduler } from "../../core/scheduler.js";
import { addRequest, loggedScheduler, step, tokenRange } from "../../core/test-support/drive.js";
import { CONCUR_DEFAULTS, CONCUR_REUSABLE, ConcurWindow, createConcurPolicy } from "./concur.js";

describe("ConcurWindow (AIMD on KV usage and hit rate)", () => {
  it("halves on thrash, once per decrease in effect, and grows by one while agents wait and usage is low", () => {
    const w = new ConcurWindow();
    const healthy = { usage: 0.5, hitRate: 0.9, reusableRate: null, active: 10, waiting: 0 };
    assert.equal(w.observe(healthy), "hold");
    assert.equal(w.window, Number.POSITIVE_INFINITY, "no window before the first thrash");
    assert.equal(w.hitReference, 0.9);
    assert.equal(
      w.observe({ ...healthy, usage: 0.95, hitRate: 0.85 }),
      "hold",
      "saturated, hit rate within 10%",
    );
    assert.equal(
      w.observe({ usage: 0.95, hitRate: 0.5, reusableRate: null, active: 10, waiting: 3 }),
      "decrease",
    );
    assert.equal(w.window, 5, "half the active agents");
    assert.equal(
      w.observe({ usage: 0.95, hitRate: 0.4, reusableRate: null, active: 8, waiting: 5 }),
      "hold",
      "3 agents still to pause",
    );
    assert.equal(
      w.observe({ usage: 0.95, hitRate: 0.4, reusableRate: null, active: 5, waiting: 5 }),
      "decrease",
    );
    assert.equal(w.window, 2);
    assert.equal(
      w.observe({ usage: 0.6, hitRate: 0.9, reusableRate: null, active: 2, waiting: 8 }),
      "increase",
    );
    assert.equal(
      w.observe({ usage: 0.7, hitRate: 0.9, reusableRate: null, active: 3, waiting: 7 }),
      "increase",
    );
    assert.equal(w.window, 4, "grows back one agent per interval");
    assert.equal(
      w.observe({ usage: 0.7, hitRate: 0.9, reusableRate: null, active: 2, waiting: 0 }),
      "hold",
      "nobody waits for it",
    );
    assert.equal(
      w.observe({ usage: 0.95, hitRate: null, reusableRate: null, active: 4, waiting: 3 }),
      "hold",
      "saturated",
    );
    assert.equal(
      w.observe({ usage: 0.99, hitRate: 0.1, reusableRate: null, active: 1, waiting: 3 }),
      "decrease",
    );
    assert.equal(w.window, 1, "never below one agent");
  });

  it("against the reusable share, sees a batch that thrashes from its first interval", () => {
    // agents' returning turns could find 80% of their prompts cached, and find 5%: thrash from the start
    const start = { usage: 0.97, hitRate: 0.05, reusableRate: 0.8, active: 200, waiting: 0 };
    const ownPast = new ConcurWindow();
    assert.equal(ownPast.observe(start), "hold", "no healthy interval to fall from");
    assert.equal(ownPast.observe(start), "hold");
    const reusable = new ConcurWindow(CONCUR_REUSABLE);
    assert.equal(reusable.observe(start), "decrease");
    assert.equal(reusable.window, 100);
    assert.equal(
      reusable.observe({ ...start, hitRate: 0.75, active: 100, waiting: 100 }),
      "hold",
      "within 10% of what the cache could give: no thrash, and usage is high",
    );
    assert.equal(
      reusable.observe({ ...start, usage: 0.6, hitRate: 0.75, active: 100, waiting: 100 }),
      "increase",
    );
  });
});

function runFor(scheduler: Scheduler, clock: VirtualClock, seconds: number, stops: string[] = []): string[] {
  const admitted: string[] = [];
  for (let i = 0; i < seconds; i++)
    admitted.push(...step(scheduler, clock, 1, stops).plan.admitted.map((r) => r.id));
  return admitted;
}

const LONG = { maxOutputTokens: 100_000 };

describe("concur admission", () => {
  it("admits whole agents within the window, pauses the latest admitted at a step boundary, resumes it first", () => {
    // The window is set by hand here (no additive increase): this is about what a window does.
    const policy = createConcurPolicy({ ...CONCUR_DEFAULTS, increase: 0 });
    const { scheduler, clock } = loggedScheduler(policy, { numBlocks: 400, maxNumBatchedTokens: 8192 });
    policy.concur.aimd.window = 2;
    addRequest(scheduler, "A0", 100, { programId: "A" });
    addRequest(scheduler, "B0", 100, { programId: "B", ...LONG });
    addRequest(scheduler, "C0", 100, { programId: "C", ...LONG });
    assert.deepEqual(runFor(scheduler, clock, 2), ["A0", "B0"], "C waits for the window");
    addRequest(scheduler, "A1", 120, { programId: "A", ...LONG });
    assert.deepEqual(runFor(scheduler, clock, 1), ["A1"], "an admitted agent's later turns never wait");
    // The window shrinks to one: B, admitted last, is marked (its turn runs on) and pauses when it ends.
    policy.concur.aimd.window = 1;
    runFor(scheduler, clock, 4);
    addRequest(scheduler, "D0", 100, { programId: "D" });
    assert.equal(policy.concur.numActive, 2, "B's turn still runs");
    assert.deepEqual(runFor(scheduler, clock, 1, ["B0"]), [], "B paused at its turn's end; nothing admitted");
    addRequest(scheduler, "B1", 140, { programId: "B" });
    assert.deepEqual(runFor(scheduler, clock, 3), [], "B's next turn waits: A fills the window");
    // A ends: the paused agent goes before the new ones.
    assert.deepEqual(runFor(scheduler, clock, 2, ["A1"]), ["B1"]);
    assert.deepEqual(policy.concur.counters, { pauses: 1, resumes: 1, admissions: 2 });
  });
});

describe("concur's reusable share", () => {
  it("counts, beside each interval's hit rate, the part of its prompts the agents' own earlier turns left", () => {
    const policy = createConcurPolicy(CONCUR_REUSABLE);
    const { scheduler, clock } = loggedScheduler(policy, { numBlocks: 400 });
    const conversation = tokenRange(400, 1);
    addRequest(scheduler, "A0", 96, { programId: "A", sequence: conversation.slice(0, 97) });
    runFor(scheduler, clock, 6);
    // the next turn extends the 97 tokens the first left (96 of them in whole blocks the cache kept)
    addRequest(scheduler, "A1", 160, { programId: "A", sequence: conversation.slice(0, 161) });
    runFor(scheduler, clock, 6);
    addRequest(scheduler, "B0", 50, { programId: "B" });
    runFor(scheduler, clock, 1);
    const [first, second] = policy.concur.history.map((h) => h.signal);
    assert.equal(first?.reusableRate, 0, "a first turn has nothing of its own to find");
    assert.equal(first?.hitRate, 0);
    assert.equal(second?.reusableRate, 97 / 160);
    assert.equal(second?.hitRate, 96 / 160);
  });
});
