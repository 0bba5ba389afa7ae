import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { CONCUR_DEFAULTS } from "./admission-control/concur.js";
import { CongestionHeadroom } from "./congestion-headroom.js";

describe("CongestionHeadroom (CONCUR's control on admission's forecast)", () => {
  const interval = CONCUR_DEFAULTS.intervalS;

  it("halves when returning turns remake over 10% of their reusable prefix, from the filled share if lower", () => {
    const h = new CongestionHeadroom();
    h.observeAdmission(1.2, 0.1, false);
    h.observeTurn(1000, 200);
    h.advance(interval);
    assert.equal(h.factor, 0.5);
    // the next thrash waits until the working set is within what the decrease allowed
    h.observeTurn(1000, 500);
    h.advance(2 * interval);
    assert.equal(h.factor, 0.5, "no second decrease before the first took effect");
    h.observeAdmission(0.3, 0.1, true);
    h.observeTurn(1000, 500);
    h.advance(3 * interval);
    assert.ok(Math.abs(h.factor - 0.15) < 1e-12, "taken effect: half of the 0.3 filled");
  });

  it("holds while nothing is remade, and halves itself on a thrash before any admission check", () => {
    const h = new CongestionHeadroom();
    h.observeTurn(1000, 100);
    h.advance(interval);
    assert.equal(h.factor, 1, "10% remade is no thrash");
    h.observeTurn(1000, 101);
    h.advance(2 * interval);
    assert.equal(h.factor, 0.5);
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
