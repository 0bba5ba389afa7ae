/** The JCT columns every run table shares (simulation points, bench runs): one definition. */
export interface JctRow {
  readonly jps: number;
  readonly completed: number;
  readonly programs: number;
  readonly jct: {
    readonly mean: number;
    readonly p50: number;
    readonly p90: number;
    readonly p95: number;
    readonly p99: number;
  };
  readonly throughput_jps: number;
}

export const JCT_HEAD: readonly string[] = ["jps", "done", "meanJCT", "p50", "p90", "p95", "p99", "thr(jps)"];

/** A run's load as a reader names it: its arrival rate, or a batch (every program at 0, rate 0). */
export function loadLabel(jps: number): string {
  return jps > 0 ? `${jps} jobs/s` : "batch";
}

export function jctCells(r: JctRow, digits: number): string[] {
  const f = (x: number, d = digits) => x.toFixed(d);
  return [
    r.jps > 0 ? String(r.jps) : "batch",
    `${r.completed}/${r.programs}`,
    f(r.jct.mean),
    f(r.jct.p50),
    f(r.jct.p90),
    f(r.jct.p95),
    f(r.jct.p99),
    f(r.throughput_jps, 4),
  ];
}
