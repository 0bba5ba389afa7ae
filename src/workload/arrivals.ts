import { Rng } from "../core/rng.js";
import { generateWorkload, type WorkloadKind } from "./generators.js";
import type { TraceProgram } from "./trace.js";
import { repeatTurns, scaleTokens, scaleToolTime } from "./transforms.js";

/**
 * Arrival times of a Poisson process with rate jobsPerSecond: the first job arrives at 0 (a run starts
 * with work), each next one after an exponential gap of mean 1/jobsPerSecond.
 */
export function poissonArrivalsS(count: number, jobsPerSecond: number, rng: Rng): number[] {
  if (!(Number.isFinite(jobsPerSecond) && jobsPerSecond > 0)) {
    throw new Error(`arrival rate must be a positive number of jobs per second, got ${jobsPerSecond}`);
  }
  const arrivals: number[] = [];
  let t = 0;
  for (let i = 0; i < count; i++) {
    if (i > 0) t += rng.exponential(1 / jobsPerSecond);
    arrivals.push(t);
  }
  return arrivals;
}

/**
 * count programs of the trace: without replacement (a seeded shuffle) when the trace has that many,
 * else with replacement. Repeated programs get `#2`, `#3`... appended to their id to stay distinct.
 */
export function samplePrograms(trace: readonly TraceProgram[], count: number, rng: Rng): TraceProgram[] {
  if (count > 0 && trace.length === 0) throw new Error("cannot sample programs from an empty trace");
  let picked: TraceProgram[];
  if (count <= trace.length) {
    const pool = [...trace];
    for (let i = 0; i < count; i++) {
      const j = rng.int(i, pool.length - 1);
      [pool[i], pool[j]] = [pool[j]!, pool[i]!];
    }
    picked = pool.slice(0, count);
  } else {
    picked = Array.from({ length: count }, () => rng.pick(trace));
  }
  const seen = new Map<string, number>();
  return picked.map((program) => {
    const n = (seen.get(program.id) ?? 0) + 1;
    seen.set(program.id, n);
    return n === 1 ? program : { ...program, id: `${program.id}#${n}` };
  });
}

/** Programs come from `trace` or are generated for `kind`: give exactly one. */
export interface WorkloadSpec {
  trace?: readonly TraceProgram[] | undefined;
  kind?: WorkloadKind | undefined;
  programs: number;
  /** arrival rate, jobs (programs) per second (unused for a batch) */
  jps: number;
  /** every program arrives at 0: batch inference, an RL rollout (default: Poisson arrivals at jps) */
  batch?: boolean | undefined;
  seed: number;
  /** factor on every token count (default 1) */
  tokenScale?: number | undefined;
  /** factor on every tool time (default 1) */
  toolTimeScale?: number | undefined;
  /** see repeatTurns (default 1) */
  turnRepeat?: number | undefined;
  /** generated programs never grow past this many tokens after token scaling (the model's context) */
  maxContextTokens?: number | undefined;
}

export interface Workload {
  programs: TraceProgram[];
  /** arrival time of each program, ascending, in the same order */
  arrivalsS: number[];
}

/** The programs of a run and when each arrives; the same spec always gives the same workload. */
export function buildWorkload(spec: WorkloadSpec): Workload {
  if (!Number.isInteger(spec.programs) || spec.programs < 0) {
    throw new Error(`programs must be a non-negative integer, got ${spec.programs}`);
  }
  if ((spec.trace === undefined) === (spec.kind === undefined)) {
    throw new Error("a workload needs either a trace or a generator kind, not both or neither");
  }
  const rng = new Rng(spec.seed);
  const sampleRng = rng.fork();
  const arrivalRng = rng.fork();
  let programs =
    spec.trace !== undefined
      ? samplePrograms(spec.trace, spec.programs, sampleRng)
      : generateWorkload({
          kind: spec.kind!,
          programs: spec.programs,
          seed: sampleRng.int(0, 2 ** 32 - 1),
          maxContextTokens:
            spec.maxContextTokens === undefined
              ? undefined
              : Math.floor(spec.maxContextTokens / (spec.tokenScale ?? 1)),
        });
  if ((spec.turnRepeat ?? 1) !== 1) programs = repeatTurns(programs, spec.turnRepeat!);
  if ((spec.tokenScale ?? 1) !== 1) programs = scaleTokens(programs, spec.tokenScale!);
  if ((spec.toolTimeScale ?? 1) !== 1) programs = scaleToolTime(programs, spec.toolTimeScale!);
  const arrivalsS = spec.batch
    ? programs.map(() => 0)
    : poissonArrivalsS(programs.length, spec.jps, arrivalRng);
  return { programs, arrivalsS };
}
