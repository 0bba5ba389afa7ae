/**
 * `continuum bench --concurrency N`: AgentX's closed loop against a real server (ours, llama-server, a
 * gateway): the lanes of src/workload/agent-traces/closed-loop-lanes.ts in wall-clock time, each call sent as a prompt
 * built from its block ids (block-prompt.ts) with `max_tokens` = its recorded output and `ignore_eos`,
 * streamed, and measured as the simulator measures (src/analysis/agentx-metrics.ts).
 */
import { type AgentxMetrics, agentxMetrics, type MeasuredCall } from "../analysis/agentx-metrics.js";
import { LogHistogram } from "../analysis/log-histogram.js";
import { ownCalls } from "../workload/agent-traces/agent-trace.js";
import { loadAgentTraces } from "../workload/agent-traces/agent-trace-files.js";
import { scaleAgentTrace } from "../workload/agent-traces/agent-trace-scale.js";
import { TheoreticalPrefixCache } from "../workload/agent-traces/agent-trace-stats.js";
import { ClosedLoopLanes, type LaneSend } from "../workload/agent-traces/closed-loop-lanes.js";
import { BlockPromptBuilder } from "./block-prompt.js";
import { type ReplayApi, ReplayHttpClient, ReplayRequestError } from "./replay/replay-client.js";
import { builtinTokenCounter, CharsTokenCounter, type TokenCounter } from "./replay/replay-tokens.js";

export interface ClosedLoopBenchConfig {
  readonly url: string;
  readonly api: ReplayApi;
  /** the `model` field: undefined asks GET /v1/models; null leaves it out */
  readonly model?: string | null;
  readonly apiKey?: string | null;
  readonly tracePaths: readonly string[];
  readonly mooncakeBlockSize?: number;
  readonly tokenScale: number;
  readonly timeScale: number;
  readonly concurrency: number;
  readonly durationS: number;
  readonly warmStart: boolean;
  readonly idleGapCapS: number;
  readonly interactivityFloor: number;
  readonly seed: number;
  readonly charsPerToken?: number;
  readonly requestTimeoutS: number;
  /** what TPGS divides by: the server's GPUs, or its CPU cores on the CPU engine */
  readonly devices: number;
  readonly deviceKind: "gpu" | "cpu-core";
  readonly extraBody?: Readonly<Record<string, unknown>>;
  /** prepended to program ids and salting every cache-bust marker (default: unique per run) */
  readonly programPrefix?: string;
  readonly label: string;
  readonly stopSignal?: AbortSignal;
  readonly log?: (line: string) => void;
}

export interface ClosedLoopBenchRun {
  readonly label: string;
  readonly url: string;
  readonly model: string | null;
  readonly settings: string[];
  readonly metrics: AgentxMetrics;
  /** mean |server prompt tokens - the trace's|, over calls the server reported them for */
  readonly prompt_tokens_mae: number | null;
  /** failed calls by kind (context overflows and calls cut off by the end are in the metrics instead) */
  readonly errors: Record<string, number>;
  readonly cached_tokens_reported: boolean;
}

/** A server's words for a prompt past its context (OpenAI's, vLLM's, llama-server's, Anthropic's, ours). */
const OVERFLOW =
  /context[ _]length|context_length_exceeded|maximum context|prompt is too long|exceeds the (available )?context|prompt_too_long/i;

async function detectModel(client: ReplayHttpClient, log: (line: string) => void): Promise<string | null> {
  try {
    const json = (await client.getJson("/v1/models", 10_000)) as { data?: { id?: unknown }[] };
    const id = json.data?.[0]?.id;
    if (typeof id === "string" && id.length > 0) return id;
  } catch (error) {
    log(`bench: GET /v1/models failed (${(error as Error).message}); requests carry no model field`);
  }
  return null;
}

export async function runClosedLoopBench(config: ClosedLoopBenchConfig): Promise<ClosedLoopBenchRun> {
  const log = config.log ?? (() => {});
  const load = loadAgentTraces(
    config.tracePaths,
    config.mooncakeBlockSize === undefined ? {} : { mooncakeBlockSize: config.mooncakeBlockSize },
  );
  for (const problem of load.problems) log(`# skipped ${problem}`);
  if (load.traces.length === 0) throw new Error(`no session trace in ${config.tracePaths.join(", ")}`);
  const traces = load.traces.map((t) => scaleAgentTrace(t, config.tokenScale, config.timeScale));
  const counter: TokenCounter =
    config.charsPerToken === undefined ? builtinTokenCounter() : new CharsTokenCounter(config.charsPerToken);
  const prefix = config.programPrefix ?? `b${Date.now().toString(36)}-`;
  const prompts = new BlockPromptBuilder(counter, config.api, prefix);
  const client = new ReplayHttpClient(config.url, config.apiKey ?? null);
  const theoretical = new TheoreticalPrefixCache();
  const lanes = new ClosedLoopLanes(
    traces,
    {
      lanes: config.concurrency,
      seed: config.seed,
      warmStart: config.warmStart,
      idleGapCapS: config.idleGapCapS,
    },
    0,
    (run, scopeKey) => {
      if (run.trace.hashScope === "local") theoretical.forget(scopeKey);
    },
  );
  const calls: MeasuredCall[] = [];
  const itl = new LogHistogram();
  const errors: Record<string, number> = {};
  const promptErrors: number[] = [];
  let cachedReported = false;
  const abandon = new AbortController();
  const t0 = performance.now();
  const now = () => (performance.now() - t0) / 1000;
  let wake: (() => void) | null = null;
  const inFlight = new Set<Promise<void>>();
  let nextTag = 1;
  try {
    const model = config.model === undefined ? await detectModel(client, log) : config.model;
    const send = (s: LaneSend) => {
      const measured = !s.warmup && lanes.measurementStartS !== null;
      const hitTokens = theoretical.lookup(s.scopeKey, s.call, s.trace.blockSize);
      const prompt = prompts.build(
        s.call.hashIds,
        s.trace.blockSize,
        Math.max(1, s.call.input),
        s.scopeKey,
        nextTag++,
      );
      const output = Math.max(1, s.call.output);
      const programId = `${prefix}${s.programId}`;
      const body: Record<string, unknown> = {
        ...(model === null ? {} : { model }),
        ...(config.api === "chat"
          ? { messages: [{ role: "user", content: prompt.text }] }
          : { prompt: prompt.text }),
        max_tokens: output,
        ignore_eos: true,
        stream: true,
        stream_options: { include_usage: true },
        ...config.extraBody,
        job_id: programId,
        program_id: programId,
        ...(s.parentProgramId === null ? {} : { parent_program_id: `${prefix}${s.parentProgramId}` }),
        is_last_step: s.callIndex === ownCalls(s.node).length - 1,
      };
      const sentS = now();
      const task = client
        .complete({
          api: config.api,
          body,
          headers: {
            "x-program-id": programId,
            ...(s.parentProgramId === null ? {} : { "x-parent-program-id": `${prefix}${s.parentProgramId}` }),
          },
          timeoutMs: config.requestTimeoutS * 1000,
          signal: abandon.signal,
        })
        .then(
          (reply) => {
            const doneS = now();
            if (reply.promptTokens !== null) promptErrors.push(Math.abs(reply.promptTokens - prompt.tokens));
            if (reply.cachedTokens !== null) cachedReported = true;
            if (measured) {
              for (const gap of reply.chunkGapsMs) itl.add(gap / 1000);
              calls.push({
                session: s.treeId,
                sendS: sentS,
                firstTokenS: reply.firstContentMs === null ? null : sentS + reply.firstContentMs / 1000,
                finishS: doneS,
                input: reply.promptTokens ?? prompt.tokens,
                output: reply.completionTokens ?? output,
                cachedTokens: reply.cachedTokens ?? 0,
                theoreticalHitTokens: hitTokens,
                overflow: false,
              });
            }
            lanes.finished(s, doneS);
          },
          (error: unknown) => {
            const doneS = now();
            const kind = error instanceof ReplayRequestError ? error.kind : "client_error";
            const message = error instanceof Error ? error.message : String(error);
            const overflow = kind.startsWith("http_") && OVERFLOW.test(message);
            if (measured && (overflow || kind === "abandoned")) {
              calls.push({
                session: s.treeId,
                sendS: sentS,
                firstTokenS: null,
                finishS: overflow ? doneS : null,
                input: prompt.tokens,
                output,
                cachedTokens: 0,
                theoreticalHitTokens: hitTokens,
                overflow,
              });
            }
            // calls cut off by the window's end count as unfinished in the metrics, not as errors
            if (!overflow && kind !== "abandoned") errors[kind] = (errors[kind] ?? 0) + 1;
            // a failed call releases what waits on it, as a completed one
            if (kind !== "abandoned") lanes.finished(s, doneS);
          },
        )
        .finally(() => {
          inFlight.delete(task);
          wake?.();
        });
      inFlight.add(task);
    };
    for (;;) {
      if (config.stopSignal?.aborted) break;
      const t = now();
      const start = lanes.measurementStartS;
      const endS = start === null ? null : start + config.durationS;
      if (endS !== null && t >= endS) break;
      for (const s of lanes.due(t)) send(s);
      const due = lanes.nextDueS();
      const untilS = Math.min(due ?? Number.POSITIVE_INFINITY, endS ?? Number.POSITIVE_INFINITY);
      if (!Number.isFinite(untilS) && inFlight.size === 0) break;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          config.stopSignal?.removeEventListener("abort", done);
          wake = null;
          resolve();
        };
        const timer = Number.isFinite(untilS)
          ? setTimeout(done, Math.max(0, (untilS - now()) * 1000))
          : undefined;
        config.stopSignal?.addEventListener("abort", done, { once: true });
        wake = done;
      });
    }
    abandon.abort();
    await Promise.allSettled([...inFlight]);
    const startS = lanes.measurementStartS ?? now();
    const metrics = agentxMetrics({
      concurrency: config.concurrency,
      durationS: config.durationS,
      devices: config.devices,
      deviceKind: config.deviceKind,
      interactivityFloor: config.interactivityFloor,
      calls,
      sessions: lanes.runs.map((run) => ({
        startS: Math.max(run.startS, startS),
        endS: run.endS,
        warm: run.warm,
      })),
      itl,
    });
    const settings = [
      `session traces ${config.tracePaths.join(", ")}: ${traces.length} sessions, ${config.concurrency} lanes, seed ${config.seed}, token scale ${config.tokenScale}, time scale ${config.timeScale}`,
      `closed loop: ${config.durationS} s measured${config.warmStart ? " after a warm start" : ""}, recorded gaps capped at ${Number.isFinite(config.idleGapCapS) ? `${config.idleGapCapS} s` : "nothing"}, interactivity floor ${config.interactivityFloor} tok/s per user`,
      `${config.api === "chat" ? "/v1/chat/completions (one user message)" : "/v1/completions"}, streamed, ignore_eos; tokens counted by ${counter.name}; TPGS per ${config.deviceKind === "gpu" ? `GPU (${config.devices})` : `CPU core (${config.devices})`}`,
    ];
    return {
      label: config.label,
      url: client.base.href,
      model,
      settings,
      metrics,
      prompt_tokens_mae:
        promptErrors.length === 0 ? null : promptErrors.reduce((a, b) => a + b, 0) / promptErrors.length,
      errors,
      cached_tokens_reported: cachedReported,
    };
  } finally {
    abandon.abort();
    client.close();
  }
}
