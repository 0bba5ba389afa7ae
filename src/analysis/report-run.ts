// What a report is made of: runs (a policy or server at a load) and the helpers every part reads them with.

/** What one run (a policy at a load, simulated or measured) contributes to a report. */
export interface ReportRun {
  readonly label: string;
  /** the panel the run belongs to (a figure's hardware or workload); runs without one share a panel */
  readonly group?: string;
  readonly jps: number;
  readonly jct: { mean: number; p50: number; p90: number; p95: number; p99: number };
  readonly throughputJps: number;
  readonly hitRatio: number;
  readonly completed: number;
  readonly programs: number;
  readonly extra?: Readonly<Record<string, string | number>>;
  readonly jcts: readonly number[];
  readonly kvUsage?: readonly { timeS: number; used: number; pinned: number }[];
}

export type JctMetric = "mean" | "p90" | "p95" | "p99";

/**
 * The simulator's ceilings on the load of a setup (`continuum capacity` prints the same): no policy sustains
 * more than `jps` (decode batches only as large as the KV pool holds) or `fullBatchJps` (full batches).
 * Past them a finite run only ends before its backlog shows, so its ratios measure the run's length.
 */
export interface LoadCeiling {
  readonly jps: number;
  readonly fullBatchJps: number;
}

/** A load past the ceiling (none without one). */
export const pastCeiling = (ceiling: LoadCeiling | undefined, jps: number) =>
  ceiling !== undefined && jps > ceiling.jps;

/** The warning a load past the ceiling carries, in the report and on stderr. */
export function ceilingWarning(ceiling: LoadCeiling, loads: readonly number[]): string {
  return `${loads.join(", ")} jobs/s ${loads.length === 1 ? "is" : "are"} past the simulator's ceiling for this setup (${ceiling.jps.toPrecision(3)} jobs/s with decode batches the KV pool holds, ${ceiling.fullBatchJps.toPrecision(3)} with full batches): no policy sustains such a load, a finite run only ends before its backlog shows, and the ratios there measure the run's length, not a policy's gain`;
}

export const unique = <T>(xs: readonly T[]): T[] => [...new Set(xs)];
export const loadsOf = (runs: readonly ReportRun[]) => unique(runs.map((r) => r.jps)).sort((a, b) => a - b);
export const unfinished = (r: ReportRun) => r.completed < r.programs;
/** " at 0.2 jobs/s" on a load axis, " at max-num-seqs 64" on another; nothing for runs without a load (analyze). */
export const atX = (xTitle: string, x: number) =>
  x === 0 ? "" : xTitle.includes("jobs/s") ? ` at ${x} jobs/s` : ` at ${xTitle} ${x}`;
