import type { Clock } from "../core/clock.js";
import { CalibratedCostModel } from "../core/cost/calibrated-cost-model.js";
import { type CostModel, quadraticCostModel } from "../core/cost/cost-model.js";
import { GIB, tierConfigs } from "../core/kv/offload-tiers.js";
import { TokenIdContent } from "../core/kv/token-content.js";
import type { SchedulingPolicy } from "../core/policy.js";
import type { EventRecorder } from "../core/recorder/recorder.js";
import { Scheduler } from "../core/scheduler.js";
import type { TtlEstimatorOptions } from "../core/ttl/ttl-model.js";
import { createPolicy } from "../policies/index.js";
import type { KvEventPublisher } from "./kv/kv-event-publisher.js";
import { KvTierStore, type RestoredTier } from "./kv/kv-tier-store.js";
import type { ModelRunner } from "./runners/model-runner.js";
import type { StepLogFile } from "./step-log.js";

/** RAM and disk tiers for KV the engine drops from the pool (both optional). */
export interface EngineTierOptions {
  readonly cpuBytes?: number;
  readonly diskBytes?: number;
  readonly diskDir?: string | null;
  /** keep the disk tier across restarts, for states saved with this identity (KvTierStoreOptions) */
  readonly persistIdentity?: string;
  /** where a persistent disk tier reports a state file it refuses when reading it (default stderr) */
  readonly report?: (message: string) => void;
  /** transfer rates the scheduler's cost model assumes for reloads (bytes/s) */
  readonly cpuBandwidthBps?: number;
  readonly diskBandwidthBps?: number;
}

export interface EngineOptions {
  readonly runner: ModelRunner;
  /** a policy name (src/policies) or instance */
  readonly policy: string | SchedulingPolicy;
  /** running requests at once (default min(64, runner slots / 2)) */
  readonly maxNumSeqs?: number;
  /** tokens per step, decodes and prefill chunks together (default 512) */
  readonly maxNumBatchedTokens?: number;
  readonly blockSizeTokens?: number;
  /** KV tokens the scheduler may account for (default: the runner's cells minus a small headroom) */
  readonly kvPoolTokens?: number;
  readonly tiers?: EngineTierOptions;
  /**
   * Only running sequences stay in the runner's pool; pinned KV waits in the RAM tier (LlamaSeqKvSpec). For a
   * model on the CPU with a RAM tier, where both are the same memory (default false).
   */
  readonly kvRunningOnly?: boolean;
  /**
   * PrefillReload for the TTL model, e.g. from a `continuum profile`. Default: prefill priced from the
   * engine's own steps as they run (CalibratedCostModel), defaultCostModel until it has seen enough.
   */
  readonly costs?: CostModel;
  readonly ttl?: TtlEstimatorOptions;
  /** waiting requests beyond which new ones are refused as overloaded (default 1024) */
  readonly maxWaiting?: number;
  /** programs kept at most (default 65536): idle ones are forgotten early, then new ones get 429 */
  readonly maxPrograms?: number;
  readonly recorder?: EventRecorder;
  readonly clock?: Clock;
  /** one record per executed step (`serve --step-log`) */
  readonly stepLog?: StepLogFile;
  /** close the runner at shutdown (default true) */
  readonly closeRunner?: boolean;
  /** publishes the pool's prefix cache as vLLM's KV events (`serve --kv-events-endpoint`); closed at shutdown */
  readonly kvEvents?: KvEventPublisher;
}

const DEFAULT_CPU_BANDWIDTH_BPS = 4e9;
const DEFAULT_DISK_BANDWIDTH_BPS = 1e9;

/** Prefill of a small CPU model: ~5k tokens/s plus 5 ms per call (a profile file replaces it). */
export function defaultCostModel(kvBytesPerToken: number, tiers: EngineTierOptions = {}): CostModel {
  return quadraticCostModel({
    prefillQuadratic: { a: 0, b: 2e-4, c: 0.005 },
    kvBytesPerToken,
    reloadBandwidthBps: {
      cpu: tiers.cpuBandwidthBps ?? DEFAULT_CPU_BANDWIDTH_BPS,
      disk: tiers.diskBandwidthBps ?? DEFAULT_DISK_BANDWIDTH_BPS,
    },
  });
}

/** What an engine is made of, sized from its options and its runner. */
export interface EngineParts {
  readonly scheduler: Scheduler;
  readonly tierStore: KvTierStore | null;
  readonly costs: CostModel;
  readonly calibratedCosts: CalibratedCostModel | null;
  readonly blockSizeTokens: number;
  /** the longest sequence (prompt and output) the pool and the runner hold */
  readonly maxContextTokens: number;
  /** one line for the banner: pool, streams, tiers */
  readonly kvSummary: string;
}

function gib(bytes: number): string {
  return `${Number((bytes / GIB).toFixed(2))} GiB`;
}

function size(bytes: number): string {
  return bytes >= GIB ? gib(bytes) : `${Number((bytes / 2 ** 20).toFixed(1))} MiB`;
}

/** The banner's words on a persistent disk tier: kept across restarts, and what this start found. */
function persistence(restored: RestoredTier | null): string {
  if (restored === null) return "";
  const found =
    restored.discarded !== null
      ? `the states found were not used: ${restored.discarded}`
      : restored.states === 0
        ? "no states found"
        : `${restored.states} state${restored.states === 1 ? "" : "s"} (${size(restored.bytes)}) restored`;
  const refused = restored.rejected.length > 0 ? `; not used: ${restored.rejected.join("; ")}` : "";
  return ` kept across restarts (${found}${refused})`;
}

/** Tokens per KV block, as vLLM's default `--block-size` (also the KV events' `block_size`). */
export const DEFAULT_BLOCK_SIZE_TOKENS = 16;

/**
 * The scheduler's pool sized to the runner's cells (less a small headroom), its run slots to the runner's
 * sequence slots (one kept for resident KV), its KV spec the runner's sequences, the tiers (the scheduler's
 * index, the store's bytes), and the TTL model's costs.
 */
export function buildEngineParts(options: EngineOptions, clock: Clock): EngineParts {
  const runner = options.runner;
  const recorder = options.recorder ?? null;
  const b = options.blockSizeTokens ?? DEFAULT_BLOCK_SIZE_TOKENS;
  const headroom = Math.min(256, Math.floor(runner.kvCells / 64));
  const poolTokens = Math.min(options.kvPoolTokens ?? runner.kvCells - headroom, runner.kvCells);
  const numBlocks = Math.floor(poolTokens / b);
  if (numBlocks < 2) throw new Error(`KV pool of ${poolTokens} tokens is too small`);
  // a running request needs a slot; keep at least one for resident (pinned / cached) KV
  const maxNumSeqs = options.maxNumSeqs ?? Math.max(1, Math.min(64, Math.floor(runner.maxSeqs / 2)));
  if (maxNumSeqs > runner.maxSeqs - 1) {
    throw new Error(`maxNumSeqs ${maxNumSeqs} needs more than the runner's ${runner.maxSeqs} slots`);
  }
  const maxContextTokens = Math.min(runner.maxContextTokens, numBlocks * b);

  const tierOpts = options.tiers ?? {};
  const maxNumBatchedTokens = options.maxNumBatchedTokens ?? 512;
  const calibratedCosts = options.costs
    ? null
    : new CalibratedCostModel(defaultCostModel(runner.kvBytesPerToken, tierOpts), maxNumBatchedTokens);
  const costs = options.costs ?? (calibratedCosts as CalibratedCostModel);
  const cpuBytes = Math.max(0, Math.floor(tierOpts.cpuBytes ?? 0));
  const diskBytes = Math.max(0, Math.floor(tierOpts.diskBytes ?? 0));
  const tiers = tierConfigs({
    cpuBytes,
    diskBytes,
    cpuBandwidthBps: tierOpts.cpuBandwidthBps ?? DEFAULT_CPU_BANDWIDTH_BPS,
    diskBandwidthBps: tierOpts.diskBandwidthBps ?? DEFAULT_DISK_BANDWIDTH_BPS,
  });
  const tierStore =
    tiers.length > 0
      ? new KvTierStore({
          cpuBytes,
          diskBytes,
          diskDir: tierOpts.diskDir ?? null,
          ...(runner.allocateStateBuffer ? { allocateState: runner.allocateStateBuffer.bind(runner) } : {}),
          ...(tierOpts.persistIdentity === undefined ? {} : { persistIdentity: tierOpts.persistIdentity }),
          ...(tierOpts.report ? { report: tierOpts.report } : {}),
        })
      : null;

  const kvSummary = [
    `${numBlocks * b} KV tokens`,
    ...(runner.kvLayout === "streams"
      ? [
          `${runner.maxSeqs} streams of ${Math.floor(runner.kvCells / runner.maxSeqs)} (longest sequence ${maxContextTokens - 1} tokens)`,
        ]
      : []),
    ...(cpuBytes > 0 ? [`RAM tier ${gib(cpuBytes)}`] : []),
    ...(diskBytes > 0 ? [`disk tier ${gib(diskBytes)}${persistence(tierStore?.restored ?? null)}`] : []),
    ...(runner.slidingWindow > 0
      ? [
          `sliding window of ${runner.slidingWindow}: a prefix programs share is kept as a checkpoint and copied`,
        ]
      : []),
  ].join(", ");

  const policy = typeof options.policy === "string" ? createPolicy(options.policy) : options.policy;
  const scheduler = new Scheduler(
    {
      numBlocks,
      blockSizeTokens: b,
      maxNumBatchedTokens,
      maxNumSeqs,
      kvBytesPerToken: runner.kvBytesPerToken,
      tiers,
      costs,
      ...(options.ttl ? { ttl: options.ttl } : {}),
      ...(options.maxPrograms ? { maxPrograms: options.maxPrograms } : {}),
      kvSpec: {
        kind: "llama-seq",
        numSeqs: runner.maxSeqs,
        cells: runner.kvCells,
        layout: runner.kvLayout,
        slidingWindow: runner.slidingWindow,
        runningOnly: (options.kvRunningOnly ?? false) && tiers.length > 0,
      },
    },
    {
      clock,
      policy,
      ...(recorder ? { recorder } : {}),
      ...(options.kvEvents ? { kvObserver: options.kvEvents } : {}),
    },
  );
  // a persistent tier's states are the scheduler's entries already: its next turns are planned as reloads
  if (tierStore && tierStore.found.length > 0) {
    const entries = scheduler.kv.sequences?.adopt(
      tierStore.found.map((state) => ({
        content: new TokenIdContent(state.tokens, b, state.rootHash),
        length: state.length,
        owner: state.owner,
        bytes: state.length * runner.kvBytesPerToken,
      })),
    );
    tierStore.bind(entries?.map((e) => e.id) ?? []);
  }
  tierStore?.describeEntries((id) => scheduler.kv.sequences?.tiers?.get(id));
  return {
    scheduler,
    tierStore,
    costs,
    calibratedCosts,
    blockSizeTokens: b,
    maxContextTokens,
    kvSummary,
  };
}
