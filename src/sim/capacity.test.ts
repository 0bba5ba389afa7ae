import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type CapacityOptions, measureCapacity, physicalBoundJps } from "./capacity.js";
import { getProfile } from "./hardware/profiles.js";
import { type PointJob, runPointJob } from "./point-job.js";
import { DEFAULT_ENGINE_OPTIONS, type EngineOptions, type PointResult } from "./simulate.js";

const PROFILE = getProfile("h100", "llama-3.1-8b");
const SMALL_POOL: EngineOptions = { ...DEFAULT_ENGINE_OPTIONS, kvCapacityTokens: 60_000, maxNumSeqs: 32 };
const TEMPLATE: CapacityOptions["template"] = {
  workload: { kind: "swe-bench", programs: 24, tokenScale: 0.25, toolTimeScale: 1, turnRepeat: 1 },
  hardware: { gpu: "h100", model: "llama-3.1-8b" },
  engine: SMALL_POOL,
};

/** A point whose mean JCT is 10 s below the policy's cliff (per seed) and 1000 s above it. */
function cliffRunner(cliffOf: (policy: string, seed: number) => number) {
  const seen: PointJob[] = [];
  const run = async (jobs: readonly PointJob[]) => {
    seen.push(...jobs);
    return jobs.map((j) => {
      const jct = j.jps <= cliffOf(j.policy, j.seed) ? 10 : 1000;
      return {
        programs: 1,
        completed: 1,
        jct: { mean: jct, p50: jct, p90: jct, p99: jct, max: jct },
        jct_floor_mean_s: jct,
      } as unknown as PointResult;
    });
  };
  return { run, seen };
}

describe("physicalBoundJps", () => {
  it("is lower for programs that need more work, and counts a growing context's prefill once", () => {
    const turn = (input: number, output: number) => ({ input, cached: 0, output, tool: null, toolS: null });
    const one = physicalBoundJps([{ id: "a", turns: [turn(1000, 100)] }], PROFILE, DEFAULT_ENGINE_OPTIONS);
    const longer = physicalBoundJps([{ id: "a", turns: [turn(1000, 400)] }], PROFILE, DEFAULT_ENGINE_OPTIONS);
    assert.ok(longer < one);
    // a second turn that repeats the first turn's context adds only its new tokens' prefill
    const twoTurns = physicalBoundJps(
      [{ id: "a", turns: [turn(1000, 100), turn(1100, 100)] }],
      PROFILE,
      DEFAULT_ENGINE_OPTIONS,
    );
    assert.ok(twoTurns > one / 2.2, `${twoTurns} vs ${one}`);
  });
});

describe("measureCapacity", () => {
  it("finds each seed's cliff to the tolerance and reports the median of the seeds", async () => {
    const cliffs: Record<string, number[]> = { vllm: [0.3, 0.1, 0.2], ours: [0.35, 0.4, 0.5] };
    const { run } = cliffRunner((policy, seed) => (cliffs[policy] as number[])[seed - 1] as number);
    const result = await measureCapacity({
      template: TEMPLATE,
      policies: ["vllm", "ours"],
      seeds: [1, 2, 3],
      sloFactor: 3,
      tolerance: 0.02,
      profile: PROFILE,
      run,
    });
    const vllm = result.results.find((r) => r.policy === "vllm");
    const ours = result.results.find((r) => r.policy === "ours");
    assert.ok(vllm && ours);
    for (const [i, found] of vllm.sustainable_by_seed.entries()) {
      const cliff = cliffs.vllm?.[i] as number;
      assert.ok(found <= cliff && found >= cliff * 0.97, `seed ${i + 1}: ${found} vs cliff ${cliff}`);
    }
    assert.ok(Math.abs(vllm.sustainable_jps - 0.2) < 0.006, `median ${vllm.sustainable_jps}`);
    assert.ok(Math.abs(ours.sustainable_jps - 0.4) < 0.012, `median ${ours.sustainable_jps}`);
    assert.ok(Math.abs(result.ref_jps - 0.8 * vllm.sustainable_jps) < 1e-12);
    assert.equal(result.slo_jct_s, 30);
  });

  it("a policy already past the SLO at light load sustains nothing; none is credited past the ceiling", async () => {
    const { run } = cliffRunner((policy) => (policy === "never" ? -1 : Number.POSITIVE_INFINITY));
    const result = await measureCapacity({
      template: TEMPLATE,
      policies: ["vllm", "never"],
      seeds: [1],
      sloFactor: 3,
      tolerance: 0.02,
      profile: PROFILE,
      run,
    });
    const [vllm, never] = result.results;
    assert.equal(never?.sustainable_jps, 0);
    assert.ok((vllm?.sustainable_jps as number) < result.bound_jps);
    assert.ok((vllm?.sustainable_jps as number) >= 0.97 * result.bound_jps);
  });

  it("on the simulator: below the ceiling, and the same numbers on a second run", async () => {
    const options: CapacityOptions = {
      template: TEMPLATE,
      policies: ["vllm", "cachettl-adaptive"],
      seeds: [1],
      sloFactor: 3,
      tolerance: 0.05,
      profile: PROFILE,
      run: async (jobs) => jobs.map(runPointJob),
    };
    const first = await measureCapacity(options);
    for (const r of first.results) {
      assert.ok(r.sustainable_jps > 0 && r.sustainable_jps < first.bound_jps, JSON.stringify(r));
      assert.ok(r.light_jct_s > 0 && r.jct_at_ref_s >= r.light_jct_s * 0.9, JSON.stringify(r));
    }
    assert.deepEqual(await measureCapacity(options), first);
  });
});
