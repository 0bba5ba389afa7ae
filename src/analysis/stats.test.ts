import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { mean, percentile, summarize } from "./stats.js";

function assertClose(actual: number, expected: number): void {
  assert.ok(Math.abs(actual - expected) < 1e-9, `${actual} is not ${expected}`);
}

// Expected values are numpy.percentile / numpy.mean results for the same inputs.
describe("percentile", () => {
  it("interpolates linearly between closest ranks like numpy", () => {
    assertClose(percentile([1, 2, 3, 4], 95), 3.85);
    assert.equal(percentile([1, 2, 3, 4], 50), 2.5);
    assertClose(percentile([10, 20, 30, 40, 50], 99), 49.6);
    assert.equal(percentile([7, 1, 3], 0), 1);
    assert.equal(percentile([7, 1, 3], 100), 7);
  });

  it("does not depend on input order and leaves the input untouched", () => {
    const xs = [4, 1, 3, 2];
    assertClose(percentile(xs, 95), 3.85);
    assert.deepEqual(xs, [4, 1, 3, 2]);
  });

  it("sorts numerically, not lexicographically", () => {
    assert.equal(percentile([100, 9, 20], 50), 20);
  });

  it("matches numpy to the last bit, not just approximately", () => {
    // np.percentile([1, 2, 3, 4], 95) == 3.8499999999999996
    assert.equal(percentile([1, 2, 3, 4], 95), 3.8499999999999996);
    // np.percentile([3.6, 5.8], 99) == 5.778 (naive a + (b - a) * t gives 5.7780000000000005)
    assert.equal(percentile([3.6, 5.8], 99), 5.778);
  });

  it("returns 0 for no samples and rejects p outside [0, 100]", () => {
    assert.equal(percentile([], 50), 0);
    assert.throws(() => percentile([1], 101), RangeError);
    assert.throws(() => percentile([1], -1), RangeError);
    assert.throws(() => percentile([1], Number.NaN), RangeError);
  });
});

describe("mean", () => {
  it("averages and is 0 when empty", () => {
    assert.equal(mean([1, 2, 3, 4]), 2.5);
    assert.equal(mean([]), 0);
  });
});

describe("summarize", () => {
  it("reports count, mean, percentiles and range", () => {
    assert.deepEqual(summarize([4, 1, 3, 2]), {
      count: 4,
      mean: 2.5,
      p50: 2.5,
      p90: 3.7,
      p95: 3.8499999999999996,
      p99: 3.9699999999999998,
      min: 1,
      max: 4,
    });
  });

  it("is all zeros for no samples", () => {
    assert.deepEqual(summarize([]), { count: 0, mean: 0, p50: 0, p90: 0, p95: 0, p99: 0, min: 0, max: 0 });
  });
});
