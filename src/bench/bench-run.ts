/** One `continuum bench` run: workload -> replay against the server -> metrics. */
import type { WorkloadKind } from "../workload/generators.js";
import { loadTrace, type TraceProgram } from "../workload/trace.js";
import { type BenchRun, summarizeReplay } from "./bench-metrics.js";
import { type ReplayApi, ReplayHttpClient } from "./replay/replay-client.js";
import type { ObservationRole } from "./replay/replay-conversation.js";
import { type ReplayProgress, runReplay } from "./replay/replay-runner.js";
import { replayWorkload } from "./replay/replay-schedule.js";
import { builtinTokenCounter, CharsTokenCounter, type TokenCounter } from "./replay/replay-tokens.js";
import { SandboxTools, SleepTools, type ToolRunner } from "./replay/replay-tools.js";

export interface BenchConfig {
  readonly url: string;
  readonly api?: ReplayApi;
  /** the `model` field: undefined asks GET /v1/models for the first id; null leaves it out */
  readonly model?: string | null;
  readonly apiKey?: string | null;
  /** a trace file, or programs already loaded; else a generated `workload` */
  readonly trace?: string | readonly TraceProgram[];
  readonly workload?: WorkloadKind;
  readonly programs: number;
  readonly jps: number;
  readonly seed?: number;
  readonly tokenScale?: number;
  readonly toolTimeScale?: number;
  readonly turnRepeat?: number;
  readonly maxContext?: number;
  readonly durationS?: number;
  readonly drainTimeoutS?: number;
  readonly requestTimeoutS?: number;
  /** run a harmless command per tool call in this directory instead of sleeping the tool time */
  readonly runTools?: string;
  readonly toolTimeoutS?: number;
  /** estimate tokens as chars / this instead of the built-in tokenizer */
  readonly charsPerToken?: number;
  readonly observationRole?: ObservationRole;
  readonly stream?: boolean;
  readonly extraBody?: Readonly<Record<string, unknown>>;
  /** prepended to program ids (default: a prefix unique to this run) */
  readonly programPrefix?: string;
  readonly label?: string;
  readonly stopSignal?: AbortSignal;
  readonly onProgress?: (progress: ReplayProgress) => void;
  /** notes for the user (model detection, dropped programs); default: none */
  readonly log?: (line: string) => void;
}

async function detectModel(client: ReplayHttpClient, log: (line: string) => void): Promise<string | null> {
  try {
    const json = (await client.getJson("/v1/models", 10_000)) as { data?: { id?: unknown }[] };
    const id = json.data?.[0]?.id;
    if (typeof id === "string" && id.length > 0) return id;
    log("bench: GET /v1/models listed no model; requests carry no model field");
  } catch (error) {
    log(`bench: GET /v1/models failed (${(error as Error).message}); requests carry no model field`);
  }
  return null;
}

export async function runBench(config: BenchConfig): Promise<BenchRun> {
  const log = config.log ?? (() => {});
  const seed = config.seed ?? 1;
  const api = config.api ?? "chat";
  const stream = config.stream ?? true;
  const trace = typeof config.trace === "string" ? await loadTrace(config.trace) : config.trace;
  const workload = replayWorkload({
    trace,
    kind: trace === undefined ? (config.workload ?? "swe-bench") : undefined,
    programs: config.programs,
    jps: config.jps,
    seed,
    tokenScale: config.tokenScale,
    toolTimeScale: config.toolTimeScale,
    turnRepeat: config.turnRepeat,
    maxContext: config.maxContext,
  });
  if (workload.droppedPrograms > 0 || workload.truncatedPrograms > 0) {
    log(
      `bench: --max-context ${config.maxContext}: ${workload.droppedPrograms} programs dropped, ` +
        `${workload.truncatedPrograms} truncated`,
    );
  }
  const counter: TokenCounter =
    config.charsPerToken === undefined ? builtinTokenCounter() : new CharsTokenCounter(config.charsPerToken);
  const tools: ToolRunner =
    config.runTools === undefined
      ? new SleepTools()
      : new SandboxTools(config.runTools, config.toolTimeoutS ?? 30);
  const client = new ReplayHttpClient(config.url, config.apiKey ?? null);
  try {
    const model = config.model === undefined ? await detectModel(client, log) : config.model;
    const label = config.label ?? "bench";
    const records = await runReplay({
      client,
      api,
      model,
      programs: workload.programs,
      arrivalsS: workload.arrivalsS,
      seed,
      counter,
      tools,
      stream,
      requestTimeoutS: config.requestTimeoutS ?? 600,
      durationS: config.durationS,
      drainTimeoutS: config.drainTimeoutS ?? 60,
      programPrefix: config.programPrefix ?? `b${Date.now().toString(36)}-`,
      ...(config.observationRole ? { observationRole: config.observationRole } : {}),
      ...(config.extraBody ? { extraBody: config.extraBody } : {}),
      ...(config.stopSignal ? { stopSignal: config.stopSignal } : {}),
      ...(config.onProgress ? { onProgress: config.onProgress } : {}),
    });
    const source =
      typeof config.trace === "string"
        ? `trace ${config.trace}`
        : trace !== undefined
          ? "trace (in memory)"
          : `generated ${config.workload ?? "swe-bench"} workload`;
    const settings = [
      `${source}: ${workload.programs.length} programs at ${config.jps} jobs/s (Poisson), seed ${seed}`,
      `token scale ${config.tokenScale ?? 1}, tool-time scale ${config.toolTimeScale ?? 1}, ` +
        `turn repeat ${config.turnRepeat ?? 1}, max context ${config.maxContext ?? "none"}` +
        (workload.droppedPrograms + workload.truncatedPrograms > 0
          ? ` (${workload.droppedPrograms} dropped, ${workload.truncatedPrograms} truncated)`
          : ""),
      `tokens counted by ${counter.name}; ${stream ? "streaming" : "not streaming"}; tools: ` +
        (config.runTools === undefined ? "sleep the trace's tool time" : `commands in ${config.runTools}`),
      ...(config.durationS === undefined
        ? []
        : [`duration ${config.durationS} s, drain timeout ${config.drainTimeoutS ?? 60} s`]),
    ];
    return summarizeReplay(
      { label, url: client.base.href, api, model, jps: config.jps, seed, settings },
      records,
    );
  } finally {
    client.close();
  }
}
