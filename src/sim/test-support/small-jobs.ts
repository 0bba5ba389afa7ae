import type { PointJob } from "../point-job.js";
import { DEFAULT_ENGINE_OPTIONS, type EngineOptions } from "../simulate.js";

/** A pool small enough that 20 short SWE-bench programs feel memory pressure. */
export const SMALL_POOL: EngineOptions = {
  ...DEFAULT_ENGINE_OPTIONS,
  kvCapacityTokens: 60_000,
  maxNumSeqs: 32,
};

/** One quick load point on an H100 with Llama-3.1-8B: 20 SWE-bench programs at a quarter of their tokens. */
export function smallJob(policy: string, jps: number, seed = 7): PointJob {
  return {
    policy,
    jps,
    seed,
    workload: { kind: "swe-bench", programs: 20, tokenScale: 0.25, toolTimeScale: 1, turnRepeat: 1 },
    hardware: { gpu: "h100", model: "llama-3.1-8b" },
    engine: SMALL_POOL,
  };
}
