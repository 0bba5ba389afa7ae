import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Rng } from "../rng.js";
import { anyDouble } from "../test-support/arbitraries.js";
import fc from "../test-support/fast-check.js";
import { COLD_START_SAMPLES, defaultTtlS, TtlEstimator } from "./ttl-model.js";

function recordMany(est: TtlEstimator, tool: string, count: number, durationS: number): void {
  for (let i = 0; i < count; i++) est.tools.record(tool, durationS);
}

describe("defaultTtlS", () => {
  it("is ln B for B > 1 and 0 otherwise", () => {
    assert.equal(defaultTtlS(Math.E), 1);
    assert.equal(defaultTtlS(0.5), 0);
    assert.equal(defaultTtlS(1), 0);
    assert.equal(defaultTtlS(-4), 0);
    assert.ok(Math.abs(defaultTtlS(100) - Math.log(100)) < 1e-12);
  });

  it("maximises the expected net benefit under Exp(1) tool durations (property)", () => {
    fc.assert(
      fc.property(anyDouble(-5, 200), anyDouble(0, 10), (b, tau) => {
        const value = (t: number) => (1 - Math.exp(-t)) * b - t;
        assert.ok(value(defaultTtlS(b)) >= value(tau) - 1e-9);
      }),
    );
  });
});

describe("TtlEstimator", () => {
  it("uses T_default until more than K samples exist, then the global CDF, then the tool's own", () => {
    const est = new TtlEstimator();
    recordMany(est, "pytest", COLD_START_SAMPLES, 1);
    assert.equal(est.decide({ tool: "grep", prefillReloadS: 5 }).source, "default");

    est.tools.record("pytest", 1);
    // K + 1 in total but none for grep.
    assert.equal(est.decide({ tool: "grep", prefillReloadS: 5 }).source, "global");

    recordMany(est, "grep", COLD_START_SAMPLES, 0.1);
    assert.equal(est.decide({ tool: "grep", prefillReloadS: 5 }).source, "global");
    est.tools.record("grep", 0.1);
    assert.equal(est.decide({ tool: "grep", prefillReloadS: 5 }).source, "tool");
    assert.equal(est.decide({ tool: "pytest", prefillReloadS: 5 }).source, "tool");
  });

  it("solves eq. 2 on the tool's own durations once it has enough", () => {
    const est = new TtlEstimator({ coldStartSamples: 3 });
    // Tool "fast": {1, 2, 3, 4}; global additionally has four 50 s calls of "slow".
    for (const d of [1, 2, 3, 4]) est.tools.record("fast", d);
    recordMany(est, "slow", 4, 50);
    // eta is 1 and T is 0 so far, so B = prefillReloadS.
    assert.deepEqual(est.decide({ tool: "fast", prefillReloadS: 10 }), {
      ttlS: 4,
      source: "tool",
      benefitS: 10,
    });
    // An unknown tool reads the global CDF: {1, 2, 3, 4, 50 ×4}; B = 10 → tau = 4 scores 0.5·10 − 4 = 1.
    assert.deepEqual(est.decide({ tool: "new", prefillReloadS: 10 }), {
      ttlS: 4,
      source: "global",
      benefitS: 10,
    });
    assert.deepEqual(est.decide({ tool: "new", prefillReloadS: 2 }), {
      ttlS: 0,
      source: "global",
      benefitS: 2,
    });
  });

  it("adds the queueing delay T, weighted by eta except during cold start", () => {
    const est = new TtlEstimator({ coldStartSamples: 3 });
    est.queueing.observe(4);
    // Programs of 1 and 3 requests: pairs (0,1), (0,3), (1,2), (2,1) → Corr = −1.25 / 2.75, eta = 5/11.
    for (let i = 0; i < 10; i++) {
      est.memoryfulness.observeFinishedProgram(1);
      est.memoryfulness.observeFinishedProgram(3);
    }
    const eta = est.memoryfulness.eta();
    assert.ok(Math.abs(eta - 5 / 11) < 1e-12, `eta = ${eta}`);

    const cold = est.decide({ tool: "t", prefillReloadS: 1 });
    assert.equal(cold.source, "default");
    assert.equal(cold.benefitS, 5);
    assert.ok(Math.abs(cold.ttlS - Math.log(5)) < 1e-12);

    recordMany(est, "t", 4, 1);
    const warm = est.decide({ tool: "t", prefillReloadS: 1 });
    assert.equal(warm.source, "tool");
    assert.ok(Math.abs(warm.benefitS - (4 * (5 / 11) + 1)) < 1e-12, `B = ${warm.benefitS}`);
    assert.equal(warm.ttlS, 1);
  });

  it("does not pin when an anti-memoryful workload makes the benefit negative", () => {
    const est = new TtlEstimator({ coldStartSamples: 0 });
    est.tools.record("t", 0.01);
    est.queueing.observe(10);
    // Pareto-like program lengths: having served many requests predicts many more to come.
    const rng = new Rng(3);
    for (let i = 0; i < 5000; i++) {
      est.memoryfulness.observeFinishedProgram(Math.min(5000, Math.ceil((1 - rng.next()) ** (-1 / 1.2))));
    }
    assert.ok(est.memoryfulness.eta() < -0.1);
    const decision = est.decide({ tool: "t", prefillReloadS: 1 });
    assert.ok(decision.benefitS < 0);
    assert.equal(decision.ttlS, 0);
  });

  it("rejects a prefill-reload cost that is not finite non-negative seconds", () => {
    const est = new TtlEstimator();
    for (const bad of [-1, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(() => est.decide({ tool: "t", prefillReloadS: bad }), RangeError);
    }
    assert.throws(() => new TtlEstimator({ coldStartSamples: -1 }), RangeError);
  });
});
