import { formatTextTable } from "../analysis/text-table.js";
import type { TraceStats } from "./trace-stats.js";

const tokens = (n: number) => String(Math.round(n));
const seconds = (s: number) => s.toFixed(2);
const percent = (share: number) => `${(share * 100).toFixed(1)}%`;

/** traceStats as text: the trace's shape, then the `top` most called tools and their times. */
export function formatTraceStats(s: TraceStats, top: number): string {
  const rows: [string, string][] = [
    ["programs", String(s.programs)],
    [
      "turns per program",
      `${s.turns.mean.toFixed(1)} ± ${s.turns.std.toFixed(1)} (median ${s.turns.median}, max ${s.turns.max}; ${s.turns.total} in all)`,
    ],
    [
      "prompt tokens per turn",
      `${tokens(s.promptTokens.mean)} ± ${tokens(s.promptTokens.std)} (max ${s.promptTokens.max})`,
    ],
    [
      "output tokens per turn",
      `${tokens(s.outputTokens.mean)} ± ${tokens(s.outputTokens.std)} (max ${s.outputTokens.max})`,
    ],
    [
      "final context per program",
      `${tokens(s.finalContextTokens.mean)} ± ${tokens(s.finalContextTokens.std)} tokens (max ${s.finalContextTokens.max})`,
    ],
    ["reusable share", `${percent(s.reusableFraction)} of prompt tokens (Σcached / Σinput)`],
    [
      "tool time",
      `${seconds(s.toolS.mean)} ± ${seconds(s.toolS.std)} s (p50 ${seconds(s.toolS.p50)}, p90 ${seconds(s.toolS.p90)}, p99 ${seconds(s.toolS.p99)}, max ${seconds(s.toolS.max)})`,
    ],
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  const lines = rows.map(([label, value]) => `${label.padEnd(width)}  ${value}`);
  if (s.tools.length === 0) return lines.join("\n");
  const shown = s.tools.slice(0, top);
  const table = formatTextTable(
    ["tool", "calls", "share", "mean s", "sd s", "p50 s", "p99 s"],
    shown.map((t) => [
      t.tool,
      String(t.calls),
      percent(t.share),
      seconds(t.meanS),
      seconds(t.stdS),
      seconds(t.p50S),
      seconds(t.p99S),
    ]),
  );
  const rest = s.tools.slice(top);
  const more =
    rest.length === 0
      ? []
      : [`(${rest.length} more tools: ${percent(rest.reduce((sum, t) => sum + t.share, 0))} of calls)`];
  return [...lines, "", table, ...more].join("\n");
}
