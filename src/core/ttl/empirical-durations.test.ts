import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Rng } from "../rng.js";
import { anyDouble } from "../test-support/arbitraries.js";
import fc from "../test-support/fast-check.js";
import { EmpiricalDurations } from "./empirical-durations.js";

function withSamples(samples: readonly number[], capacity = 4096): EmpiricalDurations {
  const d = new EmpiricalDurations(capacity);
  for (const s of samples) d.add(s);
  return d;
}

/** eq. 2 by definition: every candidate in {0} ∪ samples, CDF counted from scratch. */
function bruteValue(samples: readonly number[], benefitS: number, tauS: number): number {
  if (samples.length === 0) return -tauS;
  return (samples.filter((s) => s <= tauS).length / samples.length) * benefitS - tauS;
}

const durationArb = fc.oneof(
  fc.integer({ min: 0, max: 40 }).map((q) => q / 4),
  anyDouble(0, 500),
);

describe("EmpiricalDurations", () => {
  it("solves eq. 2 on the hand-computed cases", () => {
    const d = withSamples([1, 2, 3, 4]);
    // B = 10: values 0, 1.5, 3, 4.5, 6 at tau = 0, 1, 2, 3, 4.
    assert.deepEqual(
      [0, 1, 2, 3, 4].map((t) => d.cdf(t) * 10 - t),
      [0, 1.5, 3, 4.5, 6],
    );
    assert.equal(d.bestTtlS(10), 4);
    // B = 2: values 0, −0.5, −1, −1.5, −2: pinning never pays.
    assert.equal(d.bestTtlS(2), 0);

    const mostlyFast = withSamples([...new Array<number>(9).fill(0.1), 100]);
    assert.equal(mostlyFast.bestTtlS(5), 0.1);
  });

  it("breaks ties toward the shorter TTL", () => {
    // B = 8 over {1, 3, 100, 100}: tau = 1 and tau = 3 both score 1.
    assert.equal(withSamples([1, 3, 100, 100]).bestTtlS(8), 1);
    // B = 4 over {1, 2, 100, 100}: tau = 0, 1 and 2 all score 0.
    assert.equal(withSamples([1, 2, 100, 100]).bestTtlS(4), 0);
  });

  it("pins for nothing without samples or without a positive benefit", () => {
    assert.equal(new EmpiricalDurations().bestTtlS(100), 0);
    const d = withSamples([0.5, 1]);
    assert.equal(d.bestTtlS(0), 0);
    assert.equal(d.bestTtlS(-3), 0);
  });

  it("counts zero-length tool calls in cdf(0)", () => {
    const d = withSamples([0, 0, 5]);
    assert.equal(d.cdf(0), 2 / 3);
    assert.equal(d.cdf(-1), 0);
    assert.equal(d.cdf(5), 1);
  });

  it("forgets samples older than the window", () => {
    const d = withSamples([10, 20, 30, 1], 3);
    assert.equal(d.size, 3);
    assert.equal(d.cdf(10), 1 / 3);
    assert.equal(d.cdf(20), 2 / 3);

    // A tool that used to take 100 s and now takes 1 s gets a 1 s TTL once the old runs age out.
    const sped = withSamples([100, 100, 100, 100, 1, 1, 1, 1], 4);
    assert.equal(sped.bestTtlS(5), 1);
  });

  it("answers for the new distribution after an add, even for a benefit it was asked before", () => {
    const d = withSamples([100]);
    assert.equal(d.bestTtlS(5), 0);
    d.add(1);
    // {1, 100}, B = 5: tau = 1 scores 0.5·5 − 1 = 1.5.
    assert.equal(d.bestTtlS(5), 1);
  });

  it("matches brute force at scale, with thousands of samples sliding through", () => {
    const rng = new Rng(5);
    const capacity = 1000;
    const d = new EmpiricalDurations(capacity);
    const all: number[] = [];
    for (let i = 0; i < 5000; i++) {
      // Lognormal tool times, rounded so some durations repeat.
      const s = Math.round(rng.lognormal(5, 10) * 100) / 100;
      d.add(s);
      all.push(s);
      if (i % 500 !== 499) continue;
      const window = all.slice(-capacity);
      const sorted = [...window].sort((a, b) => a - b);
      for (const benefitS of [0.5, 2, 5, 20, 100, 1e4]) {
        // Best of tau = 0 and each distinct sample, evaluated at the last of its copies in sorted order.
        let best = 0;
        sorted.forEach((t, k) => {
          if (sorted[k + 1] !== t) best = Math.max(best, ((k + 1) / sorted.length) * benefitS - t);
        });
        assert.ok(
          bruteValue(window, benefitS, d.bestTtlS(benefitS)) >= best - 1e-9 * benefitS,
          `B = ${benefitS}`,
        );
      }
      for (const tau of [0, 1, 5, 30])
        assert.equal(d.cdf(tau), window.filter((s) => s <= tau).length / window.length);
    }
  });

  it("rejects durations that are not finite non-negative seconds", () => {
    const d = new EmpiricalDurations();
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => d.add(bad), RangeError);
    }
    assert.equal(d.size, 0);
    assert.throws(() => d.bestTtlS(Number.NaN), RangeError);
    assert.throws(() => new EmpiricalDurations(0), RangeError);
  });

  it("matches a sliding window of the last `capacity` samples (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.array(durationArb, { maxLength: 200, size: "max" }),
        (capacity, adds) => {
          const d = withSamples(adds, capacity);
          const window = adds.slice(-capacity);
          assert.equal(d.size, window.length);
          for (const tau of [...window, 0, 0.3, 7.1, 1000]) {
            assert.equal(
              d.cdf(tau),
              window.length === 0 ? 0 : window.filter((s) => s <= tau).length / window.length,
            );
          }
        },
      ),
    );
  });

  it("never does worse than any sample or than not pinning (property, brute force)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 64 }),
        fc.array(durationArb, { maxLength: 150, size: "max" }),
        fc.array(fc.oneof(anyDouble(-2, 30), anyDouble(-10, 1000)), { minLength: 1, maxLength: 4 }),
        (capacity, adds, benefits) => {
          const d = withSamples(adds, capacity);
          const window = adds.slice(-capacity);
          for (const benefitS of benefits) {
            const ttlS = d.bestTtlS(benefitS);
            assert.ok(ttlS === 0 || window.includes(ttlS), `tau* = ${ttlS} is not a candidate`);
            const best = bruteValue(window, benefitS, ttlS);
            const eps = 1e-9 * Math.max(1, Math.abs(benefitS));
            // Not pinning is worth cdf(0)·B, which is negative only for B < 0 with zero-length samples.
            if (benefitS >= 0) assert.ok(best >= -eps, `value ${best} < 0`);
            assert.ok(best >= bruteValue(window, benefitS, 0) - eps);
            for (const s of window) assert.ok(best >= bruteValue(window, benefitS, s) - eps);
          }
        },
      ),
    );
  });
});

describe("EmpiricalDurations.bestRemainingTtlS", () => {
  it("is eq. 2 over the samples longer than what has run, minus what has run", () => {
    const d = new EmpiricalDurations();
    for (const s of [1, 2, 3, 10, 20]) d.add(s);
    // after 3 s: 10 and 20 are left, remaining 7 and 17, each half the conditional mass.
    // B = 40: 7 -> 0.5 x 40 - 7 = 13; 17 -> 40 - 17 = 23
    assert.equal(d.bestRemainingTtlS(3, 40), 17);
    // B = 20: 7 -> 3; 17 -> 3: a tie goes to the smaller
    assert.equal(d.bestRemainingTtlS(3, 20), 7);
    // B = 10: 7 -> -2, 17 -> -7: not pinning is better
    assert.equal(d.bestRemainingTtlS(3, 10), 0);
  });

  it("past every sample, prices it as if it had just started", () => {
    const d = new EmpiricalDurations();
    for (const s of [1, 2, 3]) d.add(s);
    assert.equal(d.bestRemainingTtlS(50, 100), d.bestTtlS(100));
  });
});
