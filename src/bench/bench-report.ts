/** Bench runs as a text table and as the simulator's HTML report (runs side by side). */
import { JCT_HEAD, jctCells } from "../analysis/jct-columns.js";
import { renderReportHtml } from "../analysis/report-html.js";
import { formatTextTable } from "../analysis/text-table.js";
import { type BenchRun, completedJcts } from "./bench-metrics.js";

const f = (x: number, digits = 2) => x.toFixed(digits);

export function formatErrors(errors: Readonly<Record<string, number>>): string {
  const entries = Object.entries(errors).sort(([a], [b]) => a.localeCompare(b));
  return entries.length === 0 ? "none" : entries.map(([k, n]) => `${k}:${n}`).join(" ");
}

export function formatBenchTable(runs: readonly BenchRun[]): string {
  const head = ["run", ...JCT_HEAD, "TTFTp50", "turnp50", "cached", "cached2+", "promptMAE", "errors"];
  const rows = runs.map((r) => [
    r.label,
    ...jctCells(r, 2),
    r.ttft.count === 0 ? "-" : f(r.ttft.p50, 3),
    f(r.turn_latency.p50, 3),
    r.cached_tokens_reported === false ? "n/a" : f(r.cached_token_ratio, 3),
    r.cached_tokens_reported === false || r.later_turns_cached_ratio === undefined
      ? "n/a"
      : f(r.later_turns_cached_ratio, 3),
    r.prompt_tokens_mae === null || r.prompt_tokens_mae === undefined ? "-" : f(r.prompt_tokens_mae, 1),
    formatErrors(r.errors),
  ]);
  return formatTextTable(head, rows);
}

/** The HTML report of one or more runs (JCT table and CDF; JCT vs load when the loads differ). */
export function renderBenchReport(
  runs: readonly BenchRun[],
  title = "continuum bench",
  extraSettings: readonly string[] = [],
): Promise<string> {
  const settings = [
    ...extraSettings,
    ...runs.flatMap((r) => [
      `${r.label}: ${r.url}${r.model ? ` (${r.model})` : ""}, ${r.api ?? "chat"} API, ${r.jps} jobs/s, seed ${r.seed}`,
      ...(r.settings ?? []).map((s) => `${r.label}: ${s}`),
    ]),
  ];
  return renderReportHtml({
    title,
    settings,
    runs: runs.map((r) => ({
      label: r.label,
      jps: r.jps,
      jct: r.jct,
      throughputJps: r.throughput_jps,
      hitRatio: r.cached_token_ratio,
      completed: r.completed,
      programs: r.programs,
      jcts: completedJcts(r),
      extra: {
        "TTFT p50 (s)": r.ttft.count === 0 ? "-" : f(r.ttft.p50, 3),
        "TTFT p99 (s)": r.ttft.count === 0 ? "-" : f(r.ttft.p99, 3),
        "turn p50 (s)": f(r.turn_latency?.p50 ?? 0, 3),
        "prompt MAE (tokens)": r.prompt_tokens_mae === null ? "-" : f(r.prompt_tokens_mae ?? 0, 1),
        failed: r.failed ?? 0,
        abandoned: r.abandoned ?? 0,
        errors: formatErrors(r.errors),
      },
    })),
  });
}
