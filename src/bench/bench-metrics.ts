/**
 * A replay's records -> the run's metrics, in the JSON shape `continuum bench --json` prints and
 * `--out` saves (the saved file adds every program's result, for CDFs and recorder checks).
 */
import { readFileSync } from "node:fs";
import { z } from "zod";
import { mean, summarize } from "../analysis/stats.js";
import type { ProgramStatus, ReplayRecords } from "./replay/replay-runner.js";

export interface Percentiles {
  mean: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  /** how many values (0: none measured, every statistic 0) */
  count: number;
}

export interface ProgramResult {
  /** the id sent as job_id / program_id */
  id: string;
  trace_id: string;
  status: ProgramStatus;
  turns: number;
  turns_done: number;
  arrival_s: number;
  start_s: number | null;
  end_s: number | null;
  /** first request sent -> last response received; completed programs only */
  jct_s: number | null;
  error: string | null;
  /** what the failure said (server message, timeout...) */
  error_message?: string | null;
}

export interface BenchRun extends RunInfo {
  /** programs started */
  programs: number;
  /** programs in the schedule (started or not) */
  scheduled: number;
  completed: number;
  failed: number;
  abandoned: number;
  not_started: number;
  /** s, completed programs */
  jct: Percentiles;
  /** completed programs per second of makespan */
  throughput_jps: number;
  /** first request sent -> last response received, over all programs */
  makespan_s: number;
  /** s, first content chunk of streamed requests */
  ttft: Percentiles;
  /** s, request sent -> response complete, successful requests */
  turn_latency: Percentiles;
  requests: number;
  prompt_tokens: number;
  cached_tokens: number;
  completion_tokens: number;
  /** cached_tokens / prompt_tokens (0 when the server reports no cached tokens) */
  cached_token_ratio: number;
  /** whether the server reported cached tokens at all */
  cached_tokens_reported: boolean;
  /** cached / prompt tokens over programs' second and later turns: how much of a returning turn was reused */
  later_turns_cached_ratio: number;
  /** mean |trace prompt tokens - server-reported prompt_tokens|; null when none was reported */
  prompt_tokens_mae: number | null;
  /** mean (server-reported - trace) prompt tokens */
  prompt_tokens_bias: number | null;
  /** mean |client's count - server's count|: the client tokenizer's error */
  tokenizer_mae: number | null;
  /** mean |trace output tokens - completion_tokens| */
  completion_tokens_mae: number | null;
  /** failed requests and tools by kind */
  errors: Record<string, number>;
  /** tool calls and their mean duration */
  tool_calls: number;
  tool_mean_s: number;
  wall_s: number;
  /** every program (in saved files; left out of --json) */
  program_results?: ProgramResult[];
}

export interface BenchFile {
  runs: BenchRun[];
}

function percentiles(xs: readonly number[]): Percentiles {
  const s = summarize(xs);
  return { mean: s.mean, p50: s.p50, p90: s.p90, p95: s.p95, p99: s.p99, count: s.count };
}

/** What identifies a run: where it went and what was asked for. */
export interface RunInfo {
  label: string;
  url: string;
  api: string;
  model: string | null;
  /** the arrival rate asked for */
  jps: number;
  seed: number;
  /** lines describing the run (workload, scaling, tokenizer...) */
  settings: string[];
}

export function summarizeReplay(info: RunInfo, records: ReplayRecords): BenchRun {
  const programs = records.programs;
  const count = (status: ProgramStatus) => programs.filter((p) => p.status === status).length;
  const done = programs.filter((p) => p.status === "completed");
  const jcts = done.map((p) => p.endS! - p.startS!);
  const starts = programs.flatMap((p) => (p.startS === null ? [] : [p.startS]));
  const ends = programs.flatMap((p) => (p.endS === null ? [] : [p.endS]));
  const makespan = starts.length > 0 && ends.length > 0 ? Math.max(...ends) - Math.min(...starts) : 0;

  const ok = records.requests.filter((r) => r.error === null);
  const promptTokens = ok.reduce((s, r) => s + (r.serverPromptTokens ?? 0), 0);
  const cachedTokens = ok.reduce((s, r) => s + (r.cachedTokens ?? 0), 0);
  const later = ok.filter((r) => r.turn > 0);
  const laterPrompt = later.reduce((s, r) => s + (r.serverPromptTokens ?? 0), 0);
  const laterCached = later.reduce((s, r) => s + (r.cachedTokens ?? 0), 0);
  const withPrompt = ok.filter((r) => r.serverPromptTokens !== null);
  const withCompletion = ok.filter((r) => r.completionTokens !== null);
  const orNull = (xs: readonly number[]) => (xs.length === 0 ? null : mean(xs));

  const errors: Record<string, number> = {};
  for (const r of records.requests) if (r.error !== null) errors[r.error] = (errors[r.error] ?? 0) + 1;
  for (const t of records.tools)
    if (t.error !== null) errors["tool_failed"] = (errors["tool_failed"] ?? 0) + 1;

  return {
    ...info,
    programs: programs.length - count("not_started"),
    scheduled: programs.length,
    completed: done.length,
    failed: count("failed"),
    abandoned: count("abandoned"),
    not_started: count("not_started"),
    jct: percentiles(jcts),
    throughput_jps: makespan > 0 ? done.length / makespan : 0,
    makespan_s: makespan,
    ttft: percentiles(ok.flatMap((r) => (r.ttftS === null ? [] : [r.ttftS]))),
    turn_latency: percentiles(ok.map((r) => r.doneS - r.sentS)),
    requests: records.requests.length,
    prompt_tokens: promptTokens,
    cached_tokens: cachedTokens,
    completion_tokens: ok.reduce((s, r) => s + (r.completionTokens ?? 0), 0),
    cached_token_ratio: promptTokens > 0 ? cachedTokens / promptTokens : 0,
    cached_tokens_reported: ok.some((r) => r.cachedTokens !== null),
    later_turns_cached_ratio: laterPrompt > 0 ? laterCached / laterPrompt : 0,
    prompt_tokens_mae: orNull(withPrompt.map((r) => Math.abs(r.targetPromptTokens - r.serverPromptTokens!))),
    prompt_tokens_bias: orNull(withPrompt.map((r) => r.serverPromptTokens! - r.targetPromptTokens)),
    tokenizer_mae: orNull(withPrompt.map((r) => Math.abs(r.clientPromptTokens - r.serverPromptTokens!))),
    completion_tokens_mae: orNull(
      withCompletion.map((r) => Math.abs(r.targetOutputTokens - r.completionTokens!)),
    ),
    errors,
    tool_calls: records.tools.length,
    tool_mean_s: mean(records.tools.map((t) => t.durationS)),
    wall_s: records.wallS,
    program_results: programs.map((p) => ({
      id: p.id,
      trace_id: p.traceId,
      status: p.status,
      turns: p.turns,
      turns_done: p.turnsDone,
      arrival_s: p.arrivalS,
      start_s: p.startS,
      end_s: p.endS,
      jct_s: p.status === "completed" ? p.endS! - p.startS! : null,
      error: p.error,
      error_message: p.errorMessage,
    })),
  };
}

/** The run without its per-program results (what --json prints). */
export function withoutPrograms(run: BenchRun): BenchRun {
  const { program_results: _omit, ...rest } = run;
  return rest;
}

/** JCTs of the completed programs (for CDFs). */
export function completedJcts(run: BenchRun): number[] {
  return (run.program_results ?? []).flatMap((p) => (p.jct_s === null ? [] : [p.jct_s]));
}

const percentilesSchema = z.object({
  mean: z.number(),
  p50: z.number(),
  p90: z.number(),
  p95: z.number(),
  p99: z.number(),
  count: z.number().optional(),
});

const runSchema = z
  .object({
    label: z.string(),
    url: z.string(),
    jps: z.number(),
    programs: z.number(),
    completed: z.number(),
    jct: percentilesSchema,
    throughput_jps: z.number(),
    ttft: percentilesSchema,
    cached_token_ratio: z.number(),
    errors: z.record(z.string(), z.number()),
    program_results: z
      .array(
        z
          .object({ id: z.string(), status: z.string(), turns: z.number(), jct_s: z.number().nullable() })
          .loose(),
      )
      .optional(),
  })
  .loose();

const fileSchema = z.object({ runs: z.array(runSchema).min(1) });

/** Runs saved with --out (or printed with --json); checks the fields reports and checks read. */
export function parseBenchFile(text: string, origin: string): BenchRun[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`${origin}: not JSON (${(error as Error).message})`);
  }
  const parsed = fileSchema.safeParse(json);
  if (!parsed.success)
    throw new Error(`${origin}: not a bench result file: ${z.prettifyError(parsed.error)}`);
  return parsed.data.runs as unknown as BenchRun[];
}

export function loadBenchFile(path: string): BenchRun[] {
  return parseBenchFile(readFileSync(path, "utf8"), path);
}
