import { max, mean, quantileSorted, std } from "./stats.js";
import type { TraceProgram } from "./trace.js";

export interface TraceStats {
  programs: number;
  turns: { mean: number; std: number; median: number; max: number };
  /** per request */
  promptTokens: { mean: number; max: number };
  outputTokens: { mean: number };
  /** per program: the last turn's prompt + output, the context the program ends with */
  finalContextTokens: { mean: number; std: number };
  /** per tool call */
  toolS: { mean: number; std: number; p50: number; p90: number; p99: number; max: number };
  /** Σcached / Σinput: the share of prompt tokens a KV cache could have kept */
  reusableFraction: number;
  /** tool name -> share of tool calls, most used first */
  toolShares: Record<string, number>;
}

export function traceStats(programs: readonly TraceProgram[]): TraceStats {
  const turnCounts = programs.map((p) => p.turns.length);
  const sortedTurnCounts = [...turnCounts].sort((a, b) => a - b);
  const turns = programs.flatMap((p) => p.turns);
  const inputs = turns.map((t) => t.input);
  const toolTimes = turns.flatMap((t) => (t.toolS === null ? [] : [t.toolS])).sort((a, b) => a - b);
  const finalContexts = programs.flatMap((p) => {
    const last = p.turns.at(-1);
    return last ? [last.input + last.output] : [];
  });

  const toolCounts = new Map<string, number>();
  for (const t of turns) if (t.tool !== null) toolCounts.set(t.tool, (toolCounts.get(t.tool) ?? 0) + 1);
  const toolCalls = [...toolCounts.values()].reduce((a, b) => a + b, 0);
  const toolShares = Object.fromEntries(
    [...toolCounts.entries()].sort((a, b) => b[1] - a[1]).map(([name, n]) => [name, n / toolCalls]),
  );

  const inputSum = inputs.reduce((a, b) => a + b, 0);
  const cachedSum = turns.reduce((a, t) => a + t.cached, 0);
  return {
    programs: programs.length,
    turns: {
      mean: mean(turnCounts),
      std: std(turnCounts),
      median: quantileSorted(sortedTurnCounts, 0.5),
      max: max(turnCounts),
    },
    promptTokens: { mean: mean(inputs), max: max(inputs) },
    outputTokens: { mean: mean(turns.map((t) => t.output)) },
    finalContextTokens: { mean: mean(finalContexts), std: std(finalContexts) },
    toolS: {
      mean: mean(toolTimes),
      std: std(toolTimes),
      p50: quantileSorted(toolTimes, 0.5),
      p90: quantileSorted(toolTimes, 0.9),
      p99: quantileSorted(toolTimes, 0.99),
      max: max(toolTimes),
    },
    reusableFraction: inputSum === 0 ? 0 : cachedSum / inputSum,
    toolShares,
  };
}
