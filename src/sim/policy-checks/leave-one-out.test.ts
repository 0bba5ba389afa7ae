import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "../../core/test-support/fast-check.js";
import { type CaseResult, chooseCandidate, leaveOneOut, targetRatio } from "./leave-one-out.js";

const PEERS = ["peer"];
const kase = (family: string, setting: string, sustainable: Record<string, number>): CaseResult => ({
  family,
  setting,
  sustainable,
  kvBoundJps: 1,
});

describe("leave-one-workload-out", () => {
  // "tuned" wins big on a and b and loses on c; "steady" leads a little everywhere.
  const cases = [
    kase("a", "no tier", { tuned: 1.3, steady: 1.06, peer: 1 }),
    kase("a", "tier", { tuned: 1.2, steady: 1.05, peer: 1 }),
    kase("b", "no tier", { tuned: 1.25, steady: 1.07, peer: 1 }),
    kase("c", "no tier", { tuned: 0.9, steady: 1.05, peer: 1 }),
  ];

  it("judges each family by what the other families chose, and prints its loss", () => {
    const rows = leaveOneOut(cases, ["tuned", "steady"], PEERS);
    const byFamily = Object.fromEntries(rows.map((r) => [`${r.family}/${r.setting}`, r]));
    // Without c, "tuned" looks best everywhere (worst ratio 1.2 against 1.05), so c gets it and loses.
    assert.equal(byFamily["c/no tier"]!.chosen, "tuned");
    assert.ok(Math.abs(byFamily["c/no tier"]!.ratio - 0.9) < 1e-12);
    // With c among the others, "tuned" has a worst ratio of 0.9 and "steady" is chosen.
    assert.equal(byFamily["a/no tier"]!.chosen, "steady");
    assert.equal(byFamily["a/tier"]!.chosen, "steady");
    assert.equal(byFamily["b/no tier"]!.chosen, "steady");
    assert.equal(rows.length, cases.length);
  });

  it("never lets a family's own results choose for it", () => {
    const ratio = fc.double({ min: 0.5, max: 2, noNaN: true });
    fc.assert(
      fc.property(
        fc.array(fc.tuple(ratio, ratio), { minLength: 2, maxLength: 6 }),
        ratio,
        ratio,
        (rest, x, y) => {
          const others = rest.map(([t, s], i) => kase(`f${i}`, "no tier", { tuned: t, steady: s, peer: 1 }));
          const held = (t: number, s: number) => [
            ...others,
            kase("held", "no tier", { tuned: t, steady: s, peer: 1 }),
          ];
          const chosen = (cs: CaseResult[]) =>
            leaveOneOut(cs, ["tuned", "steady"], PEERS).find((r) => r.family === "held")!.chosen;
          assert.equal(chosen(held(x, y)), chosen(held(y, x)));
          assert.equal(chosen(held(x, y)), chooseCandidate(others, ["tuned", "steady"], PEERS));
        },
      ),
    );
  });

  it("asks for a 1.05x lead only where some policy is under 0.8 of the KV-limited ceiling", () => {
    assert.equal(targetRatio(kase("a", "no tier", { p: 0.79, q: 0.95 })), 1.05);
    assert.equal(targetRatio(kase("a", "no tier", { p: 0.81, q: 0.95 })), 1);
  });
});
