import assert from "node:assert/strict";
import type { SchedulingPolicy } from "../../core/policy.js";
import { createPolicy } from "../../policies/index.js";
import type { SimProgramSpec } from "../event-loop.js";
import {
  type RunConfig as CheckConfig,
  checkedRun as checkedRunOf,
  type RunReport,
} from "../policy-checks/policy-check.js";

/**
 * The conformance check's pieces for tests (src/sim/policy-checks/policy-check.ts holds them, for `continuum policies
 * --check` too), with a policy named by config and the rule that only InferCept pins without a TTL.
 */
export {
  BLOCK_SIZE,
  checkWholePoolFits as assertWholePoolFits,
  layOut,
  type ProgramDraft,
  type RunReport,
  randomDrafts,
  TOOLS,
  type TurnDraft,
} from "../policy-checks/policy-check.js";

export interface RunConfig extends CheckConfig {
  readonly policy: string;
}

/**
 * checkedRun of src/sim/policy-checks/policy-check.ts on `policy` (default: a fresh one of config.policy); pins left
 * without a TTL after the drain must be InferCept's.
 */
export function checkedRun(
  specs: readonly SimProgramSpec[],
  config: RunConfig,
  policy: SchedulingPolicy = createPolicy(config.policy),
): RunReport {
  const report = checkedRunOf(specs, config, policy);
  if (report.endlessPins > 0) assert.equal(policy.name, "infercept", "only InferCept pins without a TTL");
  return report;
}
