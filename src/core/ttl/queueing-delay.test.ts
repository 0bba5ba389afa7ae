import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { anyDouble } from "../test-support/arbitraries.js";
import fc from "../test-support/fast-check.js";
import { QueueingDelayWindow } from "./queueing-delay.js";

describe("QueueingDelayWindow", () => {
  it("starts at 0 like the paper's T", () => {
    assert.equal(new QueueingDelayWindow().meanS(), 0);
  });

  it("averages what it has seen, then only the last windowSize delays", () => {
    const w = new QueueingDelayWindow(3);
    w.observe(1);
    w.observe(2);
    w.observe(3);
    assert.equal(w.meanS(), 2);
    w.observe(10);
    assert.equal(w.meanS(), 5);
    assert.equal(w.size, 3);
  });

  it("matches the mean of the last windowSize observations (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 16 }),
        fc.array(anyDouble(0, 1e4), { maxLength: 300, size: "max" }),
        (windowSize, delays) => {
          const w = new QueueingDelayWindow(windowSize);
          for (const d of delays) w.observe(d);
          const recent = delays.slice(-windowSize);
          const expected = recent.length === 0 ? 0 : recent.reduce((a, b) => a + b, 0) / recent.length;
          assert.ok(
            Math.abs(w.meanS() - expected) <= 1e-9 * Math.max(1, expected),
            `${w.meanS()} vs ${expected}`,
          );
        },
      ),
    );
  });

  it("does not drift after a huge delay has left the window", () => {
    const w = new QueueingDelayWindow(4);
    w.observe(1e12);
    for (let i = 0; i < 1000; i++) w.observe(0.001);
    // Without periodic re-summing, the 1e12 would leave an error around its ulp (1e-4).
    assert.ok(Math.abs(w.meanS() - 0.001) < 1e-12, `mean ${w.meanS()}`);
  });

  it("rejects delays that are not finite non-negative seconds", () => {
    const w = new QueueingDelayWindow();
    for (const bad of [-0.5, Number.NaN, Number.POSITIVE_INFINITY])
      assert.throws(() => w.observe(bad), RangeError);
    assert.equal(w.meanS(), 0);
    assert.throws(() => new QueueingDelayWindow(0), RangeError);
  });
});
