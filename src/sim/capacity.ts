/**
 * Capacity, not anecdotes: the largest arrival rate a policy sustains (mean JCT within `sloFactor` x the
 * light-load mean JCT), found by bisection and taken as the median over seeds, beside the physical
 * ceiling of the hardware. Ratios past a load cliff depend on run length and seed; sustainable load does
 * not.
 */
import { summarize } from "../analysis/stats.js";
import type { TraceProgram } from "../workload/trace.js";
import type { HardwareProfile } from "./hardware/profiles.js";
import { type LatencyModel, stepAccumulatorFor } from "./hardware/step-latency.js";
import { buildJobWorkload, maxContextOf, type PointJob } from "./point-job.js";
import { type EngineOptions, kvPoolTokensOf, type PointResult } from "./simulate.js";

/** Runs a batch of points (a worker-thread sweep in production) and returns results in job order. */
export type PointRunner = (jobs: readonly PointJob[]) => Promise<PointResult[]>;

export interface CapacityOptions {
  /** the job template: workload, hardware, engine, seed (policy and jps are set per point) */
  readonly template: Omit<PointJob, "policy" | "jps" | "seed" | "horizonAfterLastArrivalS">;
  readonly policies: readonly string[];
  readonly seeds: readonly number[];
  readonly sloFactor: number;
  /** relative width at which bisection stops */
  readonly tolerance: number;
  readonly profile: HardwareProfile;
  readonly run: PointRunner;
  readonly onProgress?: (line: string) => void;
}

export interface PolicyCapacity {
  readonly policy: string;
  readonly sustainable_jps: number;
  /** the sustainable load found for each seed */
  readonly sustainable_by_seed: readonly number[];
  readonly light_jct_s: number;
  /** mean and p99 JCT at ref_jps over the programs of every seed together */
  readonly jct_at_ref_s: number;
  readonly p99_jct_at_ref_s: number;
  /** p99 and longest wait for a program's first token at ref_jps, over every seed's programs */
  readonly p99_first_turn_ttft_at_ref_s: number;
  readonly max_first_turn_ttft_at_ref_s: number;
  /** p99 and longest of programs' waits summed over their turns at ref_jps, over every seed's programs */
  readonly p99_program_wait_at_ref_s: number;
  readonly max_program_wait_at_ref_s: number;
}

export interface CapacityResult {
  readonly results: readonly PolicyCapacity[];
  readonly ref_jps: number;
  readonly bound_jps: number;
  /** the ceiling with decode batches only as large as the KV pool holds (see physicalCeiling) */
  readonly kv_bound_jps: number;
  readonly light_jps: number;
  /** the reference every policy's SLO is measured against: vllm's mean JCT at light_jps (median of seeds) */
  readonly reference_light_jct_s: number;
  readonly slo_jct_s: number;
  readonly points: number;
}

/** The policy whose light-load JCT and 0.8 x sustainable load anchor the comparison. */
export const REFERENCE_POLICY = "vllm";
/** Light load, as a fraction of the physical ceiling: programs rarely overlap. */
const LIGHT_FRACTION_OF_BOUND = 0.02;

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/** Two ceilings on the arrival rate: no policy sustains more in steady state. */
export interface PhysicalCeiling {
  /** decode in full batches of max-num-seqs (the ceiling: compute alone) */
  readonly boundJps: number;
  /** decode batches only as large as the KV pool holds at the workload's mean decode context */
  readonly kvBoundJps: number;
}

/**
 * The rates at which the accelerator would never idle if no prefill were ever repeated, spread over every
 * replica. A turn's unavoidable work is the prefill of its prompt after the prefix the previous request
 * left reusable (`cached`: an agent that trims or edits its history pays for what follows the edit) and
 * the decode of its output. Decode tokens ride in full batches at the turn's mid-output context; prefill
 * is priced at what its chunk adds to such a step (the step's fixed costs are paid by the batch).
 */
export function physicalCeiling(
  programs: readonly TraceProgram[],
  profile: HardwareProfile,
  engine: EngineOptions,
): PhysicalCeiling {
  let decodeTokens = 0;
  let attendedKeys = 0;
  for (const program of programs) {
    for (const turn of program.turns) {
      decodeTokens += turn.output;
      attendedKeys += turn.output * (turn.input + turn.output / 2);
    }
  }
  const poolTokens = kvPoolTokensOf(profile, engine);
  const meanContext = decodeTokens > 0 ? attendedKeys / decodeTokens : 0;
  const kvBatch = meanContext > 0 ? Math.floor(poolTokens / meanContext) : engine.maxNumSeqs;
  const rate = (batch: number) => {
    const workS = unavoidableWorkS(programs, profile.latency, engine, batch);
    return workS > 0 ? (engine.replicas * programs.length) / workS : Number.POSITIVE_INFINITY;
  };
  const boundJps = rate(engine.maxNumSeqs);
  const kvLimitedBatch = Math.max(1, Math.min(engine.maxNumSeqs, kvBatch));
  // a pool that holds full batches limits nothing: the same work, priced once
  return { boundJps, kvBoundJps: kvLimitedBatch === engine.maxNumSeqs ? boundJps : rate(kvLimitedBatch) };
}

/** The ceilings of a setup: its workload as generated for `seed` on its hardware and engine. */
export function ceilingOf(
  setup: Pick<PointJob, "workload" | "engine">,
  seed: number,
  profile: HardwareProfile,
): PhysicalCeiling {
  const built = buildJobWorkload(setup.workload, 1, seed, maxContextOf(profile, setup.engine));
  return physicalCeiling(built.programs, profile, setup.engine);
}

function unavoidableWorkS(
  programs: readonly TraceProgram[],
  latency: LatencyModel,
  engine: EngineOptions,
  batch: number,
): number {
  const step = stepAccumulatorFor(latency);
  const piece = Math.max(1, engine.maxNumBatchedTokens - batch);
  const priceS = (decodeContext: number, prefillTokens: number, prefillContext: number) => {
    step.beginStep();
    for (let i = 0; i < batch; i++) step.addChunk(1, decodeContext);
    if (prefillTokens > 0) step.addChunk(prefillTokens, prefillContext);
    return step.endStepS();
  };
  let workS = 0;
  for (const program of programs) {
    for (const turn of program.turns) {
      const midContext = turn.input + turn.output / 2;
      const decodeStepS = priceS(midContext, 0, 0);
      workS += (turn.output * decodeStepS) / batch;
      for (let done = Math.min(turn.cached, turn.input); done < turn.input; done += piece) {
        workS += priceS(midContext, Math.min(piece, turn.input - done), done) - decodeStepS;
      }
    }
  }
  return workS;
}

/** A point violates the SLO when even the lower bound of its mean JCT is past it. */
function verdict(result: PointResult, sloJctS: number): "met" | "violated" | "unknown" {
  if (result.completed === result.programs) return result.jct.mean <= sloJctS ? "met" : "violated";
  return result.jct_floor_mean_s > sloJctS ? "violated" : "unknown";
}

interface Bracket {
  readonly policy: string;
  readonly seed: number;
  lo: number;
  hi: number;
}

export async function measureCapacity(o: CapacityOptions): Promise<CapacityResult> {
  let points = 0;
  const progress = o.onProgress ?? (() => {});
  const job = (policy: string, jps: number, seed: number, horizonS?: number): PointJob => ({
    ...o.template,
    policy,
    jps,
    seed,
    ...(horizonS === undefined ? {} : { horizonAfterLastArrivalS: horizonS }),
  });
  const run = async (jobs: PointJob[]) => {
    points += jobs.length;
    return o.run(jobs);
  };

  const { boundJps, kvBoundJps } = ceilingOf(o.template, o.seeds[0] ?? 1, o.profile);
  const lightJps = boundJps * LIGHT_FRACTION_OF_BOUND;
  progress(
    `physical ceiling ${boundJps.toFixed(4)} jobs/s (${kvBoundJps.toFixed(4)} with batches the KV pool holds); light load ${lightJps.toFixed(4)} jobs/s`,
  );

  const policies = o.policies.includes(REFERENCE_POLICY) ? o.policies : [REFERENCE_POLICY, ...o.policies];
  const light = await run(policies.flatMap((p) => o.seeds.map((s) => job(p, lightJps, s))));
  const lightOf = (policy: string) => {
    const p = policies.indexOf(policy);
    return median(light.slice(p * o.seeds.length, (p + 1) * o.seeds.length).map((r) => r.jct.mean));
  };
  const referenceLightJctS = lightOf(REFERENCE_POLICY);
  const sloJctS = o.sloFactor * referenceLightJctS;
  progress(
    `light-load mean JCT (${REFERENCE_POLICY}) ${referenceLightJctS.toFixed(2)} s; SLO ${sloJctS.toFixed(2)} s`,
  );

  // Past the cliff a point can stop early: once even the lower bound of its mean JCT is past the SLO,
  // the verdict is certain. A point left uncertain is simulated to its end.
  const horizonS = 4 * sloJctS;
  // A policy already past the SLO at light load sustains nothing; the physical ceiling is never sustained.
  const brackets: Bracket[] = policies.flatMap((policy, p) =>
    o.seeds.map((seed, k) => {
      const lightMet = (light[p * o.seeds.length + k] as PointResult).jct.mean <= sloJctS;
      return { policy, seed, lo: lightMet ? lightJps : 0, hi: lightMet ? boundJps : 0 };
    }),
  );
  for (let round = 1; ; round++) {
    const open = brackets.filter((b) => b.hi - b.lo > o.tolerance * b.hi);
    if (open.length === 0) break;
    const mids = open.map((b) => (b.lo + b.hi) / 2);
    let results = await run(open.map((b, i) => job(b.policy, mids[i] as number, b.seed, horizonS)));
    const unknown = results.flatMap((r, i) => (verdict(r, sloJctS) === "unknown" ? [i] : []));
    if (unknown.length > 0) {
      const exact = await run(unknown.map((i) => job(open[i]!.policy, mids[i] as number, open[i]!.seed)));
      results = results.map((r, i) => {
        const k = unknown.indexOf(i);
        return k >= 0 ? (exact[k] as PointResult) : r;
      });
    }
    results.forEach((r, i) => {
      const b = open[i] as Bracket;
      if (verdict(r, sloJctS) === "met") b.lo = mids[i] as number;
      else b.hi = mids[i] as number;
    });
    progress(`bisection round ${round}: ${open.length} brackets narrowed`);
  }

  const sustainable = (policy: string) => brackets.filter((b) => b.policy === policy).map((b) => b.lo);
  const refJps = 0.8 * median(sustainable(REFERENCE_POLICY));
  // the reference is reported too, asked for or not: the SLO and the reference load are its figures
  const atRef = await run(policies.flatMap((p) => o.seeds.map((s) => job(p, refJps, s))));
  const results = policies.map((policy, p) => {
    const mine = atRef.slice(p * o.seeds.length, (p + 1) * o.seeds.length);
    // one distribution over every seed's programs: a p99 of 3 x 500 JCTs, not a median of three 5th-largest
    const atRefJct = summarize(mine.flatMap((r) => r.jcts));
    const atRefFirstTurn = summarize(mine.flatMap((r) => r.first_turn_ttfts));
    const atRefProgramWait = summarize(mine.flatMap((r) => r.program_waits));
    return {
      policy,
      sustainable_jps: median(sustainable(policy)),
      sustainable_by_seed: sustainable(policy),
      light_jct_s: lightOf(policy),
      jct_at_ref_s: atRefJct.mean,
      p99_jct_at_ref_s: atRefJct.p99,
      p99_first_turn_ttft_at_ref_s: atRefFirstTurn.p99,
      max_first_turn_ttft_at_ref_s: atRefFirstTurn.max,
      p99_program_wait_at_ref_s: atRefProgramWait.p99,
      max_program_wait_at_ref_s: atRefProgramWait.max,
    };
  });
  return {
    results,
    ref_jps: refJps,
    bound_jps: boundJps,
    kv_bound_jps: kvBoundJps,
    light_jps: lightJps,
    reference_light_jct_s: referenceLightJctS,
    slo_jct_s: sloJctS,
    points,
  };
}
