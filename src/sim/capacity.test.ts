import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type CapacityOptions, measureCapacity, physicalCeiling } from "./capacity.js";
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
        jcts: [jct],
        jct_floor_mean_s: jct,
      } as unknown as PointResult;
    });
  };
  return { run, seen };
}

describe("physicalCeiling", () => {
  const turn = (input: number, cached: number, output: number) => ({
    input,
    cached,
    output,
    tool: null,
    toolS: null,
  });
  const ceiling = (turns: ReturnType<typeof turn>[], engine = DEFAULT_ENGINE_OPTIONS) =>
    physicalCeiling([{ id: "a", turns }], PROFILE, engine);

  it("is lower for programs that need more work", () => {
    assert.ok(ceiling([turn(1000, 0, 400)]).boundJps < ceiling([turn(1000, 0, 100)]).boundJps);
  });

  it("charges a turn only the prompt after the prefix the previous request left reusable", () => {
    const first = turn(8000, 0, 100);
    const extends_ = ceiling([first, turn(8200, 8100, 100)]).boundJps;
    // an agent that trimmed its history: the prompt is shorter, but everything after the edit is new
    const trimmed = ceiling([first, turn(6000, 1000, 100)]).boundJps;
    const alone = ceiling([first]).boundJps;
    assert.ok(extends_ > alone / 1.2, `${extends_} vs ${alone}`);
    assert.ok(trimmed < extends_ / 1.3, `trimmed ${trimmed} vs extending ${extends_}`);
  });

  it("with the KV pool holding fewer contexts than max-num-seqs, the KV-limited ceiling is lower", () => {
    const turns = [turn(30_000, 0, 2000)];
    const roomy = ceiling(turns, { ...DEFAULT_ENGINE_OPTIONS, kvCapacityTokens: 256 * 40_000 });
    const tight = ceiling(turns, { ...DEFAULT_ENGINE_OPTIONS, kvCapacityTokens: 4 * 32_000 });
    assert.equal(roomy.kvBoundJps, roomy.boundJps);
    assert.equal(tight.boundJps, roomy.boundJps);
    assert.ok(tight.kvBoundJps < 0.75 * tight.boundJps, JSON.stringify(tight));
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

  it("reports vllm, whose figures set the SLO and the reference load, even when not asked for", async () => {
    const { run } = cliffRunner((policy) => (policy === "vllm" ? 0.2 : 0.3));
    const result = await measureCapacity({
      template: TEMPLATE,
      policies: ["ours"],
      seeds: [1],
      sloFactor: 3,
      tolerance: 0.02,
      profile: PROFILE,
      run,
    });
    assert.deepEqual(
      result.results.map((r) => r.policy),
      ["vllm", "ours"],
    );
    assert.ok(Math.abs(result.ref_jps - 0.8 * (result.results[0]?.sustainable_jps as number)) < 1e-12);
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

  it("reports mean and p99 JCT, the p99 and longest first-turn wait and program wait at the reference load over every seed's programs together", async () => {
    // seed 1 has a slow tail; seeds 2 and 3 none. A median of per-seed p99s would hide seed 1's tail.
    const jctsOf = (seed: number) => Array.from({ length: 100 }, (_, i) => (seed === 1 ? i + 1 : 10));
    // seed 2 held five programs 42 s and one 90 s; every other first turn started within a second
    const firstTurnTtftsOf = (seed: number) =>
      Array.from({ length: 100 }, (_, i) => (seed !== 2 || i < 94 ? 1 : i < 99 ? 42 : 90));
    const run = async (jobs: readonly PointJob[]) =>
      jobs.map((j) => {
        const jcts = j.jps <= 0.2 ? jctsOf(j.seed) : [1000];
        const mean = jcts.reduce((a, b) => a + b, 0) / jcts.length;
        return {
          programs: jcts.length,
          completed: jcts.length,
          jct: { mean, p50: mean, p90: mean, p99: Math.max(...jcts), max: Math.max(...jcts) },
          jct_floor_mean_s: mean,
          jcts,
          first_turn_ttfts: firstTurnTtftsOf(j.seed),
          // a program's waits over all its turns: seed 3's last program waited 120 s in all
          program_waits: Array.from({ length: 100 }, (_, i) => (j.seed === 3 && i === 99 ? 120 : 2)),
        } as unknown as PointResult;
      });
    const result = await measureCapacity({
      template: TEMPLATE,
      policies: ["vllm"],
      seeds: [1, 2, 3],
      sloFactor: 3,
      tolerance: 0.02,
      profile: PROFILE,
      run,
    });
    const [vllm] = result.results;
    assert.ok(Math.abs((vllm?.jct_at_ref_s as number) - (50.5 + 10 + 10) / 3) < 1e-9);
    assert.ok((vllm?.p99_jct_at_ref_s as number) > 90, `p99 ${vllm?.p99_jct_at_ref_s}`);
    assert.equal(
      vllm?.p99_first_turn_ttft_at_ref_s,
      42,
      "seed 2's held programs, not a median of seeds' p99s (1 s)",
    );
    assert.equal(vllm?.max_first_turn_ttft_at_ref_s, 90, "seed 2's starved program");
    assert.equal(vllm?.max_program_wait_at_ref_s, 120, "seed 3's program that waited longest over its turns");
    assert.equal(vllm?.p99_program_wait_at_ref_s, 2);
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
