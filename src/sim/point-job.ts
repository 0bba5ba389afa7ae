import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Rng } from "../core/rng.js";
import { policyFileLabel } from "../policies/index.js";
import { buildWorkload } from "../workload/arrivals.js";
import type { WorkloadKind } from "../workload/generators.js";
import { parseTraceJsonl } from "../workload/trace.js";
import { loadEngineProfile } from "./hardware/engine-profile.js";
import { getProfile, type HardwareProfile } from "./hardware/profiles.js";
import type { KvCacheDtype } from "./hardware/roofline-spec.js";
import { type EngineOptions, type PointResult, simulatePoint } from "./simulate.js";

/** Where programs come from: a trace file or a generator, with the paper's scaling knobs. */
export interface WorkloadOptions {
  readonly trace?: string;
  readonly kind?: WorkloadKind;
  readonly programs: number;
  readonly tokenScale: number;
  readonly toolTimeScale: number;
  readonly turnRepeat: number;
  /** every program arrives at 0 (the job's jps is not used) */
  readonly batch?: boolean;
}

/** A shipped GPU and model (KV cache bf16 unless `kvCacheDtype` says fp8), or a measured engine profile. */
export type HardwareOptions =
  | { readonly gpu: string; readonly model: string; readonly kvCacheDtype?: KvCacheDtype }
  | { readonly profilePath: string };

/** Everything needed to simulate one point, as plain data (it crosses worker-thread boundaries). */
export interface PointJob {
  readonly policy: string;
  readonly jps: number;
  readonly seed: number;
  readonly workload: WorkloadOptions;
  readonly hardware: HardwareOptions;
  readonly engine: EngineOptions;
  /** directory for per-point scheduler event logs (same format as `continuum serve --record`) */
  readonly recordDir?: string;
  /** stop simulating this long after the last arrival (programs still running stay unfinished) */
  readonly horizonAfterLastArrivalS?: number;
}

export function resolveHardware(hardware: HardwareOptions): HardwareProfile {
  if ("profilePath" in hardware)
    return loadEngineProfile(JSON.parse(readFileSync(hardware.profilePath, "utf8")));
  return getProfile(hardware.gpu, hardware.model, hardware.kvCacheDtype);
}

const traceCache = new Map<string, ReturnType<typeof parseTraceJsonl>>();

/**
 * Fails on inputs no point could run with, before any header or worker: an unknown GPU or model, a bad
 * profile or trace file (named with its line), a KV pool larger than the GPU's memory holds.
 */
export function validateJobInputs(
  workload: WorkloadOptions,
  hardware: HardwareOptions,
  engine: EngineOptions,
) {
  validateHardwareInputs(hardware, engine);
  if (workload.trace) loadTraceCached(workload.trace);
}

/** Fails on an unknown GPU or model, a bad profile, or a KV pool larger than the GPU's memory holds. */
export function validateHardwareInputs(hardware: HardwareOptions, engine: EngineOptions): void {
  const profile = resolveHardware(hardware);
  if (engine.kvCapacityTokens > profile.kvCapacityTokens) {
    throw new Error(
      `--kv-cache-tokens ${engine.kvCapacityTokens} is more than ${profile.id} holds: at most ${profile.kvCapacityTokens} tokens of KV fit its memory`,
    );
  }
}

function loadTraceCached(path: string) {
  let programs = traceCache.get(path);
  if (!programs) {
    programs = parseTraceJsonl(readFileSync(path, "utf8"), path);
    traceCache.set(path, programs);
  }
  return programs;
}

/** A program's context never outgrows the model's window nor the KV pool the run is given. */
export function maxContextOf(profile: HardwareProfile, engine: EngineOptions): number {
  return engine.kvCapacityTokens > 0
    ? Math.min(profile.maxContextTokens, engine.kvCapacityTokens)
    : profile.maxContextTokens;
}

/** The programs and arrivals of a workload at a rate, rebuilt from the seed. */
export function buildJobWorkload(
  workload: WorkloadOptions,
  jps: number,
  seed: number,
  maxContextTokens?: number,
) {
  return buildWorkload({
    trace: workload.trace ? loadTraceCached(workload.trace) : undefined,
    kind: workload.kind,
    programs: workload.programs,
    jps,
    seed,
    tokenScale: workload.tokenScale,
    toolTimeScale: workload.toolTimeScale,
    turnRepeat: workload.turnRepeat,
    batch: workload.batch,
    maxContextTokens,
  });
}

/** Same job, same bytes out: the workload is rebuilt from the seed, never shared mutable state. */
export function runPointJob(job: PointJob): PointResult {
  const profile = resolveHardware(job.hardware);
  const built = buildJobWorkload(job.workload, job.jps, job.seed, maxContextOf(profile, job.engine));
  return simulatePoint({
    policy: job.policy,
    programs: built.programs,
    arrivalsS: built.arrivalsS,
    profile,
    engine: job.engine,
    jps: job.jps,
    seed: new Rng(job.seed).int(1, 1 << 30),
    horizonS:
      job.horizonAfterLastArrivalS === undefined
        ? undefined
        : (built.arrivalsS[built.arrivalsS.length - 1] ?? 0) + job.horizonAfterLastArrivalS,
    recordPath: job.recordDir ? recordPathFor(job.recordDir, job) : undefined,
  });
}

function recordPathFor(dir: string, job: PointJob): string {
  mkdirSync(dir, { recursive: true });
  return join(dir, `${policyFileLabel(job.policy)}-jps${job.jps}`);
}
