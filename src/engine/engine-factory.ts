import { readFile } from "node:fs/promises";
import { type CostModel, quadraticCostModel } from "../core/cost/cost-model.js";
import { GIB } from "../core/kv/offload-tiers.js";
import { parseEngineProfile, prefillQuadraticOf } from "../core/profile/engine-profile-format.js";
import { FileSink } from "../core/recorder/file-sink.js";
import { Recorder } from "../core/recorder/recorder.js";
import type { TtlEstimatorOptions } from "../core/ttl/ttl-model.js";
import { type BuiltinPreset, ensureBuiltinModel } from "../gguf/index.js";
import { createPolicy, loadPolicyModules } from "../policies/index.js";
import { Engine, type EngineTierOptions } from "./engine.js";
import { DEFAULT_BLOCK_SIZE_TOKENS } from "./engine-setup.js";
import { setUpGpuBackend } from "./gpu/gpu-backend-setup.js";
import type { KvEventPublisher, KvEventPublisherOptions } from "./kv/kv-event-publisher.js";
import { kvEventsTopicOf } from "./kv/kv-event-wire.js";
import { kvStateIdentity } from "./kv/kv-state-identity.js";
import { type KvCacheType, versionInfo } from "./native/llama-native.js";
import { LlamaModelRunner, type ModelKvShape } from "./runners/llama-model-runner.js";
import type { KvLayout } from "./runners/model-runner.js";
import { stepLogFile } from "./step-log.js";

const CPU_ENGINE_DEFAULT_OFFLOAD_GB = 4;

/** Options of `continuum serve` for the llama.cpp engine (vLLM-style names where vLLM has one). */
export interface LlamaEngineOptions {
  /** `--model <path>`: a GGUF file. Without it the built-in model `builtinModel` is generated. */
  readonly modelPath?: string;
  /** `--builtin-model <preset>` (BUILTIN_PRESETS): the seeded built-in model used without --model (default tiny). */
  readonly builtinModel?: BuiltinPreset;
  /** `--served-model-name`: the model id clients see (default: the GGUF's general.name or file name). */
  readonly servedModelName?: string;
  /**
   * `--scheduling-policy`: a built-in policy (`continuum policies` lists them; default cachettl-adaptive) or
   * a policy module's spec (./my-policy.mjs), imported here.
   */
  readonly policy?: string;
  /** `--max-num-seqs`: requests running at once (default 16). */
  readonly maxNumSeqs?: number;
  /** `--max-num-batched-tokens`: tokens per engine step, decodes and prefill chunks (default 512). */
  readonly maxNumBatchedTokens?: number;
  /** `--ubatch-size`: rows per llama.cpp micro-batch (default 2048 with the KV on a GPU, 512 on the CPU). */
  readonly ubatchTokens?: number;
  /** `--kv-cache-tokens`: KV cells of llama.cpp's pool, all sequences together (default: defaultKvCells). */
  readonly kvCacheTokens?: number;
  /**
   * `--kv-layout`: `unified` (default), one pool all slots share, or `streams`, one stream of
   * kvCacheTokens / maxSeqSlots cells per slot: each step's attention sees only its sequences' own cells
   * (faster with many running sequences on the CPU), but no sequence outgrows its stream (docs/engine.md).
   */
  readonly kvLayout?: KvLayout;
  /**
   * `--max-seq-slots`: llama.cpp sequence slots (n_seq_max, at most 256): running requests plus KV kept
   * resident for pins and as prefix cache (default min(256, max(2 x maxNumSeqs, maxNumSeqs + 16)); with the
   * streams layout maxNumSeqs + 1, since every slot takes its share of the cells).
   */
  readonly maxSeqSlots?: number;
  /**
   * `--cpu-offload-gb`: RAM for KV dropped from the pool, reloaded instead of recomputed. Default: 4 when
   * the model runs on the CPU (there every resident cell slows attention, so KV nobody holds is better in
   * RAM; llama-server's prompt cache is on by default too), else 0 (2 for offload policies).
   */
  readonly cpuOffloadGb?: number;
  /** `--disk-offload-dir`: directory of the disk KV tier. */
  readonly diskOffloadDir?: string;
  /** `--disk-offload-gb`: disk space of the disk KV tier (default 0; needs --disk-offload-dir). */
  readonly diskOffloadGb?: number;
  /**
   * `--disk-offload-persist`: keep the disk tier across restarts: at shutdown the KV still held (pinned,
   * cached, in RAM) goes to disk with an index; the next start with the same model and KV settings reloads
   * from it instead of computing again (kv-tier-persistence.ts).
   */
  readonly diskOffloadPersist?: boolean;
  /**
   * What else a persisted state's reuse depends on: `serve` passes a digest of its API keys, whose order
   * names the tenants that salt cached KV (another key list must not find another tenant's states).
   */
  readonly kvPersistScope?: string;
  /** `--threads`: CPU threads for decoding (default: cores - 1). */
  readonly threads?: number;
  /** `--threads-batch`: CPU threads for prompt batches (default: --threads). */
  readonly threadsBatch?: number;
  /** `--no-flash-attn` sets false (default true). */
  readonly flashAttn?: boolean;
  /** `--kv-cache-dtype f16|q8_0|...` (default f16). */
  readonly kvCacheType?: KvCacheType;
  /** `--gpu-layers`: layers offloaded when a GPU backend is loaded (default auto). */
  readonly gpuLayers?: number | "all" | "auto";
  /** `--record <path>`: per-program event log, written to <path>.jsonl at shutdown (atomic rename). */
  readonly recordPath?: string;
  /** one JSON line per engine step (`continuum analyze-steps` prices them with a profile) */
  readonly stepLogPath?: string;
  /** `--profile <file>`: a `continuum profile` JSON; its prefill curve and bandwidths feed the TTL model. */
  readonly profilePath?: string;
  /** `--max-waiting`: queued requests beyond which new ones get 429 (default 1024). */
  readonly maxWaiting?: number;
  /** `--max-programs`: programs kept at most (default 65536). */
  readonly maxPrograms?: number;
  /** TTL estimator knobs (tests, experiments). */
  readonly ttl?: TtlEstimatorOptions;
  /**
   * `--kv-events-*`: publish the pool's prefix cache as vLLM's KV events on a ZMQ PUB socket bound
   * (`tcp://*:5557`) or connected (`tcp://host:5557`) at its endpoint, as vLLM's `--kv-events-config`.
   */
  readonly kvEvents?: KvEventsConfig;
}

/** The `--kv-events-*` flags: vLLM's `--kv-events-config` fields, and the pod of the default topic. */
export interface KvEventsConfig
  extends Pick<
    KvEventPublisherOptions,
    "endpoint" | "replayEndpoint" | "bufferSteps" | "dataParallelRank" | "format"
  > {
  /** the events' topic (default `kv@<pod>@<model id>`, llm-d's form) */
  readonly topic?: string;
  /** the pod of the default topic (default `$POD_IP`, else the host name) */
  readonly pod?: string;
}

/** Cost model and offload bandwidths from a profile file, or null without one. */
async function profileCosts(
  path: string | undefined,
  kvBytesPerToken: number,
): Promise<{ costs: CostModel; cpuBps: number; diskBps: number } | null> {
  if (!path) return null;
  const profile = parseEngineProfile(JSON.parse(await readFile(path, "utf8")) as unknown);
  const cpuBps = profile.offload.cpuBandwidthBps;
  const diskBps = profile.offload.diskBandwidthBps;
  return {
    costs: quadraticCostModel({
      prefillQuadratic: prefillQuadraticOf(profile),
      kvBytesPerToken,
      reloadBandwidthBps: { cpu: cpuBps, disk: diskBps },
    }),
    cpuBps,
    diskBps,
  };
}

/** The KV event publisher `--kv-events-endpoint` asks for (the zeromq addon is loaded only then), or null. */
async function openKvEvents(options: LlamaEngineOptions, modelId: string): Promise<KvEventPublisher | null> {
  const config = options.kvEvents;
  if (!config) return null;
  const { KvEventPublisher } = await import("./kv/kv-event-publisher.js");
  return KvEventPublisher.open({
    endpoint: config.endpoint,
    topic: kvEventsTopicOf(config, modelId),
    replayEndpoint: config.replayEndpoint,
    bufferSteps: config.bufferSteps,
    dataParallelRank: config.dataParallelRank,
    format: config.format,
  });
}

const DEFAULT_CONTEXTS_HELD = 2;
const DEFAULT_CONTEXT_TOKENS = 65_536;
const DEFAULT_KV_BYTES = 4 * GIB;
const MIN_DEFAULT_KV_CELLS = 16_384;

/**
 * The pool without `--kv-cache-tokens`: two of the model's contexts of at most 64k tokens each (an agent
 * harness's conversation and its side requests), within 4 GiB of f16 KV, never below 16384 cells.
 */
export function defaultKvCells(model: ModelKvShape): number {
  const wanted = DEFAULT_CONTEXTS_HELD * Math.min(model.contextTokens, DEFAULT_CONTEXT_TOKENS);
  const affordable =
    model.kvBytesPerToken > 0 ? Math.floor(DEFAULT_KV_BYTES / model.kvBytesPerToken) : wanted;
  return Math.max(MIN_DEFAULT_KV_CELLS, Math.floor(Math.min(wanted, affordable) / 256) * 256);
}

function positive(value: number | undefined, fallback: number, name: string): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name} must be a positive integer, got ${value}`);
  return v;
}

/** Builds the llama.cpp engine `continuum serve` runs: model, one KV pool, scheduler, policy, recorder. */
export async function createLlamaEngine(options: LlamaEngineOptions = {}): Promise<Engine> {
  const policyName = options.policy ?? "cachettl-adaptive";
  await loadPolicyModules([policyName]);
  const policy = createPolicy(policyName);
  const maxNumSeqs = positive(options.maxNumSeqs, 16, "maxNumSeqs");
  const maxNumBatchedTokens = positive(options.maxNumBatchedTokens, 512, "maxNumBatchedTokens");
  const kvCells =
    options.kvCacheTokens === undefined
      ? defaultKvCells
      : positive(options.kvCacheTokens, 1, "kvCacheTokens");
  const kvLayout = options.kvLayout ?? "unified";
  const slots = positive(
    options.maxSeqSlots,
    kvLayout === "streams" ? maxNumSeqs + 1 : Math.min(256, Math.max(2 * maxNumSeqs, maxNumSeqs + 16)),
    "maxSeqSlots",
  );
  if (slots > 256) throw new Error(`maxSeqSlots is at most 256, got ${slots}`);
  if (maxNumSeqs >= slots) throw new Error(`maxNumSeqs (${maxNumSeqs}) must be below maxSeqSlots (${slots})`);
  const diskGb = options.diskOffloadGb ?? 0;
  if (diskGb > 0 && !options.diskOffloadDir) throw new Error("--disk-offload-gb needs --disk-offload-dir");
  if (options.diskOffloadPersist && !(diskGb > 0))
    throw new Error("--disk-offload-persist needs a disk tier: --disk-offload-dir and --disk-offload-gb");

  const modelPath =
    options.modelPath ?? (await ensureBuiltinModel({ preset: options.builtinModel ?? "tiny" }));
  await setUpGpuBackend({
    modelPath,
    gpuLayers: options.gpuLayers ?? "auto",
    ...(options.flashAttn === undefined ? {} : { flashAttn: options.flashAttn }),
    ...(options.kvCacheType ? { kvCacheType: options.kvCacheType } : {}),
  });
  const runner = await LlamaModelRunner.open({
    modelPath,
    ...(options.servedModelName ? { modelId: options.servedModelName } : {}),
    kvCells,
    kvLayout,
    maxSeqs: slots,
    batchTokens: maxNumBatchedTokens,
    ...(options.ubatchTokens === undefined
      ? {}
      : { ubatchTokens: positive(options.ubatchTokens, 1, "ubatchTokens") }),
    ...(options.threads ? { threads: options.threads } : {}),
    ...(options.threadsBatch ? { threadsBatch: options.threadsBatch } : {}),
    ...(options.flashAttn === undefined ? {} : { flashAttn: options.flashAttn }),
    ...(options.kvCacheType ? { kvCacheType: options.kvCacheType } : {}),
    ...(options.gpuLayers === undefined ? {} : { gpuLayers: options.gpuLayers }),
  });
  let kvEvents: KvEventPublisher | null = null;
  try {
    const onCpu = runner.device.kvCache === "cpu";
    let cpuGb = options.cpuOffloadGb ?? (onCpu && diskGb <= 0 ? CPU_ENGINE_DEFAULT_OFFLOAD_GB : 0);
    // offload policies mean nothing without a tier: give them a modest RAM one
    if (policy.needsOffload && cpuGb <= 0 && diskGb <= 0) cpuGb = 2;
    const fromProfile = await profileCosts(options.profilePath, runner.kvBytesPerToken);
    const persistIdentity = options.diskOffloadPersist
      ? await kvStateIdentity({
          modelPath,
          llamaBuild: `${versionInfo().libLlamaVersion} ${versionInfo().libGgmlCommit}`,
          kvCacheType: options.kvCacheType ?? "f16",
          flashAttn: options.flashAttn ?? true,
          kvLayout,
          blockSizeTokens: DEFAULT_BLOCK_SIZE_TOKENS,
          scope: options.kvPersistScope ?? "",
        })
      : undefined;
    const tiers: EngineTierOptions = {
      cpuBytes: Math.floor(cpuGb * GIB),
      diskBytes: Math.floor(diskGb * GIB),
      diskDir: options.diskOffloadDir ?? null,
      ...(persistIdentity === undefined ? {} : { persistIdentity }),
      ...(fromProfile ? { cpuBandwidthBps: fromProfile.cpuBps, diskBandwidthBps: fromProfile.diskBps } : {}),
    };
    kvEvents = await openKvEvents(options, runner.modelId);
    const recorder = options.recordPath
      ? new Recorder(new FileSink(options.recordPath.replace(/\.jsonl$/, "")))
      : undefined;
    return new Engine({
      runner,
      policy,
      maxNumSeqs,
      maxNumBatchedTokens,
      tiers,
      // on the CPU the pool and the RAM tier are the same memory: only running sequences stay in the pool
      kvRunningOnly: onCpu && cpuGb > 0,
      ...(fromProfile ? { costs: fromProfile.costs } : {}),
      ...(options.ttl ? { ttl: options.ttl } : {}),
      ...(options.maxWaiting ? { maxWaiting: options.maxWaiting } : {}),
      ...(options.maxPrograms ? { maxPrograms: options.maxPrograms } : {}),
      ...(recorder ? { recorder } : {}),
      ...(options.stepLogPath ? { stepLog: stepLogFile(options.stepLogPath) } : {}),
      ...(kvEvents ? { kvEvents } : {}),
    });
  } catch (error) {
    await kvEvents?.close();
    await runner.close();
    throw error;
  }
}
