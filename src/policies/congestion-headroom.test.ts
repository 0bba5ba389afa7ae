import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CONCUR_DEFAULTS } from "./concur.js";
import { CongestionHeadroom } from "./congestion-headroom.js";

describe("CongestionHeadroom (CONCUR's control on admission's forecast)", () => {
  const interval = CONCUR_DEFAULTS.intervalS;

  it("halves to half the filled share when returning turns remake over 10% of their reusable prefix", () => {
    const h = new CongestionHeadroom();
    h.observeAdmission(1.2, 0.1, false);
    h.observeTurn(1000, 200);
    h.advance(interval);
    assert.ok(Math.abs(h.factor - 0.6) < 1e-12);
    // the next thrash waits until the working set is within what the decrease allowed
    h.observeTurn(1000, 500);
    h.advance(2 * interval);
    assert.ok(Math.abs(h.factor - 0.6) < 1e-12, "no second decrease before the first took effect");
    h.observeAdmission(0.5, 0.1, true);
    h.observeTurn(1000, 500);
    h.advance(3 * interval);
    assert.ok(Math.abs(h.factor - 0.25) < 1e-12, "taken effect: halves again");
  });

  it("grows one program's share while new programs wait, nothing is remade and the pool is not saturated", () => {
    const h = new CongestionHeadroom();
    h.observeUsage(0.5);
    h.observeAdmission(1, 0.05, false);
    h.observeTurn(1000, 50);
    h.advance(interval);
    assert.ok(Math.abs(h.factor - 1.05) < 1e-12);
    h.observeUsage(0.95);
    h.observeAdmission(1, 0.05, false);
    h.advance(2 * interval);
    assert.ok(Math.abs(h.factor - 1.05) < 1e-12, "a saturated pool: holds");
    h.observeUsage(0.5);
    h.observeAdmission(1, 0.05, true);
    h.advance(3 * interval);
    assert.ok(Math.abs(h.factor - 1.05) < 1e-12, "nobody held: holds");
  });

  it("never falls below one program's share", () => {
    const h = new CongestionHeadroom();
    h.observeAdmission(0.01, 0.2, false);
    h.observeTurn(100, 100);
    h.advance(interval);
    assert.equal(h.factor, 0.2);
  });
});
