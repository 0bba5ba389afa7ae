import assert from "node:assert/strict";
import { test } from "node:test";
import { evalQuadratic, fitQuadratic } from "./quadratic-fit.js";

test("recovers an exact quadratic at prefill-sized x", () => {
  const truth = { a: 3e-10, b: 2e-5, c: 0.004 };
  const xs = [1000, 2000, 4000, 8000, 16000, 32000];
  const fitted = fitQuadratic(
    xs,
    xs.map((x) => evalQuadratic(truth, x)),
  );
  assert.ok(Math.abs(fitted.a / truth.a - 1) < 1e-9);
  assert.ok(Math.abs(fitted.b / truth.b - 1) < 1e-9);
  assert.ok(Math.abs(fitted.c / truth.c - 1) < 1e-6);
});

test("minimises squared error through noisy points", () => {
  const xs = [0, 1, 2, 3];
  const ys = [1, 0, 1, 0];
  const best = fitQuadratic(xs, ys);
  const sse = (q: typeof best) =>
    xs.reduce((sum, x, i) => sum + (evalQuadratic(q, x) - (ys[i] ?? 0)) ** 2, 0);
  for (const nudge of [1e-3, -1e-3]) {
    assert.ok(sse(best) < sse({ ...best, a: best.a + nudge }));
    assert.ok(sse(best) < sse({ ...best, b: best.b + nudge }));
    assert.ok(sse(best) < sse({ ...best, c: best.c + nudge }));
  }
});

test("needs three distinct x values", () => {
  assert.throws(() => fitQuadratic([1, 1, 2], [1, 2, 3]), /three distinct/);
});
