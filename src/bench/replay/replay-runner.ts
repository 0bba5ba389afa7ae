/**
 * Replays agent programs against an OpenAI-compatible server: programs start at their Poisson
 * arrival times; each sends its turns in order (the synthetic conversation of replay-conversation.ts),
 * with the program fields the CacheTTL fork's clients send, and runs its tool between turns. Stops
 * starting programs after `durationS` and abandons those still running `drainTimeoutS` later.
 */

import { setMaxListeners } from "node:events";
import { renderChatML } from "../../gguf/index.js";
import type { TraceProgram } from "../../workload/trace.js";
import { type ReplayApi, type ReplayHttpClient, ReplayRequestError } from "./replay-client.js";
import { type ObservationRole, ReplayConversation } from "./replay-conversation.js";
import type { TokenCounter } from "./replay-tokens.js";
import { AbandonedError, sleepMs, type ToolRunner } from "./replay-tools.js";

export interface ReplayOptions {
  readonly client: ReplayHttpClient;
  readonly api: ReplayApi;
  /** the `model` field; null leaves it out */
  readonly model: string | null;
  readonly programs: readonly TraceProgram[];
  /** start of each program, seconds after the run starts */
  readonly arrivalsS: readonly number[];
  readonly seed: number;
  readonly counter: TokenCounter;
  readonly tools: ToolRunner;
  readonly stream: boolean;
  readonly requestTimeoutS: number;
  /** stop starting programs this long after the start (default: start them all) */
  readonly durationS?: number | undefined;
  /** after durationS, how long running programs may take before they are abandoned */
  readonly drainTimeoutS: number;
  /** prepended to trace ids to form the program ids sent (unique per run) */
  readonly programPrefix?: string;
  readonly observationRole?: ObservationRole;
  /** more top-level body fields (sampling options a server needs) */
  readonly extraBody?: Readonly<Record<string, unknown>>;
  /** aborting it stops starting programs and abandons the running ones (Ctrl-C) */
  readonly stopSignal?: AbortSignal;
  /** called about every progressIntervalMs, and once at the end */
  readonly onProgress?: (progress: ReplayProgress) => void;
  readonly progressIntervalMs?: number;
}

export type ProgramStatus = "completed" | "failed" | "abandoned" | "not_started";

export interface ProgramRecord {
  /** the id sent as job_id / program_id */
  readonly id: string;
  readonly traceId: string;
  readonly turns: number;
  turnsDone: number;
  /** scheduled start, s after the run's start */
  readonly arrivalS: number;
  /** first request sent, s after the run's start (null: never started) */
  startS: number | null;
  /** last response received (completed programs) or the failure, s after the run's start */
  endS: number | null;
  status: ProgramStatus;
  /** error kind of a failed or abandoned program */
  error: string | null;
  errorMessage: string | null;
}

export interface RequestRecord {
  readonly programId: string;
  readonly turn: number;
  readonly sentS: number;
  readonly doneS: number;
  /** s from sending to the first content chunk (streams) */
  readonly ttftS: number | null;
  /** the trace's prompt tokens */
  readonly targetPromptTokens: number;
  /** the client's count of the prompt sent */
  readonly clientPromptTokens: number;
  readonly serverPromptTokens: number | null;
  readonly cachedTokens: number | null;
  readonly targetOutputTokens: number;
  readonly completionTokens: number | null;
  readonly error: string | null;
}

export interface ToolRecord {
  readonly programId: string;
  readonly turn: number;
  readonly tool: string | null;
  readonly durationS: number;
  readonly error: string | null;
}

export interface ReplayProgress {
  readonly elapsedS: number;
  readonly scheduled: number;
  readonly started: number;
  readonly completed: number;
  readonly inFlight: number;
  readonly failed: number;
  readonly abandoned: number;
  readonly requests: number;
  readonly errors: number;
  /** no more programs will start */
  readonly sendingStopped: boolean;
}

export interface ReplayRecords {
  readonly programs: ProgramRecord[];
  readonly requests: RequestRecord[];
  readonly tools: ToolRecord[];
  /** wall time of the whole replay */
  readonly wallS: number;
}

/** Runs the replay to its end (all programs done, or the drain timeout); never throws for server errors. */
export async function runReplay(options: ReplayOptions): Promise<ReplayRecords> {
  if (options.programs.length !== options.arrivalsS.length)
    throw new Error("programs and arrivalsS must have the same length");
  const t0 = performance.now();
  const now = () => (performance.now() - t0) / 1000;
  const prefix = options.programPrefix ?? "";
  const programs: ProgramRecord[] = options.programs.map((p, i) => ({
    id: `${prefix}${p.id}`,
    traceId: p.id,
    turns: p.turns.length,
    turnsDone: 0,
    arrivalS: options.arrivalsS[i]!,
    startS: null,
    endS: null,
    status: "not_started",
    error: null,
    errorMessage: null,
  }));
  const requests: RequestRecord[] = [];
  const tools: ToolRecord[] = [];
  const abandon = new AbortController();
  const stopSending = new AbortController();
  // Every program in flight waits on these (a request, a tool, a think time): one listener each, removed when
  // it settles, so many concurrent programs are not a leak for Node's warning to report.
  setMaxListeners(0, abandon.signal, stopSending.signal);
  let sendingStopped = false;
  let started = 0;
  const running = new Set<Promise<void>>();

  const progress = (): ReplayProgress => {
    let completed = 0;
    let failed = 0;
    let abandoned = 0;
    for (const p of programs) {
      if (p.status === "completed") completed++;
      else if (p.status === "failed") failed++;
      else if (p.status === "abandoned") abandoned++;
    }
    return {
      elapsedS: now(),
      scheduled: programs.length,
      started,
      completed,
      inFlight: running.size,
      failed,
      abandoned,
      requests: requests.length,
      errors: requests.filter((r) => r.error !== null).length,
      sendingStopped,
    };
  };
  const ticker = options.onProgress
    ? setInterval(() => options.onProgress!(progress()), options.progressIntervalMs ?? 1000)
    : undefined;
  ticker?.unref();

  const onStop = () => {
    stopSending.abort();
    abandon.abort();
  };
  options.stopSignal?.addEventListener("abort", onStop, { once: true });
  if (options.stopSignal?.aborted) onStop();
  const durationTimer =
    options.durationS === undefined
      ? undefined
      : setTimeout(() => stopSending.abort(), Math.max(0, options.durationS * 1000));

  const runProgram = async (index: number): Promise<void> => {
    const program = options.programs[index]!;
    const record = programs[index]!;
    const conversation = new ReplayConversation({
      programKey: program.id,
      programName: record.id,
      seed: options.seed,
      counter: options.counter,
      ...(options.observationRole ? { observationRole: options.observationRole } : {}),
    });
    const last = program.turns.length - 1;
    try {
      for (let t = 0; t <= last; t++) {
        const turn = program.turns[t]!;
        const prompt = conversation.prompt(turn);
        const body: Record<string, unknown> = {
          ...(options.model === null ? {} : { model: options.model }),
          ...(options.api === "chat"
            ? { messages: prompt.messages }
            : { prompt: renderChatML(prompt.messages, true) }),
          max_tokens: Math.max(1, turn.output),
          ignore_eos: true,
          ...(options.stream ? { stream: true, stream_options: { include_usage: true } } : {}),
          ...options.extraBody,
          job_id: record.id,
          program_id: record.id,
          is_last_step: t === last,
          ...(turn.tool === null ? {} : { this_func_call: turn.tool }),
        };
        const sentS = now();
        record.startS ??= sentS;
        const base = {
          programId: record.id,
          turn: t,
          sentS,
          targetPromptTokens: turn.input,
          clientPromptTokens: prompt.tokens,
          targetOutputTokens: turn.output,
        };
        let reply: Awaited<ReturnType<ReplayHttpClient["complete"]>>;
        try {
          reply = await options.client.complete({
            api: options.api,
            body,
            headers: { "x-program-id": record.id },
            timeoutMs: options.requestTimeoutS * 1000,
            signal: abandon.signal,
          });
        } catch (error) {
          const kind = error instanceof ReplayRequestError ? error.kind : "client_error";
          requests.push({
            ...base,
            doneS: now(),
            ttftS: null,
            serverPromptTokens: null,
            cachedTokens: null,
            completionTokens: null,
            error: kind,
          });
          throw error;
        }
        const doneS = now();
        requests.push({
          ...base,
          doneS,
          ttftS: reply.firstContentMs === null ? null : reply.firstContentMs / 1000,
          serverPromptTokens: reply.promptTokens,
          cachedTokens: reply.cachedTokens,
          completionTokens: reply.completionTokens,
          error: null,
        });
        record.turnsDone = t + 1;
        record.endS = doneS;
        conversation.addReply(reply.text);
        if (t < last) {
          const outcome = await options.tools.run(turn.tool, turn.toolS ?? 0, abandon.signal);
          tools.push({
            programId: record.id,
            turn: t,
            tool: turn.tool,
            durationS: outcome.durationS,
            error: outcome.error ?? null,
          });
        }
      }
      record.status = "completed";
    } catch (error) {
      const abandoned =
        error instanceof AbandonedError ||
        (error instanceof ReplayRequestError && error.kind === "abandoned");
      record.status = abandoned ? "abandoned" : "failed";
      record.error = abandoned
        ? "abandoned"
        : error instanceof ReplayRequestError
          ? error.kind
          : "client_error";
      record.errorMessage = error instanceof Error ? error.message : String(error);
      record.endS = now();
    }
  };

  try {
    for (let i = 0; i < programs.length; i++) {
      const wait = programs[i]!.arrivalS - now();
      if (wait > 0) {
        try {
          await sleepMs(wait * 1000, stopSending.signal);
        } catch {
          break;
        }
      }
      if (stopSending.signal.aborted) break;
      started++;
      const task = runProgram(i).finally(() => running.delete(task));
      running.add(task);
    }
    sendingStopped = true;
    if (options.durationS !== undefined && !abandon.signal.aborted) {
      // Running programs get until durationS + drainTimeoutS, then are abandoned.
      const leftMs = (options.durationS + options.drainTimeoutS - now()) * 1000;
      const allDone = Promise.all([...running]).then(() => true);
      const drainTimer = new AbortController();
      const timedOut = sleepMs(leftMs, drainTimer.signal).then(
        () => false,
        () => true,
      );
      const drained = await Promise.race([allDone, timedOut]);
      drainTimer.abort();
      if (!drained) abandon.abort();
    }
    await Promise.all([...running]);
  } finally {
    clearTimeout(durationTimer);
    if (ticker) clearInterval(ticker);
    options.stopSignal?.removeEventListener("abort", onStop);
  }
  options.onProgress?.(progress());
  return { programs, requests, tools, wallS: now() };
}
