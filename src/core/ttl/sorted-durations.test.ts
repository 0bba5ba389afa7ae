import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { anyDouble } from "../test-support/arbitraries.js";
import fc from "../test-support/fast-check.js";
import { SortedDurations } from "./sorted-durations.js";

/** Eq. 2's value of each candidate in {0} ∪ samples, straight from the definition over a sorted copy. */
function valueAt(sorted: readonly number[], benefitS: number, tauS: number): number {
  return (sorted.filter((s) => s <= tauS).length / sorted.length) * benefitS - tauS;
}

function bruteBestValue(sorted: readonly number[], benefitS: number): number {
  if (sorted.length === 0) return 0;
  let best = valueAt(sorted, benefitS, 0);
  // One pass: value at the last copy of each distinct sample.
  for (let i = 0; i < sorted.length; i++) {
    const tau = sorted[i]!;
    if (sorted[i + 1] === tau) continue;
    best = Math.max(best, ((i + 1) / sorted.length) * benefitS - tau);
  }
  return best;
}

const durationArb = fc.oneof(
  fc.integer({ min: 0, max: 20 }).map((q) => q / 2),
  anyDouble(0, 100),
);

describe("SortedDurations", () => {
  it("keeps the full rank of a duration repeated across many blocks", () => {
    const s = new SortedDurations(4);
    for (let i = 0; i < 30; i++) s.insert(1);
    for (let i = 0; i < 10; i++) s.insert(2);
    assert.equal(s.countAtMost(1), 30);
    // B = 3: tau = 1 scores 0.75·3 − 1 = 1.25, tau = 2 scores 3 − 2 = 1.
    assert.equal(s.bestTtlS(3), 1);
    // B = 10: tau = 1 scores 6.5, tau = 2 scores 8.
    assert.equal(s.bestTtlS(10), 2);
  });

  const rebalances = [
    { emptied: "second", neighbourFull: true },
    { emptied: "first", neighbourFull: true },
    { emptied: "second", neighbourFull: false },
    { emptied: "first", neighbourFull: false },
  ] as const;
  for (const { emptied, neighbourFull } of rebalances) {
    const what = neighbourFull ? "merged and split again" : "merged";
    it(`stays exact after the ${emptied} block runs nearly empty and is ${what} with its neighbour`, () => {
      const s = new SortedDurations(8);
      const model: number[] = [];
      const insert = (x: number) => {
        s.insert(x);
        model.push(x);
      };
      // 16 samples split into blocks [1..8] and [9..16]. For a split, 7 more, bunched at k.0x, fill the
      // kept block to 15 so that it cannot absorb the other.
      for (let x = 1; x <= 16; x++) insert(x);
      const bunchAt = emptied === "second" ? 5 : 13;
      if (neighbourFull) for (let i = 1; i <= 7; i++) insert(bunchAt + i / 100);
      const benefits = Array.from({ length: 400 }, (_, i) => 0.5 * (i + 1));
      for (const b of benefits) s.bestTtlS(b);
      // Emptying the other block down to one sample forces the rebalance, which moves samples across
      // the boundary, so both blocks' best candidates change.
      const first = emptied === "second" ? 9 : 1;
      for (let x = first; x < first + 7; x++) {
        assert.equal(s.remove(x), true);
        model.splice(model.indexOf(x), 1);
      }
      model.sort((a, b) => a - b);
      for (const b of benefits) {
        const got = valueAt(model, b, s.bestTtlS(b));
        assert.ok(Math.abs(got - bruteBestValue(model, b)) < 1e-12, `B = ${b}`);
      }
      for (const tau of model) assert.equal(s.countAtMost(tau), model.filter((m) => m <= tau).length);
    });
  }

  it("reports whether a remove found the duration", () => {
    const s = new SortedDurations(4);
    s.insert(3);
    assert.equal(s.remove(2), false);
    assert.equal(s.remove(3), true);
    assert.equal(s.remove(3), false);
    assert.equal(s.size, 0);
    assert.equal(s.bestTtlS(10), 0);
  });

  it("agrees with a plain sorted array under any inserts and removes (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: 12 }),
        fc.array(durationArb, { maxLength: 150, size: "max" }),
        // Then a churn phase; a low insert share drains blocks, exercising merges and rebalancing.
        fc.integer({ min: 0, max: 100 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 99 }), durationArb, fc.nat()), {
          maxLength: 200,
          size: "max",
        }),
        fc.array(anyDouble(-1, 150), { minLength: 1, maxLength: 3 }),
        (blockSize, initial, insertPercent, churn, benefits) => {
          const s = new SortedDurations(blockSize);
          const model: number[] = [];
          const check = (pick: number) => {
            assert.equal(s.size, model.length);
            const benefitS = benefits[pick % benefits.length]!;
            const ttlS = s.bestTtlS(benefitS);
            assert.ok(ttlS === 0 || model.includes(ttlS), `tau* = ${ttlS} is not a candidate`);
            if (model.length > 0) {
              const got = valueAt(model, benefitS, ttlS);
              const best = bruteBestValue(model, benefitS);
              assert.ok(got >= best - 1e-9 * Math.max(1, Math.abs(benefitS)), `value ${got} < best ${best}`);
            }
          };
          const insert = (x: number) => {
            s.insert(x);
            model.push(x);
            model.sort((a, b) => a - b);
          };
          initial.forEach((x, i) => {
            insert(x);
            check(i);
          });
          for (const [roll, x, pick] of churn) {
            if (roll < insertPercent || model.length === 0) {
              insert(x);
            } else {
              // Mostly remove a held duration, sometimes one that may be absent.
              const target = pick % 4 === 0 ? x : model[pick % model.length]!;
              const index = model.indexOf(target);
              assert.equal(s.remove(target), index >= 0);
              if (index >= 0) model.splice(index, 1);
            }
            check(pick);
          }
          for (const tau of [...model, -1, 0.25, 1000]) {
            assert.equal(s.countAtMost(tau), model.filter((m) => m <= tau).length);
          }
        },
      ),
    );
  });

  it("rejects block sizes too small to split", () => {
    assert.throws(() => new SortedDurations(3), RangeError);
  });
});
