import type { TraceProgram, TraceTurn } from "./trace.js";

function assertPositive(value: number, what: string) {
  if (!(Number.isFinite(value) && value > 0))
    throw new Error(`${what} must be a positive number, got ${value}`);
}

/**
 * Token counts times factor, rounded. Outputs keep at least one token, and a prompt's cached part
 * stays within the prompt and within what the previous request held (prompt + output).
 */
export function scaleTokens(programs: readonly TraceProgram[], factor: number): TraceProgram[] {
  assertPositive(factor, "token scale");
  return programs.map((program) => {
    const turns: TraceTurn[] = [];
    for (const turn of program.turns) {
      const prev = turns.at(-1);
      const input = Math.round(turn.input * factor);
      const held = prev ? prev.input + prev.output : 0;
      turns.push({
        ...turn,
        input,
        cached: Math.min(Math.round(turn.cached * factor), input, held),
        output: Math.max(1, Math.round(turn.output * factor)),
      });
    }
    return { ...program, turns };
  });
}

export function scaleToolTime(programs: readonly TraceProgram[], factor: number): TraceProgram[] {
  if (!(Number.isFinite(factor) && factor >= 0))
    throw new Error(`tool time scale must be ≥ 0, got ${factor}`);
  return programs.map((program) => ({
    ...program,
    turns: program.turns.map((t) => ({ ...t, toolS: t.toolS === null ? null : t.toolS * factor })),
  }));
}

/**
 * Each program's turns `times` times over with token counts scaled by 1/times (the CacheTTL paper's
 * Fig. 14: more turns per program at about the same final context). Later passes continue the same
 * conversation: their prompts extend the context the previous pass ended with, which stays cached.
 * The tool call between two passes is the program's last one (or "unknown" taking 0 s if it has none).
 */
export function repeatTurns(programs: readonly TraceProgram[], times: number): TraceProgram[] {
  if (!Number.isInteger(times) || times < 1)
    throw new Error(`turn repeat must be an integer ≥ 1, got ${times}`);
  if (times === 1) return programs.map((p) => ({ ...p, turns: p.turns.map((t) => ({ ...t })) }));
  return scaleTokens(programs, 1 / times).map((program) => {
    const pass = program.turns;
    const last = pass.at(-1)!;
    const passContext = last.input + last.output;
    const bridge = pass.findLast((t) => t.tool !== null) ?? { tool: "unknown", toolS: 0 };
    const turns: TraceTurn[] = [];
    for (let r = 0; r < times; r++) {
      const offset = r * passContext;
      for (const turn of pass) {
        turns.push({ ...turn, input: offset + turn.input, cached: offset + turn.cached });
      }
      if (r < times - 1)
        turns[turns.length - 1] = { ...turns.at(-1)!, tool: bridge.tool, toolS: bridge.toolS };
    }
    return { ...program, turns };
  });
}

export interface TruncateResult {
  programs: TraceProgram[];
  /** programs whose first request already does not fit */
  droppedPrograms: number;
  /** programs cut short at their first request that does not fit */
  truncatedPrograms: number;
  /** turns removed, counting those of dropped programs */
  droppedTurns: number;
}

/**
 * Programs as a model with a maxTokens context could run them: a request fits when its prompt plus
 * output does. A program ends before its first request that does not fit (as an agent stops when it
 * hits the context limit); a program whose first request does not fit is dropped.
 */
export function truncateContext(programs: readonly TraceProgram[], maxTokens: number): TruncateResult {
  assertPositive(maxTokens, "context size");
  const kept: TraceProgram[] = [];
  let droppedPrograms = 0;
  let truncatedPrograms = 0;
  let droppedTurns = 0;
  for (const program of programs) {
    const firstTooLong = program.turns.findIndex((t) => t.input + t.output > maxTokens);
    if (firstTooLong === -1) {
      kept.push(program);
      continue;
    }
    droppedTurns += program.turns.length - firstTooLong;
    if (firstTooLong === 0) {
      droppedPrograms++;
      continue;
    }
    truncatedPrograms++;
    const turns = program.turns.slice(0, firstTooLong);
    turns[firstTooLong - 1] = { ...turns[firstTooLong - 1]!, tool: null, toolS: null };
    kept.push({ ...program, turns });
  }
  return { programs: kept, droppedPrograms, truncatedPrograms, droppedTurns };
}
