/**
 * The capacity report: one self-contained HTML page whose chart answers "how much load does each policy
 * sustain, and how far is that from what the hardware could do?" — sustainable load per policy as bars,
 * the physical ceiling as a line, each bar's ratio to the best baseline beside it; the table after.
 */
import { escapeHtml } from "./report-html.js";
import { seriesStyles } from "./series-style.js";

export interface CapacityRow {
  readonly policy: string;
  readonly sustainable_jps: number;
  readonly light_jct_s: number;
  readonly jct_at_ref_s: number;
  readonly p99_jct_at_ref_s: number;
}

export interface CapacityReportInput {
  readonly title: string;
  readonly settings: readonly string[];
  readonly rows: readonly CapacityRow[];
  readonly boundJps: number;
  /** the ceiling with decode batches only as large as the KV pool holds */
  readonly kvBoundJps: number;
  readonly refJps: number;
  /** the policies the others are compared with (the best of them is the ratio's denominator) */
  readonly baselines: readonly string[];
}

/** Each policy's sustainable load over the best baseline's (NaN when no baseline was measured). */
export function ratiosToBestBaseline(rows: readonly CapacityRow[], baselines: readonly string[]): number[] {
  const best = Math.max(0, ...rows.filter((r) => baselines.includes(r.policy)).map((r) => r.sustainable_jps));
  return rows.map((r) => (best > 0 ? r.sustainable_jps / best : Number.NaN));
}

export function renderCapacityHtml(input: CapacityReportInput): string {
  const width = 760;
  const barH = 26;
  const gap = 10;
  const left = 230;
  const right = 120;
  const top = 30;
  const plotW = width - left - right;
  const scaleMax = Math.max(input.boundJps, ...input.rows.map((r) => r.sustainable_jps)) * 1.05;
  const x = (v: number) => left + (v / scaleMax) * plotW;
  const height = top + input.rows.length * (barH + gap) + 10;
  const ratios = ratiosToBestBaseline(input.rows, input.baselines);
  const styles = seriesStyles(input.rows.map((r) => r.policy));
  const bars = input.rows
    .map((r, i) => {
      const y = top + i * (barH + gap);
      const baseline = input.baselines.includes(r.policy);
      const ratio = ratios[i] as number;
      const label = Number.isFinite(ratio) ? `${ratio.toFixed(2)}x best baseline` : "";
      return [
        `<text x="${left - 8}" y="${y + barH * 0.68}" text-anchor="end" class="name">${escapeHtml(r.policy)}${baseline ? " (baseline)" : ""}</text>`,
        `<rect x="${left}" y="${y}" width="${Math.max(1, x(r.sustainable_jps) - left)}" height="${barH}" fill="${styles.get(r.policy)?.colour}"${baseline ? ' fill-opacity="0.55"' : ""}/>`,
        `<text x="${x(r.sustainable_jps) + 6}" y="${y + barH * 0.68}" class="value">${r.sustainable_jps.toPrecision(3)} jobs/s ${label}</text>`,
      ].join("");
    })
    .join("\n");
  const bx = x(input.boundJps);
  const kx = x(input.kvBoundJps);
  const svg = `<svg viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="sustainable load per policy">
<style>.name{font:13px sans-serif}.value{font:12px sans-serif;fill:#333;paint-order:stroke;stroke:#fff;stroke-width:4px}.bound{stroke:#111;stroke-dasharray:5 4;stroke-width:1.5}.kv{stroke:#777;stroke-dasharray:2 3;stroke-width:1.5}</style>
<line x1="${bx}" y1="${top - 12}" x2="${bx}" y2="${height - 4}" class="bound"/>
<line x1="${kx}" y1="${top - 2}" x2="${kx}" y2="${height - 4}" class="kv"/>
${bars}
<text x="${bx}" y="${top - 16}" text-anchor="middle" class="value">physical ceiling ${input.boundJps.toPrecision(3)} jobs/s</text>
<text x="${kx}" y="${height - 6}" text-anchor="end" class="value">with batches the KV pool holds ${input.kvBoundJps.toPrecision(3)}</text>
</svg>
<p class="note">Sustainable load: the largest arrival rate with mean JCT within the SLO (jobs/s). One colour per policy, baselines paler; the dashed line is the physical ceiling (no prefill repeated, decode in full batches), the dotted one the same with decode batches only as large as the KV pool holds at the workload's mean context.</p>`;
  const rows = input.rows
    .map(
      (r, i) =>
        `<tr><td>${escapeHtml(r.policy)}</td><td>${r.sustainable_jps.toFixed(4)}</td><td>${Number.isFinite(ratios[i] as number) ? (ratios[i] as number).toFixed(2) : "-"}</td><td>${(r.sustainable_jps / input.boundJps).toFixed(2)}</td><td>${r.light_jct_s.toFixed(1)}</td><td>${r.jct_at_ref_s.toFixed(1)}</td><td>${r.p99_jct_at_ref_s.toFixed(1)}</td></tr>`,
    )
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(input.title)}</title>
<style>body{font-family:sans-serif;margin:24px;max-width:900px}table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}td:first-child,th:first-child{text-align:left;white-space:nowrap}.note{font-size:0.85rem;color:#555}</style>
</head><body>
<h1>${escapeHtml(input.title)}</h1>
${svg}
<h2>Table</h2>
<table><tr><th>policy</th><th>sustainable jobs/s</th><th>/ best baseline</th><th>/ ceiling</th><th>light-load mean JCT s</th><th>mean JCT at ${input.refJps.toFixed(4)} jobs/s</th><th>p99 JCT there</th></tr>
${rows}
</table>
<h2>Settings</h2>
<ul>${input.settings.map((s) => `<li>${escapeHtml(s)}</li>`).join("")}</ul>
</body></html>
`;
}
