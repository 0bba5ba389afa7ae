import type { AgentTraceStats } from "./agent-trace-stats.js";

const int = (n: number) => String(Math.round(n));
const percent = (share: number) => `${(share * 100).toFixed(1)}%`;

/** agentTraceStats as text: sessions, turns, subagents, tokens and the theoretical prefix hit. */
export function formatAgentTraceStats(s: AgentTraceStats): string {
  const sub = s.subagents;
  const unknown = Object.entries(s.unknownFields);
  const rows: [string, string][] = [
    [
      "sessions",
      `${s.sessions} (${s.sessionsWithSubagents} with subagents, ${percent(s.sessionsWithSubagents / Math.max(1, s.sessions))})`,
    ],
    [
      "turns per session",
      `${s.turnsPerSession.mean.toFixed(1)} mean, median ${int(s.turnsPerSession.median)}, max ${s.turnsPerSession.max} (${s.turnsPerSession.total} in all)`,
    ],
    [
      "subagents",
      `${sub.total} (${sub.background} in the background, ${sub.nested} nested, ${sub.withoutCalls} without calls), ${sub.callsInSubagents} calls`,
    ],
    ["calls", `${s.calls} (sessions' turns and subagents' calls)`],
    [
      "input tokens per call",
      `${int(s.inputTokensPerCall.mean)} mean, median ${int(s.inputTokensPerCall.median)}, max ${s.inputTokensPerCall.max} (${s.inputTokensPerCall.total} in all)`,
    ],
    [
      "output tokens per call",
      `${int(s.outputTokensPerCall.mean)} mean, median ${int(s.outputTokensPerCall.median)}, max ${s.outputTokensPerCall.max} (${s.outputTokensPerCall.total} in all)`,
    ],
    [
      "peak context per session",
      `${int(s.peakContextPerSession.mean)} mean, median ${int(s.peakContextPerSession.median)}, max ${s.peakContextPerSession.max} tokens`,
    ],
    [
      "block ids",
      `${s.blockIds} (${s.blockSizes.join(", ")} tokens each)${s.callsWithShortHashIds > 0 ? `; ${s.callsWithShortHashIds} calls' ids cover less than their prompt` : ""}`,
    ],
    [
      "theoretical prefix hit",
      `${percent(s.theoreticalPrefixHit)} of input tokens (an infinite cache keyed by block ids)`,
    ],
    ...(unknown.length === 0
      ? []
      : ([["unknown fields (kept)", unknown.map(([field, n]) => `${field} (${n})`).join(", ")]] as [
          string,
          string,
        ][])),
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `${label.padEnd(width)}  ${value}`).join("\n");
}
