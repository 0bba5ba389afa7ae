import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { createPolicy, POLICY_NAMES, policyProblems } from "../../policies/index.js";
import { checkPolicy, describeWorkload } from "./policy-check.js";

/**
 * Every policy runs the same randomized small workloads through the simulator (src/sim/policy-checks/policy-check.ts, what
 * `continuum policies --check` runs on any policy): everything completes, no stall, scheduler invariants
 * after every step, no overdue pin after any schedule(), nothing leaked.
 */
describe("policy conformance", () => {
  const pressure = { preemptions: 0, pinsSacrificed: 0, pinsExpired: 0, pinsReused: 0, hits: 0 };

  for (const policy of POLICY_NAMES) {
    it(`${policy}: every program of every workload completes, safely`, () => {
      assert.deepEqual(policyProblems(createPolicy(policy)), [], "what a policy module's must pass too");
      for (const verdict of checkPolicy(() => createPolicy(policy))) {
        const where = `${policy}, workload ${describeWorkload(verdict.workload)}`;
        if (!verdict.ok) assert.fail(`${where}: ${verdict.kind}: ${verdict.message}`);
        const report = verdict.report;
        if (report.endlessPins > 0)
          assert.equal(policy, "infercept", `${where}: only InferCept pins without a TTL`);
        const stats = report.scheduler.stats;
        pressure.preemptions += stats.preemptions;
        pressure.pinsSacrificed += stats.pinsSacrificed;
        pressure.pinsExpired += stats.pinsExpired;
        pressure.pinsReused += stats.pinsReused;
        pressure.hits += stats.prefixHitTokens;
      }
    });
  }

  it("the workloads put the scheduler under pressure (preemption, sacrificed, expired and reused pins)", () => {
    assert.ok(pressure.preemptions > 0, JSON.stringify(pressure));
    assert.ok(pressure.pinsSacrificed > 0, JSON.stringify(pressure));
    assert.ok(pressure.pinsExpired > 0, JSON.stringify(pressure));
    assert.ok(pressure.pinsReused > 0, JSON.stringify(pressure));
    assert.ok(pressure.hits > 0, JSON.stringify(pressure));
  });
});
