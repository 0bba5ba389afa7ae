import type { TraceProgram, TraceTurn } from "../../workload/trace.js";
import { scaleTokens } from "../../workload/transforms.js";

/** The comparison's trace: programs cut to maxTurns, tokens scaled, tool times capped, fitting the model. */
export function prepareTrace(
  programs: readonly TraceProgram[],
  o: { maxTurns: number; tokenScale: number; maxToolS: number; maxContext: number },
): TraceProgram[] {
  const scaled = scaleTokens(programs, o.tokenScale);
  const out: TraceProgram[] = [];
  for (const program of scaled) {
    const turns: TraceTurn[] = [];
    for (const turn of program.turns) {
      if (turns.length >= o.maxTurns || turn.input + turn.output >= o.maxContext) break;
      turns.push({ ...turn, toolS: turn.toolS === null ? null : Math.min(turn.toolS, o.maxToolS) });
    }
    if (turns.length === 0) continue;
    const last = turns.length - 1;
    turns[last] = { ...turns[last]!, tool: null, toolS: null };
    out.push({ ...program, turns });
  }
  return out;
}
