import type { Summary } from "../stats.js";
import type { RecorderReport } from "./recorder-report.js";

/** analyze.py's results.json (same keys, seconds). */
export interface AnalyzeResults {
  num_jobs: number;
  average_duration: number;
  median_duration: number;
  percentile_95: number;
  percentile_99: number;
  min_duration: number;
  max_duration: number;
  total_duration: number;
}

export function toAnalyzeResults(report: RecorderReport): AnalyzeResults {
  const { jobs } = report;
  return {
    num_jobs: jobs.numJobs,
    average_duration: jobs.averageS,
    median_duration: jobs.medianS,
    percentile_95: jobs.p95S,
    percentile_99: jobs.p99S,
    min_duration: jobs.minS,
    max_duration: jobs.maxS,
    total_duration: jobs.totalDurationS,
  };
}

/** Human-readable report; the first block matches analyze.py's output. */
export function formatRecorderReport(report: RecorderReport): string {
  const { jobs, cache, counts } = report;
  const lines = [
    "=== Job Duration Statistics ===",
    `Number of jobs: ${jobs.numJobs}`,
    `Average duration: ${seconds(jobs.averageS)}`,
    `Median duration: ${seconds(jobs.medianS)}`,
    `95th percentile: ${seconds(jobs.p95S)}`,
    `99th percentile: ${seconds(jobs.p99S)}`,
    `Min duration: ${seconds(jobs.minS)}`,
    `Max duration: ${seconds(jobs.maxS)}`,
    `Total duration: ${seconds(jobs.totalDurationS)}`,
    "",
    "=== Cache Statistics ===",
    `Admissions: ${cache.admissions} (${cache.admissionsAfterPreemption} after preemption)`,
    `Hit ratio: ${percent(cache.hitRatio)} (${cache.hitTokens} of ${cache.promptTokens} prompt tokens)`,
    `Prefilled tokens: ${cache.prefillTokens}`,
    `Prefill savings per admission: ${summaryLine(cache.prefillSavings, percent)}`,
    "",
    "=== Queue Wait (per request) ===",
    summaryLine(report.queueWaitS, shortSeconds),
    "",
    "=== Pin Durations ===",
    summaryLine(report.pinDurationS, shortSeconds),
    "",
    "=== Event Counts ===",
    `Arrivals: ${counts.arrivals}`,
    `Departures: ${counts.departures}`,
    `Preemptions: ${counts.preemptions}`,
    `Pins: ${counts.pins}`,
    `Unpins: ${counts.unpins}`,
    `Evictions: ${count(counts.evictions)}`,
    `Offloads: ${count(counts.offloads)}`,
    `Reloads: ${count(counts.reloads)}`,
    `Aborts: ${count(counts.aborts)}`,
  ];
  return lines.join("\n") + "\n";
}

function seconds(valueS: number): string {
  return `${valueS.toFixed(2)} seconds`;
}

function shortSeconds(valueS: number): string {
  return `${valueS.toFixed(2)}s`;
}

function percent(ratio: number): string {
  return `${(ratio * 100).toFixed(2)}%`;
}

function count(value: number | null): string {
  return value === null ? "n/a (not recorded in the fork's format)" : String(value);
}

function summaryLine(summary: Summary, unit: (value: number) => string): string {
  if (summary.count === 0) return "count 0";
  const stats = (["mean", "p50", "p90", "p95", "p99", "min", "max"] as const).map(
    (key) => `${key} ${unit(summary[key])}`,
  );
  return `count ${summary.count}, ${stats.join(", ")}`;
}
