/**
 * The capacity report: one self-contained HTML page whose chart answers "how much load does each policy
 * sustain, and how far is that from what the hardware could do?" — sustainable load per policy as bars on
 * a jobs/s axis, the two ceilings as lines, and beside each bar (outside the plot, where no line runs) its
 * value and its ratios to vllm and to the best baseline; the table after.
 */
import { escapeHtml } from "./report-html.js";
import { seriesStyles } from "./series-style.js";

export interface CapacityRow {
  readonly policy: string;
  readonly sustainable_jps: number;
  readonly light_jct_s: number;
  readonly jct_at_ref_s: number;
  readonly p99_jct_at_ref_s: number;
  /** the p99 and the longest wait for a program's first token there */
  readonly p99_first_turn_ttft_at_ref_s: number;
  readonly max_first_turn_ttft_at_ref_s: number;
  /** the longest a program waited there, its turns' waits summed */
  readonly max_program_wait_at_ref_s: number;
}

export interface CapacityReportInput {
  readonly title: string;
  readonly settings: readonly string[];
  readonly rows: readonly CapacityRow[];
  readonly boundJps: number;
  /** the ceiling with decode batches only as large as the KV pool holds */
  readonly kvBoundJps: number;
  readonly refJps: number;
  /** the policies the others are compared with (the best of them is one ratio's denominator) */
  readonly baselines: readonly string[];
}

/** The reference every reader expects a ratio against. */
const REFERENCE = "vllm";

/** Each policy's sustainable load over `reference`'s (NaN when it was not measured or sustains nothing). */
export function ratiosTo(rows: readonly CapacityRow[], reference: number): number[] {
  return rows.map((r) => (reference > 0 ? r.sustainable_jps / reference : Number.NaN));
}

/** The best baseline: the baseline that sustains the most, or null when none was measured. */
export function bestBaseline(rows: readonly CapacityRow[], baselines: readonly string[]): CapacityRow | null {
  let best: CapacityRow | null = null;
  for (const r of rows) {
    if (baselines.includes(r.policy) && (best === null || r.sustainable_jps > best.sustainable_jps)) best = r;
  }
  return best;
}

/** Round tick values from 0 to the first at or past `max`: 1, 2 or 5 times a power of ten apart, about `count` of them. */
export function axisTicks(max: number, count = 5): number[] {
  if (!(max > 0)) return [0];
  const raw = max / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = ([1, 2, 5, 10].find((m) => m * magnitude >= raw) as number) * magnitude;
  const ticks = [0];
  while ((ticks[ticks.length - 1] as number) < max * (1 - 1e-9))
    ticks.push(Number((ticks.length * step).toPrecision(12)));
  return ticks;
}

/** A ratio cell: "-" where the reference was not measured or sustains nothing. */
export const fmtRatio = (ratio: number, times = "×") =>
  Number.isFinite(ratio) ? `${ratio.toFixed(2)}${times}` : "-";

export function renderCapacityHtml(input: CapacityReportInput): string {
  const barH = 24;
  const gap = 10;
  const left = 250;
  const plotW = 400;
  const labelW = 330;
  const top = 12;
  const width = left + plotW + labelW;
  const ticks = axisTicks(Math.max(input.boundJps, ...input.rows.map((r) => r.sustainable_jps)) * 1.02);
  const scaleMax = ticks[ticks.length - 1] as number;
  const x = (v: number) => left + (v / scaleMax) * plotW;
  const plotBottom = top + input.rows.length * (barH + gap);
  const height = plotBottom + 78;
  const reference = input.rows.find((r) => r.policy === REFERENCE) ?? null;
  const best = bestBaseline(input.rows, input.baselines);
  const vsReference = ratiosTo(input.rows, reference?.sustainable_jps ?? 0);
  const vsBest = ratiosTo(input.rows, best?.sustainable_jps ?? 0);
  const pastKv = (r: CapacityRow) => r.sustainable_jps > input.kvBoundJps;
  const styles = seriesStyles(input.rows.map((r) => r.policy));
  const bars = input.rows
    .map((r, i) => {
      const y = top + i * (barH + gap);
      const baseline = input.baselines.includes(r.policy);
      const ratios = [
        ...(reference && r !== reference ? [`${fmtRatio(vsReference[i] as number)} ${REFERENCE}`] : []),
        ...(best && r !== best ? [`${fmtRatio(vsBest[i] as number)} best baseline`] : []),
      ];
      return [
        `<text x="${left - 8}" y="${y + barH * 0.68}" text-anchor="end" class="name">${escapeHtml(r.policy)}${baseline ? " (baseline)" : ""}</text>`,
        `<rect x="${left}" y="${y}" width="${Math.max(1, x(r.sustainable_jps) - left)}" height="${barH}" fill="${styles.get(r.policy)?.colour}"${baseline ? ' fill-opacity="0.55"' : ""}/>`,
        `<text x="${left + plotW + 12}" y="${y + barH * 0.68}" class="value">${r.sustainable_jps.toPrecision(3)} jobs/s${ratios.length > 0 ? ` · ${ratios.join(" · ")}` : ""}${pastKv(r) ? " ⚠" : ""}</text>`,
      ].join("");
    })
    .join("\n");
  const axis = ticks
    .map(
      (t) =>
        `<line x1="${x(t)}" y1="${top - 4}" x2="${x(t)}" y2="${plotBottom}" class="grid"/><text x="${x(t)}" y="${plotBottom + 16}" text-anchor="middle" class="tick">${t}</text>`,
    )
    .join("\n");
  const legendY = plotBottom + 58;
  const svg = `<svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="sustainable load per policy, jobs/s">
<style>.name{font:13px sans-serif}.value,.tick,.legend{font:12px sans-serif;fill:#333}.axis-title{font:12px sans-serif;fill:#333;font-weight:600}.grid{stroke:#e5e7eb}.bound{stroke:#111;stroke-dasharray:5 4;stroke-width:1.5}.kv{stroke:#777;stroke-dasharray:2 3;stroke-width:1.5}</style>
${axis}
${bars}
<line x1="${x(input.boundJps)}" y1="${top - 8}" x2="${x(input.boundJps)}" y2="${plotBottom}" class="bound"/>
<line x1="${x(input.kvBoundJps)}" y1="${top - 8}" x2="${x(input.kvBoundJps)}" y2="${plotBottom}" class="kv"/>
<line x1="${left}" y1="${plotBottom}" x2="${left + plotW}" y2="${plotBottom}" stroke="#333"/>
<text x="${left + plotW / 2}" y="${plotBottom + 34}" text-anchor="middle" class="axis-title">sustainable load (jobs/s)</text>
<line x1="${left}" y1="${legendY - 4}" x2="${left + 24}" y2="${legendY - 4}" class="bound"/>
<text x="${left + 30}" y="${legendY}" class="legend">physical ceiling ${input.boundJps.toPrecision(3)} jobs/s</text>
<line x1="${left + 250}" y1="${legendY - 4}" x2="${left + 274}" y2="${legendY - 4}" class="kv"/>
<text x="${left + 280}" y="${legendY}" class="legend">with decode batches the KV pool holds ${input.kvBoundJps.toPrecision(3)} jobs/s</text>
</svg>
<p class="note">Sustainable load: the largest arrival rate with mean JCT within the SLO (jobs/s). One colour per policy, baselines paler; beside each bar its ratio to ${REFERENCE} and to the best baseline${best ? ` (${escapeHtml(best.policy)})` : ""}. The dashed line is the physical ceiling (no prefill repeated, decode in full batches), the dotted one the same with decode batches only as large as the KV pool holds at the workload's mean context.${input.rows.some(pastKv) ? " ⚠ past the KV-limited ceiling: no steady state sustains that load; the run ended before its backlog showed in the mean JCT (more --programs give the steady-state figure)." : ""}</p>`;
  const rows = input.rows
    .map(
      (r, i) =>
        `<tr><td>${escapeHtml(r.policy)}${pastKv(r) ? " ⚠" : ""}</td><td>${r.sustainable_jps.toFixed(4)}</td><td>${fmtRatio(vsReference[i] as number)}</td><td>${fmtRatio(vsBest[i] as number)}</td><td>${(r.sustainable_jps / input.boundJps).toFixed(2)}</td><td>${r.light_jct_s.toFixed(1)}</td><td>${r.jct_at_ref_s.toFixed(1)}</td><td>${r.p99_jct_at_ref_s.toFixed(1)}</td><td>${r.p99_first_turn_ttft_at_ref_s.toFixed(1)}</td><td>${r.max_first_turn_ttft_at_ref_s.toFixed(1)}</td><td>${r.max_program_wait_at_ref_s.toFixed(1)}</td></tr>`,
    )
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(input.title)}</title>
<style>body{font-family:sans-serif;margin:24px;max-width:1000px}table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}td:first-child,th:first-child{text-align:left;white-space:nowrap}.note{font-size:0.85rem;color:#555}</style>
</head><body>
<h1>${escapeHtml(input.title)}</h1>
${svg}
<h2>Table</h2>
<table><tr><th>policy</th><th>sustainable jobs/s</th><th>/ ${REFERENCE}</th><th>/ best baseline${best ? ` (${escapeHtml(best.policy)})` : ""}</th><th>/ ceiling</th><th>light-load mean JCT s</th><th>mean JCT at ${input.refJps.toFixed(4)} jobs/s</th><th>p99 JCT there</th><th>p99 first-turn wait there</th><th>longest first-turn wait there</th><th>longest program wait there (all its turns)</th></tr>
${rows}
</table>
<h2>Settings</h2>
<ul>${input.settings.map((s) => `<li>${escapeHtml(s)}</li>`).join("")}</ul>
</body></html>
`;
}
