import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { Command, InvalidArgumentError, Option } from "commander";
import type { EngineService } from "../../engine/engine-api.js";
import type { KvEventsConfig, LlamaEngineOptions } from "../../engine/engine-factory.js";
import { describeDevice } from "../../engine/gpu/device-info.js";
import {
  DEFAULT_BUFFER_STEPS,
  KV_EVENTS_FORMATS,
  type KvEventsFormat,
  kvEventsPodProblem,
  kvEventsTopicOf,
} from "../../engine/kv/kv-event-wire.js";
import { persistentTierDir } from "../../engine/kv/kv-tier-store.js";
import { backendsIfLoaded, type KvCacheType } from "../../engine/native/llama-native.js";
import { KV_LAYOUTS, type KvLayout } from "../../engine/runners/model-runner.js";
import { BUILTIN_PRESETS, type BuiltinPreset } from "../../gguf/index.js";
import { isPolicySpec, loadPolicyModules, POLICY_NAMES } from "../../policies/index.js";
import { type AgentCheck, startAgentCheck } from "../../server/agent-check.js";
import { type LogitBiasSpec, parseLogitBiasSpec } from "../../server/generation/logit-bias.js";
import { type RunningServer, startServer } from "../../server/server.js";
import { nonNegativeNumber, positiveInt, positiveNumber } from "../sim-options.js";

/**
 * KV cells above which a unified pool on a GPU gets a warning in the banner: llama.cpp's host mask per decode
 * step of 128 sequences was 11 ms over 65,536 cells and 78 ms over 262,144 on an H100 machine (docs/gpu.md).
 */
const LARGE_GPU_POOL = 131_072;

/** Builds the engine for `serve` (the llama.cpp one; tests pass a fake). */
export type EngineFactory = (options: LlamaEngineOptions) => Promise<EngineService> | EngineService;

export interface ServeCliOptions {
  model?: string;
  builtinModel: BuiltinPreset;
  chatTemplate?: string;
  reasoningFormat: "auto" | "none";
  mediaInputs: "refuse" | "note";
  /** a built-in policy's name or a policy module's spec (docs/custom-policies.md) */
  schedulingPolicy: string;
  maxNumSeqs?: number;
  maxNumBatchedTokens?: number;
  ubatchSize?: number;
  kvCacheTokens?: number;
  kvLayout?: KvLayout;
  maxSeqSlots?: number;
  cpuOffloadGb?: number;
  diskOffloadDir?: string;
  diskOffloadGb?: number;
  diskOffloadPersist?: boolean;
  host: string;
  port: number;
  apiKey: string[];
  apiKeysFile?: string;
  allowedOrigins?: string[];
  /** commander's `--no-dashboard` (true unless given) */
  dashboard?: boolean;
  /** MiB (commander defaults it to 32) */
  maxBodyMb?: number;
  servedModelName: string[];
  record?: string;
  profile?: string;
  maxWaiting?: number;
  maxPrograms?: number;
  threads?: number;
  threadsBatch?: number;
  flashAttn: boolean;
  kvCacheDtype?: KvCacheType;
  gpuLayers?: number | "all" | "auto";
  drainTimeout: number;
  /** stop (as on SIGTERM) when the process that started this one exits */
  exitWithParent?: boolean;
  stepLog?: string;
  agentPort?: number;
  kvEventsEndpoint?: string;
  kvEventsTopic?: string;
  kvEventsPod?: string;
  kvEventsReplayEndpoint?: string;
  kvEventsBufferSteps?: number;
  kvEventsDataParallelRank?: number;
  kvEventsFormat?: KvEventsFormat;
  logitBias: LogitBiasSpec[];
}

const KV_CACHE_TYPES: readonly KvCacheType[] = ["f16", "f32", "bf16", "q8_0", "q4_0"];

/** A built-in name, or a policy module's spec (loaded, and checked, before the engine starts). */
function policyName(value: string): string {
  if (!isPolicySpec(value)) {
    throw new InvalidArgumentError(
      `unknown policy "${value}"; choose from ${POLICY_NAMES.join(", ")}, or give a policy module's path (./my-policy.mjs, docs/custom-policies.md)`,
    );
  }
  return value;
}

function kvEventsPod(value: string): string {
  const problem = kvEventsPodProblem(value);
  if (problem) throw new InvalidArgumentError(`the pod ${problem}`);
  return value;
}

function nonNegativeInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError("expected an integer of 0 or more");
  return n;
}

/** The `--kv-events-*` flags, or undefined without `--kv-events-endpoint` (no events published). */
function kvEventsConfigOf(o: ServeCliOptions): KvEventsConfig | undefined {
  if (!o.kvEventsEndpoint) return undefined;
  return {
    endpoint: o.kvEventsEndpoint,
    ...(o.kvEventsTopic ? { topic: o.kvEventsTopic } : {}),
    ...(o.kvEventsPod ? { pod: o.kvEventsPod } : {}),
    ...(o.kvEventsReplayEndpoint ? { replayEndpoint: o.kvEventsReplayEndpoint } : {}),
    bufferSteps: o.kvEventsBufferSteps ?? DEFAULT_BUFFER_STEPS,
    dataParallelRank: o.kvEventsDataParallelRank ?? 0,
    format: o.kvEventsFormat ?? "array",
  };
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError(`expected a port, got "${value}"`);
  return n;
}

function gpuLayers(value: string): number | "all" | "auto" {
  if (value === "all" || value === "auto") return value;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0)
    throw new InvalidArgumentError(`expected a layer count, all or auto, got "${value}"`);
  return n;
}

/**
 * A digest of the API keys in order: tenants are named by their key's place in the list and salt the KV
 * cache, so a persistent KV tier is reused only under the same list (never the keys themselves on disk).
 */
function keyListDigest(keys: readonly string[]): string {
  const digests = keys.map((key) => createHash("sha256").update(key).digest("hex"));
  return createHash("sha256").update(digests.join("\n")).digest("hex");
}

/** Keys from --api-key, --api-keys-file, else CONTINUUM_API_KEY; none: an open server. */
export function apiKeysOf(o: Pick<ServeCliOptions, "apiKey" | "apiKeysFile">): string[] {
  const keys = [...o.apiKey];
  if (o.apiKeysFile) {
    let text: string;
    try {
      text = readFileSync(o.apiKeysFile, "utf8");
    } catch (error) {
      throw new Error(`--api-keys-file ${o.apiKeysFile}: ${(error as Error).message}`);
    }
    const fromFile = text
      .split("\n")
      .map((line) => line.trim())
      .filter((line) => line !== "" && !line.startsWith("#"));
    if (fromFile.length === 0) throw new Error(`--api-keys-file ${o.apiKeysFile} holds no key`);
    keys.push(...fromFile);
  }
  const fromEnv = process.env["CONTINUUM_API_KEY"];
  return keys.length === 0 && fromEnv ? [fromEnv] : keys;
}

function chatTemplateOf(o: ServeCliOptions): string | undefined {
  if (o.chatTemplate === undefined) return undefined;
  try {
    return readFileSync(o.chatTemplate, "utf8");
  } catch (error) {
    throw new Error(`--chat-template ${o.chatTemplate}: ${(error as Error).message}`);
  }
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function collectLogitBias(value: string, previous: LogitBiasSpec[]): LogitBiasSpec[] {
  const specs = value.split(",").map((part) => {
    const spec = parseLogitBiasSpec(part);
    if (!spec) {
      throw new InvalidArgumentError(
        `expected TOKEN+BIAS or TOKEN-BIAS (a token id or eos, a bias in [-100, 100]), got "${part}"`,
      );
    }
    return spec;
  });
  return [...previous, ...specs];
}

/**
 * The names clients may use beside the model id: `--served-model-name`'s after the first, or, serving a
 * built-in model under its own name, the preset's (what the user typed: `--builtin-model llama-3.1-8b-q8_0`).
 */
function aliasesOf(o: ServeCliOptions): string[] {
  if (o.servedModelName.length > 0) return o.servedModelName.slice(1);
  return o.model === undefined ? [o.builtinModel] : [];
}

/**
 * The engine factory's options for parsed `serve` flags (unset flags keep the engine's defaults); `apiKeys`,
 * the server's keys, scope a persistent KV tier.
 */
export function engineOptionsOf(
  o: ServeCliOptions,
  apiKeys: readonly string[] = apiKeysOf(o),
): LlamaEngineOptions {
  const options: Record<string, unknown> = {
    modelPath: o.model,
    builtinModel: o.builtinModel,
    servedModelName: o.servedModelName[0],
    policy: o.schedulingPolicy,
    maxNumSeqs: o.maxNumSeqs,
    maxNumBatchedTokens: o.maxNumBatchedTokens,
    ubatchTokens: o.ubatchSize,
    kvCacheTokens: o.kvCacheTokens,
    kvLayout: o.kvLayout,
    maxSeqSlots: o.maxSeqSlots,
    cpuOffloadGb: o.cpuOffloadGb,
    diskOffloadDir: o.diskOffloadDir,
    diskOffloadGb: o.diskOffloadGb,
    diskOffloadPersist: o.diskOffloadPersist,
    kvPersistScope: o.diskOffloadPersist ? keyListDigest(apiKeys) : undefined,
    threads: o.threads,
    threadsBatch: o.threadsBatch,
    flashAttn: o.flashAttn === false ? false : undefined,
    kvCacheType: o.kvCacheDtype,
    gpuLayers: o.gpuLayers,
    recordPath: o.record,
    stepLogPath: o.stepLog,
    profilePath: o.profile,
    maxWaiting: o.maxWaiting,
    maxPrograms: o.maxPrograms,
    kvEvents: kvEventsConfigOf(o),
  };
  for (const key of Object.keys(options)) if (options[key] === undefined) delete options[key];
  return options as LlamaEngineOptions;
}

const MIB = 1024 * 1024;
/** `--drain-timeout`'s default, seconds */
export const DEFAULT_DRAIN_TIMEOUT_S = 30;
const DEFAULT_MAX_BODY_MB = 32;

/**
 * What a built-in model's replies are: its weights are random, so a reply is noise that ends only when the
 * end token comes up by chance, after thousands of tokens; `--logit-bias eos+4` raises that chance.
 */
function randomWeightsNote(o: ServeCliOptions): string {
  const note = "the built-in model's weights are random: its replies are noise";
  if (o.logitBias.some((b) => b.token === "eos" && b.bias > 0)) return note;
  return (
    `${note} and end only after thousands of tokens (or at a request's max_tokens); --logit-bias eos+4 ` +
    `makes them end sooner${o.builtinModel === "small" ? " (~140 tokens on average)" : ""}`
  );
}

/** The llama.cpp engine factory, loaded on first use (other commands never need the native addon). */
async function loadLlamaEngineFactory(): Promise<EngineFactory> {
  const { createLlamaEngine } = await import("../../engine/engine-factory.js");
  return createLlamaEngine;
}

export interface RunServeOptions {
  readonly createEngine?: EngineFactory;
  /** where the start banner and shutdown notes go (default stdout) */
  readonly log?: (line: string) => void;
  /** drain and exit on SIGTERM/SIGINT (default true) */
  readonly handleSignals?: boolean;
}

/** Starts the engine and the HTTP server for parsed `serve` options. */
export async function runServe(o: ServeCliOptions, run: RunServeOptions = {}): Promise<RunningServer> {
  const log = run.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  // a policy module is imported and checked before the model is loaded, so a broken one fails at once
  await loadPolicyModules([o.schedulingPolicy]);
  // read once: the tenants the server names and the scope of a persistent KV tier come from the same list
  const apiKeys = apiKeysOf(o);
  const engineOptions = engineOptionsOf(o, apiKeys);
  const chatTemplate = chatTemplateOf(o);
  const createEngine = run.createEngine ?? (await loadLlamaEngineFactory());
  const engine = await createEngine(engineOptions);
  let server: RunningServer;
  try {
    server = await startServer({
      engine,
      host: o.host,
      port: o.port,
      apiKeys,
      allowedOrigins: o.allowedOrigins ?? [],
      maxBodyBytes: Math.floor((o.maxBodyMb ?? DEFAULT_MAX_BODY_MB) * MIB),
      servedModelNames: aliasesOf(o),
      dashboard: o.dashboard ?? true,
      policyName: o.schedulingPolicy,
      logitBias: o.logitBias,
      reasoningFormat: o.reasoningFormat,
      mediaInputs: o.mediaInputs,
      ...(chatTemplate === undefined ? {} : { chatTemplate }),
    });
  } catch (error) {
    await engine.shutdown();
    throw error;
  }
  const model = o.model ?? `built-in "${o.builtinModel}" model`;
  log(`continuum serve: listening on ${server.url}`);
  log(
    `  model ${engine.modelId} (${model}), context ${engine.maxContextTokens} tokens, ` +
      `scheduling policy ${o.schedulingPolicy}${o.record ? `, recording to ${o.record}` : ""}`,
  );
  log(`  device: ${describeDevice(engine.device)}`);
  // the llama.cpp engine loaded them; another engine (a test's fake) has none, and loading them here would
  // hold the process before its signal handlers are in place
  const cpuKernels = backendsIfLoaded()?.cpu;
  if (engine.device.backend === "cpu" && cpuKernels) log(`  CPU kernels: ${cpuKernels}`);
  if (o.model === undefined) log(`  ${randomWeightsNote(o)}`);
  const quantizedKv = o.kvCacheDtype === "q8_0" || o.kvCacheDtype === "q4_0";
  if (quantizedKv && engine.device.kvCache !== "gpu") {
    log(
      `  KV cache ${o.kvCacheDtype} on the CPU: fewer bytes per token than f16, slower attention ` +
        "(q8_0's prefill steps took 2.7x f16's serving the built-in model: docs/benchmarks.md)",
    );
  }
  const { kvBlocks, kvBlockSizeTokens } = engine.metrics();
  const kvCells = kvBlocks * kvBlockSizeTokens;
  if (
    engine.device.kvCache === "gpu" &&
    (o.kvLayout ?? "unified") === "unified" &&
    kvCells > LARGE_GPU_POOL
  ) {
    log(
      `  KV pool of ${kvCells} cells in one unified layout on the GPU: llama.cpp builds each decode step's ` +
        "attention mask on the CPU over every cell in use (150 ms a step for 128 sequences over 524,288 cells " +
        "on an H100 machine, docs/gpu.md); a smaller --kv-cache-tokens or --kv-layout streams avoids it",
    );
  }
  const template = server.api.chatTemplate;
  if (template !== null) {
    const thinking = template.thinkTags
      ? `thinking between ${template.thinkTags.open.trim()} and ${template.thinkTags.close.trim()}`
      : template.toolCalls === "harmony"
        ? "thinking in harmony's analysis channel"
        : template.toolCalls === "muse-glimmer"
          ? "thinking in its messages to=self"
          : "no thinking";
    log(
      `  chat template: ${template.overridden ? "--chat-template" : "the model's own"}` +
        `${template.toolUse ? " (its tool_use template for requests with tools)" : ""}; ` +
        `tool calls read as ${template.toolCalls}; ${thinking}`,
    );
  }
  if (server.api.splitsReasoning) {
    log(
      "  reasoning: the chat template writes thinking blocks; chat completions report them as " +
        "reasoning_content, Messages as thinking blocks, Responses as reasoning items " +
        "(--reasoning-format none leaves them in the text)",
    );
  }
  if (o.mediaInputs === "note") {
    log("  images, audio and files in requests: each replaced by a note that the model reads text only");
  }
  if (o.logitBias.length > 0) {
    const biases = o.logitBias.map((b) => `${b.token}${b.bias >= 0 ? "+" : ""}${b.bias}`).join(", ");
    log(`  logit bias on every request (below its own logit_bias): ${biases}`);
  }
  log(`  ${engine.kvSummary}`);
  log(
    o.profile
      ? `  TTL cost model from ${o.profile}`
      : "  TTL cost model: prefill and tier reloads priced from the engine's own steps and restores (--profile <file> for a measured one)",
  );
  if (o.dashboard ?? true) log(`  live dashboard at ${server.url}/dashboard`);
  const kvEvents = kvEventsConfigOf(o);
  if (kvEvents) {
    const topic = kvEventsTopicOf(kvEvents, engine.modelId);
    const replay = kvEvents.replayEndpoint ? `, replay on ${kvEvents.replayEndpoint}` : "";
    log(
      `  KV events (vLLM's ${kvEvents.format} layout) on ${kvEvents.endpoint}, topic ${topic}, data-parallel rank ${kvEvents.dataParallelRank}${replay}`,
    );
  }
  const agent =
    o.agentPort === undefined
      ? null
      : await startAgentCheck(o.host, o.agentPort, () => server.api.drainingPrograms || server.api.draining);
  if (agent) log(`  HAProxy agent check on ${o.host}:${agent.port}`);
  const keptKv = o.diskOffloadPersist && o.diskOffloadDir ? persistentTierDir(o.diskOffloadDir) : null;
  if (run.handleSignals ?? true) {
    installSignalHandlers(server, agent, o.drainTimeout, { record: o.record ?? null, keptKv }, log, {
      exitWithParent: o.exitWithParent ?? false,
    });
  }
  return server;
}

function installSignalHandlers(
  server: RunningServer,
  agent: AgentCheck | null,
  drainTimeoutS: number,
  { record, keptKv }: { record: string | null; keptKv: string | null },
  log: (line: string) => void,
  { exitWithParent }: { exitWithParent: boolean },
): void {
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      // the recorder writes what it holds on exit, under its tmp name: the log lacks the requests in flight
      const recorded = record ? `; the record so far is in ${record.replace(/\.jsonl$/, "")}.jsonl.tmp` : "";
      log(`continuum serve: ${signal} again, exiting without draining${recorded}`);
      process.exit(1);
    }
    stopping = true;
    const inFlight = server.api.inflight.size;
    log(
      `continuum serve: ${signal}, ${inFlight === 0 ? "nothing in flight, stopping" : `finishing ${inFlight} request(s) in flight (at most ${drainTimeoutS} s; turns of programs here are served meanwhile, new programs refused)`}; Ctrl-C or SIGTERM again stops at once`,
    );
    const deadlineMs = Date.now() + drainTimeoutS * 1000;
    await server.drain(drainTimeoutS * 1000);
    await agent?.close();
    server.close({ drainTimeoutMs: Math.max(0, deadlineMs - Date.now()) }).then(
      ({ cutRequests }) => {
        if (cutRequests > 0) {
          log(
            `continuum serve: ${cutRequests} request(s) still in flight after --drain-timeout ${drainTimeoutS} s were cut`,
          );
        }
        log(
          `continuum serve: stopped${keptKv ? `; the KV it held is kept in ${keptKv} for the next start` : ""}`,
        );
        process.exit(cutRequests > 0 ? 1 : 0);
      },
      (error: unknown) => {
        const message = error instanceof Error ? error.message : String(error);
        process.stderr.write(`continuum serve: shutdown failed: ${message}\n`);
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", (signal) => void stop(signal));
  process.on("SIGINT", (signal) => void stop(signal));
  if (!exitWithParent) return;
  // Started by a supervisor that may die without forwarding a signal (`continuum cluster` killed): stop
  // as on SIGTERM once re-parented rather than run orphaned.
  const parent = process.ppid;
  const watch = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(watch);
    void stop("parent process exited");
  }, PARENT_CHECK_MS);
  watch.unref();
}

const PARENT_CHECK_MS = 1000;

export function serveCommand(): Command {
  return new Command("serve")
    .description(
      "serve a GGUF model over an OpenAI-compatible HTTP API, with KV-cache TTL for agent programs",
    )
    .option("--model <gguf>", "GGUF model file (default: the generated built-in model)")
    .addOption(
      new Option(
        "--builtin-model <preset>",
        "built-in model used without --model (llama-3.1-8b-*, qwen3-8b-*: real 8B shapes, 8.5-16.4 GB generated on first use)",
      )
        .choices(Object.keys(BUILTIN_PRESETS))
        .default("small"),
    )
    .option(
      "--chat-template <file>",
      "Jinja chat template used instead of the model's own tokenizer.chat_template",
    )
    .option(
      "--scheduling-policy <name>",
      "scheduling policy: a name `continuum policies` lists, or a policy module's path (./my-policy.mjs)",
      policyName,
      "cachettl-adaptive",
    )
    .option("--max-num-seqs <n>", "requests running at once (engine default 16)", positiveInt)
    .option("--max-num-batched-tokens <n>", "tokens per engine step (engine default 512)", positiveInt)
    .option(
      "--ubatch-size <n>",
      "rows per llama.cpp micro-batch, at most --max-num-batched-tokens (default 2048 with the KV cache on a GPU, 512 on the CPU)",
      positiveInt,
    )
    .option(
      "--kv-cache-tokens <n>",
      "KV cells of the pool, all sequences (default: two of the model's contexts of at most 64k tokens, within 4 GiB of KV, at least 16384)",
      positiveInt,
    )
    .addOption(
      new Option(
        "--kv-layout <layout>",
        "unified: one pool all sequences share; streams: kv-cache-tokens / max-seq-slots cells per sequence, faster attention with many running sequences on the CPU",
      ).choices(KV_LAYOUTS),
    )
    .option(
      "--max-seq-slots <n>",
      "llama.cpp sequence slots: running + resident KV (at most 256; streams: max-num-seqs + 1)",
      positiveInt,
    )
    .option(
      "--cpu-offload-gb <gb>",
      "RAM tier for KV dropped from the pool (GiB; default 4 when the model runs on the CPU, else 0)",
      nonNegativeNumber,
    )
    .option("--disk-offload-dir <dir>", "directory of the disk KV tier")
    .option("--disk-offload-gb <gb>", "disk KV tier size (GiB; needs --disk-offload-dir)", nonNegativeNumber)
    .option(
      "--disk-offload-persist",
      "keep the disk KV tier across restarts: KV still held at shutdown goes to disk, and the next start with the same model and KV settings reloads it (one server per directory)",
    )
    .option("--host <host>", "address to bind", "127.0.0.1")
    .option("--port <port>", "port to listen on", port, 8000)
    .option(
      "--api-key <key>",
      "require Authorization: Bearer <key> on /v1; repeat for several tenants, whose programs and cached KV never mix (default: env CONTINUUM_API_KEY)",
      collect,
      [],
    )
    .option("--api-keys-file <file>", "more API keys, one per line (a tenant each; # comments)")
    .option(
      "--allowed-origins <origins>",
      'browser origins allowed to call the API, comma-separated ("*": any); default: no CORS',
      (value: string) =>
        value
          .split(",")
          .map((origin) => origin.trim())
          .filter((origin) => origin.length > 0),
    )
    .option(
      "--logit-bias <spec>",
      "bias every request samples with unless its logit_bias names the token: TOKEN+BIAS or TOKEN-BIAS, " +
        "TOKEN a token id or eos (repeatable or comma-separated; llama.cpp's flag), e.g. eos+4 (the built-in " +
        "small model's replies then end after ~140 tokens on average)",
      collectLogitBias,
      [],
    )
    .option("--no-dashboard", "do not serve the live dashboard (/dashboard and /dashboard/state)")
    .option(
      "--max-body-mb <mib>",
      "largest request body accepted (MiB); larger ones get 413",
      positiveNumber,
      DEFAULT_MAX_BODY_MB,
    )
    .option(
      "--served-model-name <name>",
      "model name clients use (repeatable; the first is the model id, the others aliases)",
      collect,
      [],
    )
    .option("--record <path>", "record per-program scheduling events (written at shutdown)")
    .option("--profile <file>", "a `continuum profile` JSON feeding the TTL cost model")
    .option("--step-log <file>", "write one JSON line per engine step (`continuum analyze-steps` reads it)")
    .option(
      "--max-waiting <n>",
      "requests that free run slots cannot take, beyond which new ones get 429 (engine default 1024)",
      positiveInt,
    )
    .option(
      "--max-programs <n>",
      "agent programs kept at most: idle ones are forgotten early to make room, then new ones get 429 (default 65536)",
      positiveInt,
    )
    .option("--threads <n>", "CPU threads for decoding", positiveInt)
    .option("--threads-batch <n>", "CPU threads for prompt batches", positiveInt)
    .option("--no-flash-attn", "disable flash attention")
    .addOption(new Option("--kv-cache-dtype <type>", "KV cache element type").choices(KV_CACHE_TYPES))
    .addOption(
      new Option(
        "--reasoning-format <format>",
        "auto: a model whose chat template writes <think> blocks has its thinking reported as " +
          "reasoning_content on chat completions (llama-server's default); none: left in the content",
      )
        .choices(["auto", "none"])
        .default("auto"),
    )
    .addOption(
      new Option(
        "--media-inputs <mode>",
        "images, audio and files in a request's content: refuse (a 400), or note (each replaced by a text " +
          "note, so an agent session that attached one goes on with a model that reads text only)",
      )
        .choices(["refuse", "note"])
        .default("refuse"),
    )
    .option("--gpu-layers <n>", "layers offloaded to a GPU backend: a number, all or auto", gpuLayers)
    .option(
      "--drain-timeout <s>",
      "on SIGTERM or Ctrl-C, let the requests in flight finish for at most this long (refusing new programs), then stop; programs between turns do not hold it",
      nonNegativeNumber,
      DEFAULT_DRAIN_TIMEOUT_S,
    )
    .option(
      "--exit-with-parent",
      "stop (as on SIGTERM) when the process that started this one exits; `continuum cluster` gives it to the replicas it starts",
    )
    .option("--agent-port <port>", "answer HAProxy's agent check on this port (ready / drain)", port)
    .option(
      "--kv-events-endpoint <endpoint>",
      "publish the KV pool's blocks as vLLM's KV events on a ZMQ PUB socket: bound for tcp://*:5557, connected for tcp://host:5557 (llm-d's precise prefix-cache scoring)",
    )
    .option(
      "--kv-events-topic <topic>",
      "topic of the KV events (default kv@<pod>@<model id>, as llm-d expects)",
    )
    .option(
      "--kv-events-pod <name>",
      "the pod of the default KV events topic (default $POD_IP, else the host name; continuum cluster gives each replica <host>-r<N>)",
      kvEventsPod,
    )
    .option(
      "--kv-events-replay-endpoint <endpoint>",
      "bind a ZMQ ROUTER socket there that resends past KV event batches from a sequence number (vLLM's replay_endpoint)",
    )
    .option(
      "--kv-events-buffer-steps <n>",
      "KV event batches kept for replay (vLLM's buffer_steps)",
      positiveInt,
      DEFAULT_BUFFER_STEPS,
    )
    .option(
      "--kv-events-data-parallel-rank <n>",
      "the data_parallel_rank every KV event batch carries (continuum cluster gives r1 0, r2 1...)",
      nonNegativeInt,
      0,
    )
    .addOption(
      new Option(
        "--kv-events-format <layout>",
        "KV events as vLLM up to 0.25 writes them (array: each event a tagged array) or as vLLM 0.26 on does (map: each event a map of its fields)",
      )
        .choices(KV_EVENTS_FORMATS)
        .default("array"),
    )
    .action(async (o: ServeCliOptions) => {
      await runServe(o);
    });
}
