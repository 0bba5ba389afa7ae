import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";

/** What one run (a policy at a load, simulated or measured) contributes to a report. */
export interface ReportRun {
  readonly label: string;
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

export interface ReportInput {
  readonly title: string;
  /** one line per setting (hardware, workload, seed...), printed above the charts */
  readonly settings: readonly string[];
  readonly runs: readonly ReportRun[];
}

const WIDTH = 520;
const HEIGHT = 260;

async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: "none" });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}

function jctVsLoad(runs: readonly ReportRun[]): TopLevelSpec {
  return {
    width: WIDTH,
    height: HEIGHT,
    title: "Mean job completion time vs load",
    data: { values: runs.map((r) => ({ policy: r.label, jps: r.jps, jct: r.jct.mean })) },
    mark: { type: "line", point: true },
    encoding: {
      x: { field: "jps", type: "quantitative", title: "load (jobs/s)" },
      y: { field: "jct", type: "quantitative", title: "mean JCT (s)" },
      color: { field: "policy", type: "nominal" },
    },
  };
}

function jctCdf(runs: readonly ReportRun[]): TopLevelSpec {
  const values = runs.flatMap((r) => {
    const sorted = [...r.jcts].sort((a, b) => a - b);
    return sorted.map((jct, i) => ({ policy: r.label, jct, fraction: (i + 1) / sorted.length }));
  });
  return {
    width: WIDTH,
    height: HEIGHT,
    title: `JCT CDF at ${runs[0]?.jps ?? 0} jobs/s`,
    data: { values },
    mark: { type: "line", interpolate: "step-after" },
    encoding: {
      x: { field: "jct", type: "quantitative", title: "job completion time (s)" },
      y: { field: "fraction", type: "quantitative", title: "fraction of programs" },
      color: { field: "policy", type: "nominal" },
    },
  };
}

function kvTimeline(runs: readonly ReportRun[]): TopLevelSpec {
  const values = runs.flatMap((r) =>
    (r.kvUsage ?? []).flatMap((s) => [
      { policy: r.label, timeS: s.timeS, fraction: s.used, what: "in use" },
      { policy: r.label, timeS: s.timeS, fraction: s.pinned, what: "pinned" },
    ]),
  );
  return {
    width: WIDTH,
    height: HEIGHT,
    title: `KV cache usage over time at ${runs[0]?.jps ?? 0} jobs/s`,
    data: { values },
    mark: { type: "line" },
    encoding: {
      x: { field: "timeS", type: "quantitative", title: "time (s)" },
      y: {
        field: "fraction",
        type: "quantitative",
        title: "fraction of KV blocks",
        scale: { domain: [0, 1] },
      },
      color: { field: "policy", type: "nominal" },
      strokeDash: { field: "what", type: "nominal" },
    },
  };
}

export function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"]/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] as string,
  );
}

function table(runs: readonly ReportRun[]): string {
  const extraKeys = [...new Set(runs.flatMap((r) => Object.keys(r.extra ?? {})))];
  const head = [
    "run",
    "jobs/s",
    "done",
    "mean JCT",
    "p50",
    "p90",
    "p95",
    "p99",
    "throughput",
    "hit ratio",
    ...extraKeys,
  ];
  const rows = runs.map((r) => [
    r.label,
    r.jps.toString(),
    `${r.completed}/${r.programs}`,
    ...[r.jct.mean, r.jct.p50, r.jct.p90, r.jct.p95, r.jct.p99].map((x) => x.toFixed(1)),
    r.throughputJps.toFixed(4),
    r.hitRatio.toFixed(3),
    ...extraKeys.map((k) => String(r.extra?.[k] ?? "")),
  ]);
  const cells = (xs: readonly string[], tag: string) =>
    xs.map((x) => `<${tag}>${escapeHtml(x)}</${tag}>`).join("");
  return `<table><thead><tr>${cells(head, "th")}</tr></thead><tbody>${rows
    .map((r) => `<tr>${cells(r, "td")}</tr>`)
    .join("\n")}</tbody></table>`;
}

/** A self-contained HTML page: settings, a results table and SVG charts rendered headlessly with Vega-Lite. */
export async function renderReportHtml(input: ReportInput): Promise<string> {
  const loads = [...new Set(input.runs.map((r) => r.jps))].sort((a, b) => a - b);
  const heaviest = input.runs.filter((r) => r.jps === loads[loads.length - 1]);
  const charts: string[] = [];
  if (loads.length > 1) charts.push(await renderSvg(jctVsLoad(input.runs)));
  charts.push(await renderSvg(jctCdf(heaviest)));
  if (heaviest.some((r) => (r.kvUsage ?? []).length > 0)) charts.push(await renderSvg(kvTimeline(heaviest)));
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(input.title)}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.chart { margin: 1rem 0; }
</style></head><body>
<h1>${escapeHtml(input.title)}</h1>
<ul>${input.settings.map((s) => `<li>${escapeHtml(s)}</li>`).join("")}</ul>
${table(input.runs)}
${charts.map((svg) => `<div class="chart">${svg}</div>`).join("\n")}
</body></html>
`;
}
