import { basename } from "node:path";
import { isRecord } from "../../tool-calls/json-objects.js";
import { roundToolS, type TraceProgram, type TraceTurn } from "../trace.js";
import type { ImportOptions } from "./conversation.js";

/** A JSON object of a session log line. */
export type LogLine = Record<string, unknown>;

export const stringOr = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** Milliseconds of an ISO timestamp; NaN when absent or unreadable. */
export const timestampMs = (v: unknown): number => (typeof v === "string" ? Date.parse(v) : Number.NaN);

/** The larger of two times, either of which may be unknown (NaN). */
export const laterMs = (a: number, b: number): number =>
  Number.isNaN(a) ? b : Number.isNaN(b) ? a : Math.max(a, b);

export interface ParsedLog {
  /** the JSON objects of the file's lines, with their 1-based line numbers */
  lines: { n: number; line: LogLine }[];
  /** line numbers that are no JSON object */
  invalid: number[];
  /** number of the last non-blank line */
  lastLine: number;
}

/** Every line of a JSON Lines text parsed; blank lines skipped, lines that are no JSON object collected. */
export function parseJsonLines(text: string): ParsedLog {
  const lines: ParsedLog["lines"] = [];
  const invalid: number[] = [];
  let lastLine = 0;
  text.split("\n").forEach((raw, i) => {
    const trimmed = raw.trim();
    if (trimmed === "") return;
    lastLine = i + 1;
    try {
      const value: unknown = JSON.parse(trimmed);
      if (isRecord(value)) lines.push({ n: i + 1, line: value });
      else invalid.push(i + 1);
    } catch {
      invalid.push(i + 1);
    }
  });
  return { lines, invalid, lastLine };
}

/**
 * Throws for a line that is no JSON object, but for the file's last line: an agent appends to its log
 * while a session runs, so the last line of a live session may be cut short.
 */
export function requireWholeLines(log: ParsedLog): void {
  const bad = log.invalid.find((n) => n !== log.lastLine);
  if (bad !== undefined) throw new Error(`line ${bad}: not a JSON object`);
}

/** Token counts of one API response, as the provider reported them. */
export interface ResponseUsage {
  /** the whole prompt */
  input: number;
  /** prompt tokens the provider read from its cache */
  cacheRead: number;
  output: number;
}

/** One API response of a session, in the order the session made them. */
export interface SessionResponse {
  /** null when the log records the response without token counts */
  usage: ResponseUsage | null;
  /** the first tool call the response made; null: none */
  tool: string | null;
  /** when its request was sent (ms since the epoch); NaN when the log does not tell */
  startMs: number;
  /** when the response ended; NaN when the log does not tell */
  endMs: number;
}

/** The programs of one session file and what was left out of it. */
export interface SessionImport {
  programs: TraceProgram[];
  /** responses the log records without token counts: left out (their time counts as time between turns) */
  responsesWithoutUsage: number;
  /** sessions (or subagent sidechains) without a response that has token counts: no program */
  sessionsWithoutResponse: number;
}

/** Tool name of a turn whose response called no tool before the next request: a person answered. */
export const USER_TOOL = "user";

/**
 * The trace program of a session's responses, or null when none has token counts. A turn per response
 * with usage: `input` the whole prompt, `output` the generated tokens, `cached` the provider's cache read
 * bounded by what the previous turn held (its prompt + output; 0 on the first turn). `tool` the
 * response's first tool call, USER_TOOL when it made none; `tool_s` from its end to the next kept
 * response's request (0 when a time is missing). A response without usage is dropped: its time falls
 * into the tool time of the turn before it.
 */
export function responsesToProgram(
  id: string,
  source: string | undefined,
  responses: readonly SessionResponse[],
): { program: TraceProgram | null; withoutUsage: number } {
  const kept = responses.filter((r): r is SessionResponse & { usage: ResponseUsage } => r.usage !== null);
  const withoutUsage = responses.length - kept.length;
  if (kept.length === 0) return { program: null, withoutUsage };
  const turns: TraceTurn[] = [];
  kept.forEach((r, i) => {
    const prev = turns.at(-1);
    const held = prev ? prev.input + prev.output : 0;
    const next = kept[i + 1];
    const gapS = next === undefined ? Number.NaN : (next.startMs - r.endMs) / 1000;
    turns.push({
      input: r.usage.input,
      cached: Math.max(0, Math.min(r.usage.cacheRead, r.usage.input, held)),
      output: r.usage.output,
      tool: next === undefined ? null : (r.tool ?? USER_TOOL),
      toolS: next === undefined ? null : roundToolS(Number.isFinite(gapS) ? gapS : 0),
    });
  });
  return { program: { id, ...(source === undefined ? {} : { source }), turns }, withoutUsage };
}

/**
 * The import of a log holding one session: its program (id: the options', else the session id the log
 * names, else the file's name; source: the options', else `<agent> <version>`), or none.
 */
export function singleSessionImport(
  path: string,
  options: ImportOptions,
  session: { readonly id: string | undefined; readonly agent: string; readonly version: string | undefined },
  responses: readonly SessionResponse[],
): SessionImport {
  const id = options.id ?? session.id ?? basename(path).replace(/\.jsonl$/, "");
  const source = options.source ?? (session.version ? `${session.agent} ${session.version}` : session.agent);
  const { program, withoutUsage } = responsesToProgram(id, source, responses);
  return {
    programs: program === null ? [] : [program],
    responsesWithoutUsage: withoutUsage,
    sessionsWithoutResponse: program === null ? 1 : 0,
  };
}
