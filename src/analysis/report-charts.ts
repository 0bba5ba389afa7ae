/**
 * The report's charts as Vega-Lite specs rendered headlessly to SVG: JCT against load, the JCT
 * distribution, and the KV cache as one small chart per run. One colour, marker and dash per series.
 */
import * as vega from "vega";
import { compile, type TopLevelSpec } from "vega-lite";
import { atX, type JctMetric, type LoadCeiling, loadsOf, type ReportRun } from "./report-run.js";
import type { SeriesStyle } from "./series-style.js";

const WIDTH = 560;
const HEIGHT = 300;
const KV_BUCKETS = 120;

export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(compile(spec).spec), { renderer: "none" });
  const svg = await view.toSVG();
  view.finalize();
  return svg;
}

/** Colour, marker and dash scales shared by every chart, so one policy looks the same everywhere. */
function seriesScales(styles: Map<string, SeriesStyle>) {
  const domain = [...styles.keys()];
  const values = [...styles.values()];
  const legend = { title: null, labelLimit: 0, orient: "bottom", columns: 2, symbolStrokeWidth: 2 } as const;
  return {
    color: {
      field: "series",
      type: "nominal",
      scale: { domain, range: values.map((s) => s.colour) },
      legend,
    },
    shape: {
      field: "series",
      type: "nominal",
      scale: { domain, range: values.map((s) => s.marker) },
      legend,
    },
    strokeDash: {
      field: "series",
      type: "nominal",
      scale: { domain, range: values.map((s) => [...s.dash]) },
      legend,
    },
  } as const;
}

export function jctVsLoad(
  runs: readonly ReportRun[],
  styles: Map<string, SeriesStyle>,
  metric: JctMetric,
  xTitle: string,
  ceiling?: LoadCeiling,
): TopLevelSpec {
  const scales = seriesScales(styles);
  const loads = loadsOf(runs);
  const heaviest = loads[loads.length - 1] ?? 0;
  const x = {
    field: "x",
    type: "quantitative",
    title: xTitle,
    axis: { values: loads, format: ".6~g", labelOverlap: "greedy" },
  } as const;
  const y = { field: "jct", type: "quantitative", title: `${metric} JCT (s)` } as const;
  return {
    width: WIDTH,
    height: HEIGHT,
    title: `${metric === "mean" ? "Mean" : metric} job completion time vs ${xTitle.replace(/ \(.*\)$/, "")}`,
    data: { values: runs.map((r) => ({ series: r.label, x: r.jps, jct: r.jct[metric] })) },
    layer: [
      ...(ceiling && heaviest > ceiling.jps ? pastCeilingLayers(ceiling, heaviest) : []),
      {
        mark: { type: "line", strokeWidth: 2 },
        encoding: { x, y, color: scales.color, strokeDash: scales.strokeDash },
      },
      {
        mark: { type: "point", filled: true, size: 80, opacity: 1 },
        encoding: { x, y, color: scales.color, shape: scales.shape },
      },
    ],
  } as TopLevelSpec;
}

/** Loads past the simulator's ceiling shaded, the ceiling ruled and named (drawn under the series). */
function pastCeilingLayers(ceiling: LoadCeiling, heaviest: number) {
  const x = { field: "x", type: "quantitative" } as const;
  return [
    {
      data: { values: [{ x: ceiling.jps, x2: heaviest }] },
      mark: { type: "rect", color: "#ea580c", opacity: 0.1 },
      encoding: { x, x2: { field: "x2" } },
    },
    {
      data: { values: [{ x: ceiling.jps }] },
      mark: { type: "rule", color: "#ea580c", strokeDash: [4, 3], strokeWidth: 1.5 },
      encoding: { x },
    },
    {
      data: {
        values: [{ x: ceiling.jps, text: `simulator's ceiling ${ceiling.jps.toPrecision(3)} jobs/s ⚠` }],
      },
      // left of the rule, at the top: the heaviest loads' long JCTs are to its right
      mark: { type: "text", align: "right", baseline: "top", dx: -4, dy: 4, color: "#9a3412", fontSize: 11 },
      encoding: { x, y: { value: 0 }, text: { field: "text" } },
    },
  ];
}

export function jctCdf(
  runs: readonly ReportRun[],
  styles: Map<string, SeriesStyle>,
  xTitle: string,
): TopLevelSpec {
  const scales = seriesScales(styles);
  const values = runs.flatMap((r) => {
    const sorted = [...r.jcts].sort((a, b) => a - b);
    return sorted.map((jct, i) => ({ series: r.label, jct, fraction: (i + 1) / sorted.length }));
  });
  return {
    width: WIDTH,
    height: HEIGHT,
    title: `Distribution of job completion times${atX(xTitle, runs[0]?.jps ?? 0)}`,
    data: { values },
    mark: { type: "line", interpolate: "step-after", strokeWidth: 2 },
    encoding: {
      x: { field: "jct", type: "quantitative", title: "job completion time (s)" },
      y: { field: "fraction", type: "quantitative", title: "fraction of finished programs" },
      color: scales.color,
      strokeDash: scales.strokeDash,
    },
  } as TopLevelSpec;
}

/** Mean of each of `buckets` equal time slices: the step-by-step samples are too noisy to read. */
export function smoothUsage(
  samples: readonly { timeS: number; used: number; pinned: number }[],
  buckets = KV_BUCKETS,
): { timeS: number; used: number; pinned: number }[] {
  if (samples.length <= buckets) return [...samples];
  const start = (samples[0] as { timeS: number }).timeS;
  const span = (samples[samples.length - 1] as { timeS: number }).timeS - start || 1;
  const sums = Array.from({ length: buckets }, () => ({ n: 0, timeS: 0, used: 0, pinned: 0 }));
  for (const s of samples) {
    const b = sums[
      Math.min(buckets - 1, Math.floor(((s.timeS - start) / span) * buckets))
    ] as (typeof sums)[0];
    b.n++;
    b.timeS += s.timeS;
    b.used += s.used;
    b.pinned += s.pinned;
  }
  return sums
    .filter((b) => b.n > 0)
    .map((b) => ({ timeS: b.timeS / b.n, used: b.used / b.n, pinned: b.pinned / b.n }));
}

export function kvSmallMultiples(runs: readonly ReportRun[], xTitle: string): TopLevelSpec {
  const values = runs.flatMap((r) =>
    smoothUsage(r.kvUsage ?? []).flatMap((s) => [
      { series: r.label, timeS: s.timeS, fraction: s.used, what: "in use (running and pinned)" },
      { series: r.label, timeS: s.timeS, fraction: s.pinned, what: "pinned for a program in a tool call" },
    ]),
  );
  return {
    title: `KV cache blocks over the run${atX(xTitle, runs[0]?.jps ?? 0)}, one panel per run (mean per 1/${KV_BUCKETS} of the run)`,
    data: { values },
    facet: {
      field: "series",
      type: "nominal",
      title: null,
      header: { labelLimit: 0, labelFontSize: 12 },
      sort: runs.map((r) => r.label),
    },
    columns: 3,
    spec: {
      width: 240,
      height: 120,
      mark: { type: "line", strokeWidth: 1.5 },
      encoding: {
        x: { field: "timeS", type: "quantitative", title: "time (s)" },
        y: { field: "fraction", type: "quantitative", title: "share of blocks", scale: { domain: [0, 1] } },
        color: {
          field: "what",
          type: "nominal",
          scale: { range: ["#0072B2", "#D55E00"] },
          legend: { title: null, orient: "top", labelLimit: 0 },
        },
      },
    },
  } as TopLevelSpec;
}
