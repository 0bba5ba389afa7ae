import { detectLogFormat } from "../../analysis/recorder/log-format.js";
import { isAnonymousProgramId } from "../../core/program.js";
import type { RecorderEvent } from "../../core/recorder/events.js";
import { readEventLog } from "../../core/recorder/read-event-log.js";
import { UNKNOWN_TOOL } from "../../core/tools/tool-call-tracker.js";
import { roundToolS, type TraceProgram, type TraceTurn } from "../trace.js";

/** What a record held that the trace leaves out. */
export interface RecordSkips {
  /** requests sent without a program id: each was a one-request program of its own */
  anonymousRequests: number;
  /** requests the client aborted: no turn, their time falls into the gap between the turns around them */
  abortedRequests: number;
  /** side requests of a program (a title, a summary), which the server ran beside its turns: no turn */
  sideRequests: number;
  /** programs cut off by the end of the log: a request of theirs neither departed nor was aborted */
  unfinishedPrograms: number;
  /** programs whose every request was aborted */
  programsWithoutTurns: number;
  /** turns whose program's next request arrived before they departed (overlapping requests): tool_s 0 */
  overlappingTurns: number;
  /** turns after a program's first whose arrival carries no reusable prefix (an older log): cached assumed */
  assumedReuse: number;
}

export interface RecordTrace {
  programs: TraceProgram[];
  skips: RecordSkips;
}

interface RecordedRequest {
  arrivalS: number;
  /** the scheduler's measure of its prompt's reusable prefix (its arrival's); null where the log has none */
  reusableTokens: number | null;
  /** prompt tokens at its first admission */
  promptTokens: number | null;
  departure: { timeS: number; outputTokens: number; tool: string | null; side: boolean } | null;
  aborted: boolean;
}

/**
 * The trace of a scheduler event log (`serve --record`, `simulate --record`): per program, its requests
 * in arrival order, one turn each. `input` is the prompt at the request's first admission, `output` what
 * it generated. `tool_s` is the next request's arrival minus this one's departure: the time the client
 * took between turns, its tool and its own overhead together. The tool is the one the scheduler read in
 * the turn's output (its departure's `tool`; UNKNOWN_TOOL where it read none, or in a log written before
 * departures named it). `cached` is the scheduler's measure of the reusable prefix, recorded with the
 * arrival: the leading prompt tokens identical to the previous turn's prompt + output, in whole KV blocks,
 * whether or not the cache still held them (hits depend on the policy that served), capped at `input`. A
 * log written before arrivals carried it has no such measure, so there `cached` assumes an append-only
 * conversation: min(input, previous input + previous output), which credits an agent that edits its
 * history with more reuse than it had.
 */
export async function recordToTrace(
  events: AsyncIterable<RecorderEvent> | Iterable<RecorderEvent>,
): Promise<RecordTrace> {
  const skips: RecordSkips = {
    anonymousRequests: 0,
    abortedRequests: 0,
    sideRequests: 0,
    unfinishedPrograms: 0,
    programsWithoutTurns: 0,
    overlappingTurns: 0,
    assumedReuse: 0,
  };
  const byProgram = new Map<string, RecordedRequest[]>();
  const inFlight = new Map<string, RecordedRequest>();
  for await (const event of events) {
    const key = `${event.programId}\u0000${event.requestId}`;
    if (event.kind === "arrival") {
      if (isAnonymousProgramId(event.programId)) {
        skips.anonymousRequests++;
        continue;
      }
      const request: RecordedRequest = {
        arrivalS: event.timeS,
        reusableTokens: event.reusableTokens ?? null,
        promptTokens: null,
        departure: null,
        aborted: false,
      };
      inFlight.set(key, request);
      const requests = byProgram.get(event.programId);
      if (requests) requests.push(request);
      else byProgram.set(event.programId, [request]);
      continue;
    }
    // Events of a request whose arrival the log does not hold (an anonymous one) are not looked at.
    const request = inFlight.get(key);
    if (!request) continue;
    if (event.kind === "waiting_to_running") {
      request.promptTokens ??= event.promptTokens;
    } else if (event.kind === "departure") {
      if (request.promptTokens === null) {
        throw new Error(
          `request ${event.requestId} of program ${event.programId} departed without an admission: the log is not whole`,
        );
      }
      request.departure = {
        timeS: event.timeS,
        outputTokens: event.outputTokens,
        tool: event.tool ?? null,
        side: event.side === true,
      };
      if (event.side) skips.sideRequests++;
      inFlight.delete(key);
    } else if (event.kind === "aborted") {
      request.aborted = true;
      skips.abortedRequests++;
      inFlight.delete(key);
    }
  }

  const programs: TraceProgram[] = [];
  for (const [id, requests] of byProgram) {
    if (requests.some((r) => r.departure === null && !r.aborted)) {
      skips.unfinishedPrograms++;
      continue;
    }
    const served = requests
      .filter((r) => r.departure !== null && !r.departure.side)
      .sort((a, b) => a.arrivalS - b.arrivalS);
    if (served.length === 0) {
      skips.programsWithoutTurns++;
      continue;
    }
    const turns = served.map((request, i): TraceTurn => {
      const input = request.promptTokens!;
      const previous = served[i - 1];
      if (previous && request.reusableTokens === null) skips.assumedReuse++;
      const cached = previous
        ? Math.min(input, request.reusableTokens ?? previous.promptTokens! + previous.departure!.outputTokens)
        : 0;
      const next = served[i + 1];
      if (!next) return { input, cached, output: request.departure!.outputTokens, tool: null, toolS: null };
      const gapS = next.arrivalS - request.departure!.timeS;
      if (gapS < 0) skips.overlappingTurns++;
      return {
        input,
        cached,
        output: request.departure!.outputTokens,
        tool: request.departure!.tool ?? UNKNOWN_TOOL,
        toolS: roundToolS(gapS),
      };
    });
    programs.push({ id, turns });
  }
  return { programs, skips };
}

/** recordToTrace of a log file of ours; the authors' fork's `scheduler_timestamps` records no outputs. */
export async function recordFileToTrace(path: string): Promise<RecordTrace> {
  if ((await detectLogFormat(path)) !== "jsonl") {
    throw new Error(
      `${path}: not a scheduler event log (its first line is no recorder event; \`continuum serve --record\` and \`simulate --record\` write one). The authors' fork's scheduler_timestamps cannot be converted: it records no output lengths`,
    );
  }
  return recordToTrace(readEventLog(path));
}
