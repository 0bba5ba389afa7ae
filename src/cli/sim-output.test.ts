import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { type PointJob, runPointJob } from "../sim/point-job.js";
import { DEFAULT_ENGINE_OPTIONS, type EngineOptions } from "../sim/simulate.js";
import { runSweep } from "../sim/sweep.js";
import { toJsonResult } from "./sim-output.js";

const SMALL_POOL: EngineOptions = { ...DEFAULT_ENGINE_OPTIONS, kvCapacityTokens: 60_000, maxNumSeqs: 32 };

function job(policy: string, jps: number, seed = 7): PointJob {
  return {
    policy,
    jps,
    seed,
    workload: { kind: "swe-bench", programs: 20, tokenScale: 0.25, toolTimeScale: 1, turnRepeat: 1 },
    hardware: { gpu: "h100", model: "llama-3.1-8b" },
    engine: SMALL_POOL,
  };
}

describe("simulate --json", () => {
  it("gives byte-identical JSON for the same seed, and different JSON for another seed", () => {
    const a = JSON.stringify(toJsonResult(runPointJob(job("cachettl", 0.5))));
    const b = JSON.stringify(toJsonResult(runPointJob(job("cachettl", 0.5))));
    const c = JSON.stringify(toJsonResult(runPointJob(job("cachettl", 0.5, 8))));
    assert.equal(a, b);
    assert.notEqual(a, c);
  });

  it("returns sweep results in job order whatever the worker threads finish first", async () => {
    const jobs = [job("vllm", 0.5), job("cachettl", 0.5), job("vllm", 1), job("cachettl", 1)];
    const threaded = await runSweep(jobs, { threads: 2 });
    const inline = await runSweep(jobs, { threads: 1 });
    assert.deepEqual(
      threaded.map((r) => JSON.stringify(toJsonResult(r))),
      inline.map((r) => JSON.stringify(toJsonResult(r))),
    );
    assert.deepEqual(
      threaded.map((r) => [r.policy, r.jps]),
      [
        ["vllm", 0.5],
        ["cachettl", 0.5],
        ["vllm", 1],
        ["cachettl", 1],
      ],
    );
  });
});
