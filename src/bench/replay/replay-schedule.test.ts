import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { mean } from "../../analysis/stats.js";
import { replayWorkload } from "./replay-schedule.js";

describe("replay schedule", () => {
  test("the same spec gives the same programs and Poisson arrivals; another seed does not", () => {
    const spec = { kind: "swe-bench" as const, programs: 50, jps: 2, seed: 11, tokenScale: 0.1 };
    const a = replayWorkload(spec);
    const b = replayWorkload(spec);
    assert.deepEqual(a, b);
    const c = replayWorkload({ ...spec, seed: 12 });
    assert.notDeepEqual(c.arrivalsS, a.arrivalsS);
    assert.equal(a.arrivalsS[0], 0);
    for (let i = 1; i < a.arrivalsS.length; i++) assert.ok(a.arrivalsS[i]! >= a.arrivalsS[i - 1]!);
  });

  test("gaps average 1 / jps", () => {
    const { arrivalsS } = replayWorkload({ kind: "bfcl", programs: 4000, jps: 4, seed: 5 });
    const gaps = arrivalsS.slice(1).map((t, i) => t - arrivalsS[i]!);
    assert.ok(Math.abs(mean(gaps) - 0.25) < 0.02, `mean gap ${mean(gaps)}`);
  });

  test("--max-context drops or cuts programs and keeps the others' arrivals", () => {
    const spec = { kind: "swe-bench" as const, programs: 30, jps: 1, seed: 2 };
    const full = replayWorkload(spec);
    const cut = replayWorkload({ ...spec, maxContext: 40_000 });
    assert.ok(cut.truncatedPrograms + cut.droppedPrograms > 0);
    assert.equal(cut.programs.length, cut.arrivalsS.length);
    for (const [i, p] of cut.programs.entries()) {
      const j = full.programs.findIndex((q) => q.id === p.id);
      assert.equal(cut.arrivalsS[i], full.arrivalsS[j]);
      for (const t of p.turns) assert.ok(t.input + t.output <= 40_000);
      assert.equal(p.turns.at(-1)!.tool, null);
    }
  });
});
