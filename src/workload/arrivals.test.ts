import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Rng } from "../core/rng.js";
import { buildWorkload, poissonArrivalsS, samplePrograms } from "./arrivals.js";
import { mean, std } from "./stats.js";
import type { TraceProgram } from "./trace.js";

const trace: TraceProgram[] = Array.from({ length: 10 }, (_, i) => ({
  id: `p${i}`,
  turns: [
    { input: 1000 + i, cached: 0, output: 100, tool: "grep", toolS: 1 },
    { input: 2000 + i, cached: 1100 + i, output: 50, tool: null, toolS: null },
  ],
}));

describe("poissonArrivalsS", () => {
  it("starts at 0 and spaces jobs by exponential gaps of mean 1/rate", () => {
    const arrivals = poissonArrivalsS(20_000, 4, new Rng(1));
    assert.equal(arrivals[0], 0);
    const gaps = arrivals.slice(1).map((t, i) => t - arrivals[i]!);
    assert.ok(gaps.every((g) => g >= 0));
    assert.ok(Math.abs(mean(gaps) - 0.25) < 0.01, `mean gap ${mean(gaps)}`);
    assert.ok(Math.abs(std(gaps) - 0.25) < 0.01, "exponential gaps: std equals mean");
    assert.throws(() => poissonArrivalsS(3, 0, new Rng(1)), /positive/);
  });
});

describe("samplePrograms", () => {
  it("draws distinct programs when the trace has enough", () => {
    const picked = samplePrograms(trace, 10, new Rng(2));
    assert.deepEqual(new Set(picked.map((p) => p.id)), new Set(trace.map((p) => p.id)));
    assert.notDeepEqual(
      picked.map((p) => p.id),
      trace.map((p) => p.id),
      "shuffled",
    );
  });

  it("repeats programs only when more are asked for, with distinct ids", () => {
    const picked = samplePrograms(trace, 35, new Rng(3));
    assert.equal(new Set(picked.map((p) => p.id)).size, 35);
    assert.ok(picked.some((p) => p.id.includes("#")));
    assert.throws(() => samplePrograms([], 1, new Rng(3)), /empty trace/);
  });
});

describe("buildWorkload", () => {
  it("is deterministic for a seed and applies the transforms", () => {
    const spec = { trace, programs: 6, jps: 2, seed: 9 };
    const a = buildWorkload(spec);
    assert.deepEqual(buildWorkload(spec), a);
    assert.notDeepEqual(buildWorkload({ ...spec, seed: 10 }).programs, a.programs);
    assert.equal(a.programs.length, 6);
    assert.equal(a.arrivalsS.length, 6);

    const b = buildWorkload({ ...spec, tokenScale: 0.5, toolTimeScale: 10, turnRepeat: 2 });
    assert.deepEqual(
      b.programs.map((p) => p.id),
      a.programs.map((p) => p.id),
      "the transforms do not change which programs are sampled",
    );
    assert.deepEqual(b.arrivalsS, a.arrivalsS);
    const first = b.programs[0]!;
    assert.equal(first.turns.length, 4);
    assert.equal(first.turns[0]!.toolS, 10);
    // Halved by the repeat, halved again by the token scale.
    assert.ok(Math.abs(first.turns[0]!.input - a.programs[0]!.turns[0]!.input / 4) <= 1);
  });

  it("starts a batch's programs together, the same programs the seed samples at any rate", () => {
    const spread = buildWorkload({ trace, programs: 6, jps: 2, seed: 9 });
    const batch = buildWorkload({ trace, programs: 6, jps: 0, seed: 9, batch: true });
    assert.deepEqual(batch.arrivalsS, [0, 0, 0, 0, 0, 0]);
    assert.deepEqual(batch.programs, spread.programs);
  });

  it("generates programs of a workload kind", () => {
    const w = buildWorkload({ kind: "bfcl", programs: 30, jps: 0.5, seed: 4 });
    assert.equal(w.programs.length, 30);
    assert.ok(w.programs.every((p) => p.id.startsWith("bfcl-")));
    assert.ok(w.arrivalsS.every((t, i) => i === 0 || t >= w.arrivalsS[i - 1]!));
  });

  it("needs exactly one of a trace and a kind", () => {
    assert.throws(() => buildWorkload({ programs: 1, jps: 1, seed: 1 }), /either a trace or/);
    assert.throws(() => buildWorkload({ trace, kind: "bfcl", programs: 1, jps: 1, seed: 1 }), /not both/);
  });
});
