import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Rng } from "../core/rng.js";
import { matchMeanStd } from "./moment-match.js";
import { mean, std } from "./stats.js";

describe("matchMeanStd", () => {
  it("gives a lognormal sample the target mean and std, keeping its order", () => {
    const rng = new Rng(5);
    const sample = Array.from({ length: 3000 }, () => rng.lognormal(1, 4));
    const matched = matchMeanStd(sample, 0.925, 3.55);
    assert.ok(Math.abs(mean(matched) - 0.925) < 1e-9);
    assert.ok(Math.abs(std(matched) - 3.55) < 1e-6);
    const order = (xs: number[]) => xs.map((_, i) => i).sort((a, b) => xs[a]! - xs[b]!);
    assert.deepEqual(order(matched), order(sample));
  });

  it("does not distort a sample too small to reach the spread beyond a bounded power", () => {
    const matched = matchMeanStd([1, 2, 3], 2, 100);
    assert.ok(Math.abs(mean(matched) - 2) < 1e-9);
    assert.ok(std(matched) < 3, "three values cannot have a std 50x their mean");
    assert.deepEqual(matchMeanStd([4], 2, 1), [2]);
  });
});
