import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { anyDouble } from "../test-support/arbitraries.js";
import fc from "../test-support/fast-check.js";
import { evalQuadratic, fitQuadratic } from "./quadratic.js";

function close(actual: number, expected: number, rel = 1e-6, abs = 1e-12): boolean {
  return Math.abs(actual - expected) <= Math.max(abs, rel * Math.abs(expected));
}

describe("fitQuadratic", () => {
  it("recovers the coefficients of exact measurements at token-count scale", () => {
    const truth = { a: 3e-10, b: 8e-5, c: 0.015 };
    const points = [1000, 2000, 4000, 8000, 16_000, 32_000, 65_536, 131_072].map((x) => ({
      x,
      y: truth.a * x * x + truth.b * x + truth.c,
    }));
    const fit = fitQuadratic(points);
    assert.ok(close(fit.a, truth.a), `a = ${fit.a}`);
    assert.ok(close(fit.b, truth.b), `b = ${fit.b}`);
    assert.ok(close(fit.c, truth.c), `c = ${fit.c}`);
  });

  it("stays accurate when two sizes are measured close together", () => {
    const truth = (x: number) => 7e-4 * x * x - 0.3 * x + 2.5;
    const xs = [0, 1, 100_000];
    const fit = fitQuadratic(xs.map((x) => ({ x, y: truth(x) })));
    for (const x of xs) {
      const predicted = fit.a * x * x + fit.b * x + fit.c;
      assert.ok(Math.abs(predicted - truth(x)) < 1e-7, `x = ${x}: ${predicted} vs ${truth(x)}`);
    }
  });

  it("is a least-squares fit when the points do not lie on one parabola", () => {
    // Symmetric, so b = 0; x = 0 is measured as 0 and 2, so c = 1; x = ±1 gives a + c = 1.
    const fit = fitQuadratic([
      { x: -1, y: 1 },
      { x: 0, y: 0 },
      { x: 0, y: 2 },
      { x: 1, y: 1 },
    ]);
    assert.ok(
      close(fit.a, 0, 1e-9, 1e-12) && close(fit.b, 0, 1e-9, 1e-12) && close(fit.c, 1),
      JSON.stringify(fit),
    );
  });

  it("fits a line through two distinct sizes and a constant through one", () => {
    const line = fitQuadratic([
      { x: 1000, y: 1 },
      { x: 3000, y: 2 },
    ]);
    assert.equal(line.a, 0);
    assert.ok(close(line.b, 0.0005) && close(line.c, 0.5), JSON.stringify(line));
    assert.deepEqual(fitQuadratic([{ x: 500, y: 3 }]), { a: 0, b: 0, c: 3 });
  });

  it("recovers any quadratic from three or more exact points (property)", () => {
    fc.assert(
      fc.property(
        anyDouble(-1e-3, 1e-3),
        anyDouble(-1, 1),
        anyDouble(-10, 10),
        fc.uniqueArray(fc.integer({ min: 0, max: 100_000 }), { minLength: 3, maxLength: 12 }),
        (a, b, c, xs) => {
          const fit = fitQuadratic(xs.map((x) => ({ x, y: a * x * x + b * x + c })));
          // Compare predictions rather than coefficients: a near-zero c is ill-determined in relative terms.
          for (const x of xs) {
            const y = a * x * x + b * x + c;
            const predicted = fit.a * x * x + fit.b * x + fit.c;
            assert.ok(close(predicted, y, 1e-6, 1e-6), `x = ${x}: ${predicted} vs ${y}`);
          }
        },
      ),
    );
  });

  it("rejects no points or non-finite points", () => {
    assert.throws(() => fitQuadratic([]), RangeError);
    assert.throws(() => fitQuadratic([{ x: 1, y: Number.NaN }]), RangeError);
  });

  it("minimises squared error through noisy points", () => {
    const xs = [0, 1, 2, 3];
    const ys = [1, 0, 1, 0];
    const best = fitQuadratic(xs.map((x, i) => ({ x, y: ys[i] as number })));
    const sse = (q: typeof best) =>
      xs.reduce((sum, x, i) => sum + (evalQuadratic(q, x) - (ys[i] ?? 0)) ** 2, 0);
    for (const nudge of [1e-3, -1e-3]) {
      assert.ok(sse(best) < sse({ ...best, a: best.a + nudge }));
      assert.ok(sse(best) < sse({ ...best, b: best.b + nudge }));
      assert.ok(sse(best) < sse({ ...best, c: best.c + nudge }));
    }
  });
});
