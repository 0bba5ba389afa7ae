import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CapacityResult } from "../sim/capacity.js";
import { shortRunWarning } from "./capacity-command.js";

function resultWith(sustainable: Record<string, number>): CapacityResult {
  return {
    results: Object.entries(sustainable).map(([policy, jps]) => ({
      policy,
      sustainable_jps: jps,
      sustainable_by_seed: [jps],
      light_jct_s: 10,
      jct_at_ref_s: 12,
      p99_jct_at_ref_s: 30,
    })),
    ref_jps: 0.2,
    bound_jps: 0.5,
    kv_bound_jps: 0.4,
    light_jps: 0.01,
    reference_light_jct_s: 10,
    slo_jct_s: 30,
    points: 1,
  };
}

describe("continuum capacity's short-run warning", () => {
  it("names the policies credited past the KV-limited ceiling and asks for more programs", () => {
    const warning = shortRunWarning(resultWith({ vllm: 0.3, ours: 0.45 }), 500);
    assert.ok(warning?.includes("ours") && !warning.includes("vllm"), warning ?? "");
    assert.match(warning ?? "", /500 programs .* more --programs/);
  });

  it("says nothing when every policy stays below it", () => {
    assert.equal(shortRunWarning(resultWith({ vllm: 0.3, ours: 0.39 }), 500), null);
  });
});
