/**
 * AgentX's view of a closed-loop run as text and as an HTML page: TPGS against P90 interactivity, the
 * chart people read InferenceX by (one line per policy through its concurrencies, the floor ruled), then
 * every measured point's table.
 */
import type { TopLevelSpec } from "vega-lite";
import type { AgentxMetrics } from "./agentx-metrics.js";
import { renderSvg } from "./report-charts.js";
import { escapeHtml } from "./report-html.js";
import { seriesStyles } from "./series-style.js";
import { formatTextTable } from "./text-table.js";

/** One measured point: a policy at a concurrency. */
export interface AgentxPoint {
  readonly policy: string;
  readonly metrics: AgentxMetrics;
}

const f = (x: number, digits = 1) => x.toFixed(digits);
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const triple = (p: { p50: number; p90: number; p99: number }, digits: number) =>
  `${f(p.p50, digits)}/${f(p.p90, digits)}/${f(p.p99, digits)}`;

/** The table of points: TPGS, interactivity against the floor, TTFT and ITL percentiles, hits, overflow. */
export function formatAgentxTable(points: readonly AgentxPoint[]): string {
  const unit = points[0]?.metrics.device_kind === "cpu-core" ? "tok/core-s" : "TPGS";
  const rows = points.map(({ policy, metrics: m }) => [
    policy,
    String(m.concurrency),
    f(m.tpgs, 0),
    `${f(m.interactivity.p90)}${m.meets_floor ? "" : " <floor"}`,
    f(m.interactivity.p50),
    triple(m.ttft_s, 2),
    triple({ p50: m.itl_s.p50 * 1000, p90: m.itl_s.p90 * 1000, p99: m.itl_s.p99 * 1000 }, 0),
    `${pct(m.prefix_hit)}/${pct(m.theoretical_prefix_hit)}`,
    `${pct(m.context_overflow.request_rate)}${m.context_overflow.invalid ? " !" : ""}`,
    `${m.requests.completed}`,
    m.session_jct_s.sessions > 0 ? `${m.session_jct_s.sessions}: ${f(m.session_jct_s.mean, 0)}` : "-",
  ]);
  return formatTextTable(
    [
      "policy",
      "conc",
      unit,
      "interact p90",
      "p50",
      "TTFT s p50/p90/p99",
      "ITL ms p50/p90/p99",
      "hit achieved/theory",
      "overflow",
      "requests",
      "sessions: JCT s",
    ],
    rows,
  );
}

/** Notes under the table: the floor, what "!" means, where overflow made a run invalid. */
export function agentxNotes(points: readonly AgentxPoint[]): string[] {
  const floor = points[0]?.metrics.interactivity_floor ?? 0;
  const invalid = points.filter((p) => p.metrics.context_overflow.invalid);
  return [
    `interactivity: output tokens/s per user, p90 = the rate 90% of requests reach; floor ${floor} ("<floor": below it)`,
    ...(invalid.length > 0
      ? [
          `! more than 1% of requests overflowed the model's context (AgentX calls such a run invalid): ${[...new Set(invalid.map((p) => p.policy))].join(", ")}; overflowing requests are not served and count in no token total`,
        ]
      : []),
  ];
}

function tpgsChart(points: readonly AgentxPoint[], floor: number): TopLevelSpec {
  const styles = seriesStyles([...new Set(points.map((p) => p.policy))]);
  const domain = [...styles.keys()];
  const values = [...styles.values()];
  const unit = points[0]?.metrics.device_kind === "cpu-core" ? "per CPU core" : "per GPU";
  const data = points.map((p) => ({
    series: p.policy,
    x: p.metrics.interactivity.p90,
    y: p.metrics.tpgs,
    concurrency: p.metrics.concurrency,
  }));
  const x = {
    field: "x",
    type: "quantitative",
    title: "P90 interactivity (output tokens/s per user)",
  } as const;
  const y = { field: "y", type: "quantitative", title: `total tokens/s ${unit} (cached included)` } as const;
  const legend = { title: null, orient: "bottom", columns: 3, labelLimit: 0 } as const;
  const color = {
    field: "series",
    type: "nominal",
    scale: { domain, range: values.map((s) => s.colour) },
    legend,
  } as const;
  return {
    width: 560,
    height: 320,
    title: "Throughput against interactivity (one point per concurrency)",
    layer: [
      {
        data: { values: [{ x: floor }] },
        mark: { type: "rule", color: "#ea580c", strokeDash: [4, 3], strokeWidth: 1.5 },
        encoding: { x: { field: "x", type: "quantitative" } },
      },
      {
        data: { values: data },
        mark: { type: "line", strokeWidth: 2 },
        encoding: { x, y, color, order: { field: "concurrency", type: "quantitative" } },
      },
      {
        data: { values: data },
        mark: { type: "point", filled: true, size: 70 },
        encoding: {
          x,
          y,
          color,
          shape: {
            field: "series",
            type: "nominal",
            scale: { domain, range: values.map((s) => s.marker) },
            legend,
          },
          tooltip: [
            { field: "series" },
            { field: "concurrency" },
            { field: "x", format: ".1f" },
            { field: "y", format: ".0f" },
          ],
        },
      },
      {
        data: { values: data },
        mark: { type: "text", dy: -9, fontSize: 10, color: "#444" },
        encoding: { x, y, text: { field: "concurrency" } },
      },
    ],
  } as TopLevelSpec;
}

/** The report page: the chart, the table, the notes, the settings. */
export async function renderAgentxReportHtml(input: {
  readonly title: string;
  readonly settings: readonly string[];
  readonly points: readonly AgentxPoint[];
  /** a summary under the chart (capacity: the largest concurrency meeting the floor per policy) */
  readonly summary?: readonly string[];
}): Promise<string> {
  const floor = input.points[0]?.metrics.interactivity_floor ?? 0;
  const svg = await renderSvg(tpgsChart(input.points, floor));
  const rows = input.points
    .map(({ policy, metrics: m }) => {
      const cells = [
        escapeHtml(policy),
        String(m.concurrency),
        f(m.tpgs, 0),
        f(m.interactivity.p90),
        f(m.interactivity.p50),
        triple(m.ttft_s, 2),
        triple({ p50: m.itl_s.p50 * 1000, p90: m.itl_s.p90 * 1000, p99: m.itl_s.p99 * 1000 }, 0),
        pct(m.prefix_hit),
        pct(m.theoretical_prefix_hit),
        pct(m.context_overflow.request_rate),
        String(m.requests.completed),
        m.session_jct_s.sessions > 0 ? f(m.session_jct_s.mean, 0) : "-",
      ];
      return `<tr class="${m.meets_floor ? "" : "below"}">${cells.map((c) => `<td>${c}</td>`).join("")}</tr>`;
    })
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(input.title)}</title>
<style>body{font-family:sans-serif;margin:24px;max-width:1100px}table{border-collapse:collapse}td,th{padding:4px 8px;border-bottom:1px solid #ddd;text-align:right}td:first-child,th:first-child{text-align:left}.below td{color:#9a3412}.note{font-size:0.85rem;color:#555}</style>
</head><body>
<h1>${escapeHtml(input.title)}</h1>
${svg}
<p class="note">The dashed line is the interactivity floor (${floor} output tokens/s per user): a point left of it misses the floor. Each point is one closed-loop run, labelled with its concurrency.</p>
${(input.summary ?? []).map((s) => `<p>${escapeHtml(s)}</p>`).join("\n")}
<h2>Table</h2>
<table><tr><th>policy</th><th>concurrency</th><th>TPGS</th><th>interactivity p90</th><th>p50</th><th>TTFT s p50/p90/p99</th><th>ITL ms p50/p90/p99</th><th>prefix hit</th><th>theoretical</th><th>context overflow</th><th>requests</th><th>session JCT s</th></tr>
${rows}
</table>
${agentxNotes(input.points)
  .map((n) => `<p class="note">${escapeHtml(n)}</p>`)
  .join("\n")}
<h2>Settings</h2>
<ul>${input.settings.map((s) => `<li>${escapeHtml(s)}</li>`).join("")}</ul>
</body></html>
`;
}

/** The stable JSON of a closed-loop point: AgentX's headline fields first, then every metric. */
export function agentxJson(point: AgentxPoint) {
  const { concurrency, tpgs, meets_floor, prefix_hit, theoretical_prefix_hit, ...rest } = point.metrics;
  return {
    policy: point.policy,
    concurrency,
    tpgs,
    p90_interactivity: rest.interactivity.p90,
    meets_floor,
    ttft_p90_s: rest.ttft_s.p90,
    prefix_hit,
    theoretical_prefix_hit,
    ...rest,
  };
}
