import { readFile } from "node:fs/promises";
import { z } from "zod";
import { formatIssues } from "./format-issues.js";

/** One LLM request of an agent program and the tool call that follows it. */
export interface TraceTurn {
  /** prompt tokens of this request (the whole conversation so far) */
  input: number;
  /** leading prompt tokens identical to the previous request's prompt + output (KV-reusable) */
  cached: number;
  output: number;
  /** tool run after this response; null on the last turn */
  tool: string | null;
  /** wall time of that tool call; null on the last turn */
  toolS: number | null;
}

export interface TraceProgram {
  id: string;
  source?: string;
  turns: TraceTurn[];
}

/** A tool time as trace files record it: in seconds, to a tenth of a millisecond, never negative. */
export function roundToolS(s: number): number {
  return Math.max(0, Math.round(s * 1e4) / 1e4);
}

const turnSchema = z.object({
  input: z.int().nonnegative(),
  cached: z.int().nonnegative(),
  output: z.int().nonnegative(),
  tool: z.string().nullable().optional(),
  tool_s: z.number().nonnegative().nullable().optional(),
});

const programSchema = z
  .object({
    id: z.string().min(1),
    source: z.string().optional(),
    turns: z.array(turnSchema).min(1),
  })
  .superRefine((program, ctx) => {
    const last = program.turns.length - 1;
    program.turns.forEach((turn, i) => {
      if (turn.cached > turn.input) {
        ctx.addIssue({
          code: "custom",
          path: ["turns", i, "cached"],
          message: `cached (${turn.cached}) exceeds input (${turn.input})`,
        });
      }
      if (i === last) {
        for (const field of ["tool", "tool_s"] as const) {
          if (turn[field] !== null && turn[field] !== undefined) {
            ctx.addIssue({
              code: "custom",
              path: ["turns", i, field],
              message: "must be null on the last turn (the program ends there)",
            });
          }
        }
      } else if (typeof turn.tool_s !== "number") {
        ctx.addIssue({
          code: "custom",
          path: ["turns", i, "tool_s"],
          message: "must be a number of seconds on every turn but the last",
        });
      }
    });
  });

/**
 * Programs of a trace file, one JSON object per line (docs/workloads.md). Blank lines are skipped.
 * A turn before the last without a tool name gets "unknown". Throws on the first invalid line, naming
 * the line number and the offending fields.
 */
export function parseTraceJsonl(text: string, origin = "trace"): TraceProgram[] {
  const programs: TraceProgram[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.trim();
    if (line === "") continue;
    const where = `${origin}:${i + 1}`;
    let json: unknown;
    try {
      json = JSON.parse(line);
    } catch (err) {
      throw new Error(`${where}: invalid JSON (${(err as Error).message})`);
    }
    const parsed = programSchema.safeParse(json);
    if (!parsed.success) {
      const id = (json as { id?: unknown } | null)?.id;
      const label = typeof id === "string" ? ` (program ${id})` : "";
      throw new Error(`${where}${label}: ${formatIssues(parsed.error.issues)}`);
    }
    const { id, source, turns } = parsed.data;
    const last = turns.length - 1;
    programs.push({
      id,
      ...(source === undefined ? {} : { source }),
      turns: turns.map((t, j) => ({
        input: t.input,
        cached: t.cached,
        output: t.output,
        tool: j === last ? null : (t.tool ?? "unknown"),
        toolS: j === last ? null : t.tool_s!,
      })),
    });
  }
  return programs;
}

export async function loadTrace(path: string): Promise<TraceProgram[]> {
  return parseTraceJsonl(await readFile(path, "utf8"), path);
}

/** The trace file text for programs; `parseTraceJsonl` reads it back to equal programs. */
export function serializeTraceJsonl(programs: readonly TraceProgram[]): string {
  return programs
    .map((p) =>
      JSON.stringify({
        id: p.id,
        ...(p.source === undefined ? {} : { source: p.source }),
        turns: p.turns.map((t) => ({
          input: t.input,
          cached: t.cached,
          output: t.output,
          tool: t.tool,
          tool_s: t.toolS,
        })),
      }),
    )
    .map((line) => `${line}\n`)
    .join("");
}
