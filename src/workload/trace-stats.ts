import { max, mean, quantileSorted, std } from "./stats.js";
import type { TraceProgram } from "./trace.js";

/** The calls of one tool and how long they ran. */
export interface ToolStats {
  tool: string;
  calls: number;
  /** of every tool call */
  share: number;
  meanS: number;
  stdS: number;
  p50S: number;
  p99S: number;
}

export interface TraceStats {
  programs: number;
  /** per program; `total` over the trace */
  turns: { total: number; mean: number; std: number; median: number; max: number };
  /** per request */
  promptTokens: { mean: number; std: number; max: number };
  outputTokens: { mean: number; std: number; max: number };
  /** per program: the last turn's prompt + output, the context the program ends with */
  finalContextTokens: { mean: number; std: number; max: number };
  /** per tool call */
  toolS: { mean: number; std: number; p50: number; p90: number; p99: number; max: number };
  /** Σcached / Σinput: the share of prompt tokens a KV cache could have kept */
  reusableFraction: number;
  /** each tool name, most called first */
  tools: ToolStats[];
}

function toolStats(toolTimesS: ReadonlyMap<string, number[]>, toolCalls: number): ToolStats[] {
  return [...toolTimesS.entries()]
    .sort((a, b) => b[1].length - a[1].length)
    .map(([tool, times]) => {
      const sorted = [...times].sort((a, b) => a - b);
      return {
        tool,
        calls: times.length,
        share: times.length / toolCalls,
        meanS: mean(times),
        stdS: std(times),
        p50S: quantileSorted(sorted, 0.5),
        p99S: quantileSorted(sorted, 0.99),
      };
    });
}

export function traceStats(programs: readonly TraceProgram[]): TraceStats {
  const turnCounts = programs.map((p) => p.turns.length);
  const sortedTurnCounts = [...turnCounts].sort((a, b) => a - b);
  const turns = programs.flatMap((p) => p.turns);
  const inputs = turns.map((t) => t.input);
  const outputs = turns.map((t) => t.output);
  const toolTimes = turns.flatMap((t) => (t.toolS === null ? [] : [t.toolS])).sort((a, b) => a - b);
  const finalContexts = programs.flatMap((p) => {
    const last = p.turns.at(-1);
    return last ? [last.input + last.output] : [];
  });

  const toolTimesS = new Map<string, number[]>();
  for (const t of turns) {
    if (t.tool === null || t.toolS === null) continue;
    const times = toolTimesS.get(t.tool);
    if (times) times.push(t.toolS);
    else toolTimesS.set(t.tool, [t.toolS]);
  }

  const inputSum = inputs.reduce((a, b) => a + b, 0);
  const cachedSum = turns.reduce((a, t) => a + t.cached, 0);
  return {
    programs: programs.length,
    turns: {
      total: turns.length,
      mean: mean(turnCounts),
      std: std(turnCounts),
      median: quantileSorted(sortedTurnCounts, 0.5),
      max: max(turnCounts),
    },
    promptTokens: { mean: mean(inputs), std: std(inputs), max: max(inputs) },
    outputTokens: { mean: mean(outputs), std: std(outputs), max: max(outputs) },
    finalContextTokens: { mean: mean(finalContexts), std: std(finalContexts), max: max(finalContexts) },
    toolS: {
      mean: mean(toolTimes),
      std: std(toolTimes),
      p50: quantileSorted(toolTimes, 0.5),
      p90: quantileSorted(toolTimes, 0.9),
      p99: quantileSorted(toolTimes, 0.99),
      max: max(toolTimes),
    },
    reusableFraction: inputSum === 0 ? 0 : cachedSum / inputSum,
    tools: toolStats(toolTimesS, toolTimes.length),
  };
}
