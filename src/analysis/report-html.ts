/**
 * The HTML report of simulate, sweep, reproduce, bench and analyze: one self-contained page that answers
 * "which policy finishes programs faster, by how much, and where does it break?" first — the JCT-vs-load
 * chart (one colour, marker and dash per policy) with each policy's ratio to the baseline beside it —
 * then the distributions, the KV cache of each policy as small multiples, the full table and the settings.
 */
import { jctCdf, jctVsLoad, kvSmallMultiples, renderSvg } from "./report-charts.js";
import {
  ceilingWarning,
  type JctMetric,
  type LoadCeiling,
  loadsOf,
  pastCeiling,
  type ReportRun,
  unfinished,
  unique,
} from "./report-run.js";
import { type SeriesStyle, seriesStyles } from "./series-style.js";

export type { JctMetric, LoadCeiling, ReportRun } from "./report-run.js";

export interface ReportInput {
  readonly title: string;
  /** one line per setting (hardware, workload, seed...) */
  readonly settings: readonly string[];
  readonly runs: readonly ReportRun[];
  /** the label every run is compared with; default `vllm` when present, else the first run's label */
  readonly baseline?: string;
  /** the headline chart's x axis; default "load (jobs/s)" */
  readonly xTitle?: string;
  /** a figure's panels, each with a baseline and an x axis of its own (keyed by the runs' group) */
  readonly panels?: ReadonlyMap<string, { readonly baseline?: string; readonly xTitle?: string }>;
  /** the JCT statistic of the headline chart and the ratios; default mean */
  readonly metric?: JctMetric;
  /** the simulator's ceilings for the runs' setup (simulate, sweep): loads past them are marked */
  readonly ceiling?: LoadCeiling;
}

/** Ratios within this distance of 1 are ties, neither a win nor a loss. */
const TIE = 0.02;

export function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"]/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] as string,
  );
}

function baselineFor(input: ReportInput, group: string, labels: readonly string[]): string {
  const wanted = input.panels?.get(group)?.baseline ?? input.baseline;
  if (wanted !== undefined && labels.includes(wanted)) return wanted;
  return labels.includes("vllm") ? "vllm" : (labels[0] as string);
}

/** A run's load in a table: its arrival rate, or "all programs" for a run without one (a batch, an analyzed log). */
const loadCell = (jps: number) => (jps === 0 ? "all programs" : String(jps));

const ratioClass = (ratio: number) => (ratio > 1 + TIE ? "win" : ratio < 1 - TIE ? "loss" : "tie");

/** Each run's ratio to the baseline at each load, wins and losses alike, beside the headline chart. */
function ratioTable(
  runs: readonly ReportRun[],
  baseline: string,
  metric: JctMetric,
  xTitle: string,
  swatches: Map<string, string>,
  ceiling: LoadCeiling | undefined,
): string {
  const loads = loadsOf(runs);
  const past = loads.filter((jps) => pastCeiling(ceiling, jps));
  const at = (label: string, jps: number) => runs.find((r) => r.label === label && r.jps === jps);
  const rows = unique(runs.map((r) => r.label)).map((label) => {
    const cells = loads.map((jps) => {
      const run = at(label, jps);
      const base = at(baseline, jps);
      if (!run || !base || !(run.jct[metric] > 0)) return "<td>-</td>";
      const ratio = base.jct[metric] / run.jct[metric];
      const mark = `${unfinished(run) ? "*" : ""}${pastCeiling(ceiling, jps) ? " ⚠" : ""}`;
      return `<td class="${label === baseline ? "tie" : ratioClass(ratio)}${pastCeiling(ceiling, jps) ? " past" : ""}">${ratio.toFixed(2)}×${mark}</td>`;
    });
    return `<tr><th>${swatches.get(label) ?? ""}${escapeHtml(label)}${label === baseline ? " (baseline)" : ""}</th>${cells.join("")}</tr>`;
  });
  const anyUnfinished = runs.some(unfinished);
  return `<table class="ratios"><caption>${escapeHtml(baseline)}'s ${metric} JCT ÷ each run's: above 1 finishes programs faster (green), below 1 slower (red), within ${TIE * 100}% a tie</caption>
<thead><tr><th>${escapeHtml(xTitle)}</th>${loads.map((l) => `<th${pastCeiling(ceiling, l) ? ' class="past"' : ""}>${loadCell(l)}${pastCeiling(ceiling, l) ? " ⚠" : ""}</th>`).join("")}</tr></thead>
<tbody>${rows.join("\n")}</tbody></table>${anyUnfinished ? `<p class="note">* some programs unfinished at the end of the run: its JCT covers the finished ones only.</p>` : ""}${ceiling && past.length > 0 ? `<p class="warning">⚠ ${escapeHtml(ceilingWarning(ceiling, past))}.</p>` : ""}`;
}

function fullTable(
  runs: readonly ReportRun[],
  swatches: Map<string, string>,
  ceiling: LoadCeiling | undefined,
): string {
  const extraKeys = unique(runs.flatMap((r) => Object.keys(r.extra ?? {})));
  const grouped = runs.some((r) => r.group !== undefined);
  const head = [
    ...(grouped ? ["panel"] : []),
    "run",
    "jobs/s",
    "done",
    "mean JCT (s)",
    "p50",
    "p90",
    "p95",
    "p99",
    "throughput (jobs/s)",
    "hit ratio",
    ...extraKeys,
  ];
  const rows = runs.map((r) => {
    const cells = [
      ...(grouped ? [r.group ?? ""] : []),
      r.label,
      `${loadCell(r.jps)}${pastCeiling(ceiling, r.jps) ? " ⚠ past the ceiling" : ""}`,
      `${r.completed}/${r.programs}`,
      ...[r.jct.mean, r.jct.p50, r.jct.p90, r.jct.p95, r.jct.p99].map((x) => x.toFixed(1)),
      r.throughputJps.toFixed(4),
      r.hitRatio.toFixed(3),
      ...extraKeys.map((k) => String(r.extra?.[k] ?? "")),
    ].map(escapeHtml);
    const runColumn = grouped ? 1 : 0;
    cells[runColumn] = `${swatches.get(r.label) ?? ""}${cells[runColumn]}`;
    return `<tr>${cells.map((c) => `<td>${c}</td>`).join("")}</tr>`;
  });
  return `<table class="runs"><thead><tr>${head.map((h) => `<th>${escapeHtml(h)}</th>`).join("")}</tr></thead><tbody>${rows.join("\n")}</tbody></table>`;
}

async function panel(
  input: ReportInput,
  group: string,
  runs: readonly ReportRun[],
  styles: Map<string, SeriesStyle>,
  swatches: Map<string, string>,
) {
  const metric = input.metric ?? "mean";
  const loads = loadsOf(runs);
  const labels = unique(runs.map((r) => r.label));
  const heaviest = runs.filter((r) => r.jps === loads[loads.length - 1]);
  const own = new Map([...styles].filter(([label]) => labels.includes(label)));
  const xTitle = input.panels?.get(group)?.xTitle ?? input.xTitle ?? "load (jobs/s)";
  const headline =
    loads.length > 1
      ? await renderSvg(jctVsLoad(runs, own, metric, xTitle, input.ceiling))
      : await renderSvg(jctCdf(heaviest, own, xTitle));
  const details: string[] = [];
  if (loads.length > 1) details.push(await renderSvg(jctCdf(heaviest, own, xTitle)));
  if (heaviest.some((r) => (r.kvUsage ?? []).length > 0))
    details.push(await renderSvg(kvSmallMultiples(heaviest, xTitle)));
  return `<section class="panel">${group ? `<h2>${escapeHtml(group)}</h2>` : ""}
<div class="headline"><div class="chart">${headline}</div>${ratioTable(runs, baselineFor(input, group, labels), metric, xTitle, swatches, input.ceiling)}</div>
${details.map((svg) => `<div class="chart">${svg}</div>`).join("\n")}
</section>`;
}

/** A self-contained HTML page: headline chart and ratios first, then distributions, KV, tables, settings. */
export async function renderReportHtml(input: ReportInput): Promise<string> {
  const styles = seriesStyles(input.runs.map((r) => r.label));
  const swatches = new Map(
    [...styles].map(([label, s]) => [label, `<span class="swatch" style="background:${s.colour}"></span>`]),
  );
  const groups = unique(input.runs.map((r) => r.group ?? ""));
  const panels: string[] = [];
  for (const group of groups) {
    panels.push(
      await panel(
        input,
        group,
        input.runs.filter((r) => (r.group ?? "") === group),
        styles,
        swatches,
      ),
    );
  }
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(input.title)}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; max-width: 1400px; }
h2 { margin-top: 2rem; font-size: 1.2rem; }
.headline { display: flex; flex-wrap: wrap; gap: 1.5rem; align-items: flex-start; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: right; }
th:first-child, td:first-child { text-align: left; white-space: nowrap; }
caption { caption-side: top; text-align: left; font-size: 0.85rem; color: #555; max-width: 28rem; padding-bottom: 0.3rem; }
.ratios td.win { background: #e3f4e6; } .ratios td.loss { background: #fbe3e1; } .ratios td.tie { color: #666; }
.swatch { display: inline-block; width: 0.8rem; height: 0.8rem; margin-right: 0.4rem; vertical-align: -0.1rem; border-radius: 2px; }
.note { font-size: 0.85rem; color: #555; }
.warning { font-size: 0.85rem; color: #9a3412; background: #fff7ed; border-left: 3px solid #ea580c; padding: 0.4rem 0.6rem; max-width: 40rem; }
.ratios th.past, .ratios td.past { outline: 2px dashed #ea580c; outline-offset: -3px; }
.chart { margin: 1rem 0; }
</style></head><body>
<h1>${escapeHtml(input.title)}</h1>
${panels.join("\n")}
<h2 id="all-runs">All runs</h2>
${fullTable(input.runs, swatches, input.ceiling)}
<h2>Settings</h2>
<ul>${input.settings.map((s) => `<li>${escapeHtml(s)}</li>`).join("")}</ul>
</body></html>
`;
}
