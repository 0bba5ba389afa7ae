import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Rng } from "../rng.js";
import fc from "../test-support/fast-check.js";
import { MemoryfulnessEstimator } from "./memoryfulness.js";

function etaOf(programLengths: readonly number[]): number {
  const m = new MemoryfulnessEstimator();
  for (const n of programLengths) m.observeFinishedProgram(n);
  return m.eta();
}

/** −Pearson(k, N − k) over the explicit pairs, or undefined where the correlation is undefined. */
function bruteEta(programLengths: readonly number[]): number | undefined {
  const xs: number[] = [];
  const ys: number[] = [];
  for (const n of programLengths) {
    for (let k = 0; k < n; k++) {
      xs.push(k);
      ys.push(n - k);
    }
  }
  const mean = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
  const mx = mean(xs);
  const my = mean(ys);
  let sxx = 0;
  let syy = 0;
  let sxy = 0;
  xs.forEach((x, i) => {
    const y = ys[i]!;
    sxx += (x - mx) ** 2;
    syy += (y - my) ** 2;
    sxy += (x - mx) * (y - my);
  });
  return sxx > 0 && syy > 0 ? -sxy / Math.sqrt(sxx * syy) : undefined;
}

describe("MemoryfulnessEstimator", () => {
  it("assumes a fully memoryful workload before two programs have finished", () => {
    assert.equal(etaOf([]), 1);
    assert.equal(etaOf([40]), 1);
    // Only single-request programs: k is always 0, so the correlation is undefined.
    assert.equal(etaOf([1, 1, 1]), 1);
  });

  it("is 1 when every program has the same length", () => {
    const eta = etaOf(new Array<number>(100_000).fill(37));
    assert.ok(Math.abs(eta - 1) < 1e-9, `eta = ${eta}`);
  });

  it("is about 0 for geometric program lengths (memoryless)", () => {
    const rng = new Rng(7);
    const stopP = 0.1;
    const lengths = Array.from(
      { length: 20_000 },
      () => 1 + Math.floor(Math.log(1 - rng.next()) / Math.log(1 - stopP)),
    );
    const eta = etaOf(lengths);
    assert.ok(Math.abs(eta) < 0.05, `eta = ${eta}`);
  });

  it("goes negative when long-served programs tend to have more left (heavy tail)", () => {
    // Most programs are short, a few are very long: having served many requests means being in a long one.
    const rng = new Rng(11);
    const lengths = Array.from({ length: 20_000 }, () =>
      Math.min(5000, Math.ceil((1 - rng.next()) ** (-1 / 1.2))),
    );
    const eta = etaOf(lengths);
    assert.ok(eta < 0, `eta = ${eta}`);
  });

  it("is 1 again after programs of a fixed length, then less once lengths vary", () => {
    const m = new MemoryfulnessEstimator();
    for (let i = 0; i < 50; i++) m.observeFinishedProgram(10);
    assert.ok(Math.abs(m.eta() - 1) < 1e-9);
    for (let i = 0; i < 50; i++) m.observeFinishedProgram(1 + (i % 30));
    assert.ok(m.eta() < 1 - 1e-3);
  });

  it("equals −Corr(k, N − k) over the explicit pairs (property)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 60 }), { maxLength: 40, size: "max" }), (lengths) => {
        const expected = bruteEta(lengths);
        const actual = etaOf(lengths);
        const programs = lengths.filter((n) => n > 0).length;
        if (expected === undefined || programs < 2) assert.equal(actual, 1);
        else assert.ok(Math.abs(actual - expected) < 1e-9, `${actual} vs ${expected}`);
      }),
    );
  });

  it("rejects request counts that are not non-negative integers", () => {
    const m = new MemoryfulnessEstimator();
    for (const bad of [-1, 2.5, Number.NaN]) assert.throws(() => m.observeFinishedProgram(bad), RangeError);
    assert.equal(m.programsObserved, 0);
  });
});
