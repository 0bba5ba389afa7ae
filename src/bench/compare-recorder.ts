/**
 * Cross-checks a bench run against the server's `--record` export of the same run: every program
 * the bench completed must appear in the export with as many finished requests as it sent turns,
 * and its JCT as the server saw it (first arrival -> last departure) must agree with the client's
 * (first request sent -> last response received) within a tolerance for network, HTTP and
 * tokenization overheads. The server's span lies inside the client's, so the client's is the larger.
 */

import { readForkLog } from "../analysis/recorder/fork-log.js";
import { detectLogFormat } from "../analysis/recorder/log-format.js";
import type { LogEntry } from "../analysis/recorder/recorder-report.js";
import { type Summary, summarize } from "../analysis/stats.js";
import { readEventLog } from "../core/recorder/read-event-log.js";
import type { BenchRun } from "./bench-metrics.js";

export interface RecorderCheckOptions {
  /** absolute JCT tolerance, s (default 0.5) */
  readonly toleranceS?: number;
  /** relative JCT tolerance on top, fraction of the bench JCT (default 0.05) */
  readonly toleranceRel?: number;
}

export interface ProgramCheck {
  readonly id: string;
  readonly benchTurns: number;
  /** departures in the export (0 when the program is missing) */
  readonly recorderTurns: number;
  readonly benchJctS: number;
  readonly recorderJctS: number | null;
  readonly problem: string | null;
}

export interface RecorderCheck {
  readonly ok: boolean;
  /** programs the bench completed */
  readonly checked: number;
  /** of those, found in the export with matching turns and JCT */
  readonly matched: number;
  readonly problems: string[];
  /** bench JCT - recorder JCT over the programs found in the export */
  readonly jctDiffS: Summary;
  /** programs in the export */
  readonly recorderPrograms: number;
  readonly programs: ProgramCheck[];
}

interface Span {
  firstArrivalS: number;
  lastDepartureS: number;
  departures: number;
}

/** The check over recorder entries already read (any order within a program is fine). */
export function checkRecorderEntries(
  run: BenchRun,
  entries: Iterable<LogEntry>,
  options: RecorderCheckOptions = {},
): RecorderCheck {
  const toleranceS = options.toleranceS ?? 0.5;
  const toleranceRel = options.toleranceRel ?? 0.05;
  const spans = new Map<string, Span>();
  for (const entry of entries) {
    if (entry.kind !== "arrival" && entry.kind !== "departure") continue;
    let span = spans.get(entry.programId);
    if (!span) {
      span = {
        firstArrivalS: Number.POSITIVE_INFINITY,
        lastDepartureS: Number.NEGATIVE_INFINITY,
        departures: 0,
      };
      spans.set(entry.programId, span);
    }
    if (entry.kind === "arrival") span.firstArrivalS = Math.min(span.firstArrivalS, entry.timeS);
    else {
      span.lastDepartureS = Math.max(span.lastDepartureS, entry.timeS);
      span.departures++;
    }
  }
  if (run.program_results === undefined)
    throw new Error(`run ${run.label} has no per-program results (save it with --out)`);
  const programs: ProgramCheck[] = [];
  const diffs: number[] = [];
  for (const p of run.program_results) {
    if (p.status !== "completed" || p.jct_s === null) continue;
    const span = spans.get(p.id);
    const recorderJct =
      span && Number.isFinite(span.firstArrivalS) && Number.isFinite(span.lastDepartureS)
        ? span.lastDepartureS - span.firstArrivalS
        : null;
    const recorderTurns = span?.departures ?? 0;
    let problem: string | null = null;
    if (!span) problem = "not in the recorder export";
    else if (recorderTurns !== p.turns)
      problem = `${p.turns} turns sent but ${recorderTurns} finished requests recorded`;
    else if (recorderJct === null) problem = "no complete arrival/departure span recorded";
    else {
      const allowed = toleranceS + toleranceRel * p.jct_s;
      const diff = p.jct_s - recorderJct;
      if (Math.abs(diff) > allowed)
        problem = `JCT ${p.jct_s.toFixed(3)} s (bench) vs ${recorderJct.toFixed(3)} s (recorder): off by more than ${allowed.toFixed(3)} s`;
    }
    if (recorderJct !== null) diffs.push(p.jct_s - recorderJct);
    programs.push({
      id: p.id,
      benchTurns: p.turns,
      recorderTurns,
      benchJctS: p.jct_s,
      recorderJctS: recorderJct,
      problem,
    });
  }
  const problems = programs.flatMap((c) => (c.problem === null ? [] : [`${c.id}: ${c.problem}`]));
  if (programs.length === 0) problems.push("the run completed no program: nothing to check");
  return {
    ok: problems.length === 0,
    checked: programs.length,
    matched: programs.filter((c) => c.problem === null).length,
    problems,
    jctDiffS: summarize(diffs),
    recorderPrograms: spans.size,
    programs,
  };
}

/** Reads a recorder export (our JSONL or the fork's scheduler_timestamps) and checks the run against it. */
export async function compareWithRecorder(
  run: BenchRun,
  recorderPath: string,
  options: RecorderCheckOptions = {},
): Promise<RecorderCheck> {
  const format = await detectLogFormat(recorderPath);
  const entries: LogEntry[] = [];
  if (format === "fork") entries.push(...(await readForkLog(recorderPath)));
  else
    for await (const event of readEventLog(recorderPath)) {
      entries.push(
        event.kind === "waiting_to_running" || event.kind === "evicted_to_running"
          ? {
              kind: event.kind,
              programId: event.programId,
              requestId: event.requestId,
              timeS: event.timeS,
              promptTokens: event.promptTokens,
              hitTokens: event.hitTokens,
            }
          : { kind: event.kind, programId: event.programId, requestId: event.requestId, timeS: event.timeS },
      );
    }
  return checkRecorderEntries(run, entries, options);
}

export function formatRecorderCheck(check: RecorderCheck, label: string): string {
  const d = check.jctDiffS;
  const lines = [
    `${label}: ${check.matched}/${check.checked} completed programs match the recorder export ` +
      `(${check.recorderPrograms} programs recorded)`,
    `  JCT bench - recorder: mean ${d.mean.toFixed(3)} s, p50 ${d.p50.toFixed(3)} s, ` +
      `min ${d.min.toFixed(3)} s, max ${d.max.toFixed(3)} s`,
    ...check.problems.map((p) => `  mismatch: ${p}`),
  ];
  return lines.join("\n");
}
