import type { AgentTrace } from "../../workload/agent-traces/agent-trace.js";
import { loadAgentTraces } from "../../workload/agent-traces/agent-trace-files.js";
import { scaleAgentTrace } from "../../workload/agent-traces/agent-trace-scale.js";
import { type HardwareOptions, maxContextOf, resolveHardware } from "../point-job.js";
import type { EngineOptions } from "../simulate.js";
import { type ClosedLoopResult, simulateClosedLoop } from "./closed-loop.js";

/** Where a closed loop's session trees come from, and how they are reshaped. */
export interface AgentWorkloadOptions {
  /** Weka files or directories, Mooncake JSONL, or `trace import`'s Weka JSON Lines */
  readonly paths: readonly string[];
  readonly mooncakeBlockSize?: number;
  readonly tokenScale: number;
  readonly toolTimeScale: number;
}

/** One closed-loop run as plain data (it crosses worker-thread boundaries). */
export interface ClosedLoopJob {
  readonly policy: string;
  readonly concurrency: number;
  readonly durationS: number;
  readonly warmStart: boolean;
  readonly idleGapCapS: number;
  readonly interactivityFloor: number;
  readonly seed: number;
  readonly workload: AgentWorkloadOptions;
  readonly hardware: HardwareOptions;
  readonly engine: EngineOptions;
}

const cache = new Map<string, { traces: AgentTrace[]; problems: string[] }>();

/**
 * The traces of a workload, loaded once per thread. Sessions with a malformed field are left out and
 * named in `problems` (docs/workloads.md); none left is an error.
 */
export function loadAgentWorkload(workload: AgentWorkloadOptions): {
  traces: AgentTrace[];
  problems: string[];
} {
  const key = JSON.stringify(workload);
  let loaded = cache.get(key);
  if (!loaded) {
    const load = loadAgentTraces(
      workload.paths,
      workload.mooncakeBlockSize === undefined ? {} : { mooncakeBlockSize: workload.mooncakeBlockSize },
    );
    if (load.traces.length === 0) {
      throw new Error(
        `no session trace in ${workload.paths.join(", ")}${load.problems.length > 0 ? `: ${load.problems.join("; ")}` : ""}`,
      );
    }
    loaded = {
      traces: load.traces.map((t) => scaleAgentTrace(t, workload.tokenScale, workload.toolTimeScale)),
      problems: load.problems,
    };
    cache.set(key, loaded);
  }
  return loaded;
}

/** Same job, same result: the lanes draw from the seed. */
export function runClosedLoopJob(job: ClosedLoopJob): ClosedLoopResult {
  const profile = resolveHardware(job.hardware);
  return simulateClosedLoop({
    policy: job.policy,
    traces: loadAgentWorkload(job.workload).traces,
    profile,
    engine: job.engine,
    concurrency: job.concurrency,
    durationS: job.durationS,
    warmStart: job.warmStart,
    idleGapCapS: job.idleGapCapS,
    interactivityFloor: job.interactivityFloor,
    seed: job.seed,
    maxContextTokens: maxContextOf(profile, job.engine),
  });
}
