/**
 * `continuum profile`'s driver: opens the model the way `continuum serve` does (LlamaModelRunner: its KV
 * layout, flash attention, the same nBatch), runs the measurements, and returns the
 * `continuum-profile` document.
 */
import { basename } from "node:path";
import { setUpGpuBackend } from "../engine/gpu/gpu-backend-setup.js";
import { measureHostCopyBandwidth } from "../engine/native/llama-native.js";
import { defaultThreads, LlamaModelRunner } from "../engine/runners/llama-model-runner.js";
import type { KvLayout } from "../engine/runners/model-runner.js";
import { type BuiltinPreset, ensureBuiltinModel } from "../gguf/index.js";
import {
  buildProfile,
  type ContinuumProfileFile,
  deviceId,
  type ProfileMeasurements,
} from "./build-profile.js";
import {
  measureDecode,
  measureEngineOverhead,
  measureOffload,
  measurePrefill,
  measurePrefillChunks,
  type ProfilePlan,
  type ProgressLog,
} from "./measure.js";

export interface RunProfileOptions {
  /** a GGUF file; without it the built-in `builtinModel` is generated */
  readonly modelPath?: string;
  readonly builtinModel?: BuiltinPreset;
  /** model name in the profile (default: the GGUF's general.name, else the file name) */
  readonly modelName?: string;
  /** device id in the profile (default: cpu-<CPU model name>, or <backend>-<GPU name> on a GPU) */
  readonly device?: string;
  /** CPU threads (default: cores - 1, like serve) */
  readonly threads?: number;
  /** rows per llama_decode = serve's --max-num-batched-tokens (default 512) */
  readonly nBatch?: number;
  /** KV cells of the pool = serve's --kv-cache-tokens (default 16384) */
  readonly kvCacheTokens?: number;
  /** serve's --kv-layout (default unified); with streams each sequence is measured in its own stream */
  readonly kvLayout?: KvLayout;
  /** a smaller plan that runs in seconds (tests) */
  readonly quick?: boolean;
  /** overrides of the measurement plan */
  readonly plan?: Partial<ProfilePlan>;
  /** directory for the disk-tier measurement (default: the OS temp dir) */
  readonly diskDir?: string;
  readonly log?: ProgressLog;
}

export const DEFAULT_PLAN: ProfilePlan = {
  prefillTokens: [256, 512, 1024, 2048, 4096, 8192],
  prefillRepeats: 3,
  // CPU kernels change with the row count (a 48-row chunk can cost more than a 64-row one): sample densely
  chunkTokens: [8, 16, 32, 48, 64, 128, 256, 512],
  chunkContexts: [0, 512, 1024, 2048, 4096],
  decodeBatches: [1, 2, 4, 8, 16, 32],
  decodeContexts: [0, 512, 2048, 8192],
  decodeSteps: 6,
  offloadTokens: 4096,
  offloadRepeats: 3,
  overheadRequests: 4,
  overheadTokens: 48,
};

export const QUICK_PLAN: ProfilePlan = {
  prefillTokens: [128, 256, 512, 1024, 2048],
  prefillRepeats: 2,
  chunkTokens: [16, 128],
  chunkContexts: [0, 512],
  decodeBatches: [1, 2, 4, 8],
  decodeContexts: [0, 512],
  decodeSteps: 4,
  offloadTokens: 1024,
  offloadRepeats: 2,
  overheadRequests: 2,
  overheadTokens: 16,
};

/** The plan for a model: lengths that fit one sequence (its training context, its stream) and the pool. */
export function planFor(
  base: ProfilePlan,
  limits: { maxContextTokens: number; kvCells: number },
  overrides: Partial<ProfilePlan> = {},
): ProfilePlan {
  const plan = { ...base, ...overrides };
  const maxTokens = Math.min(limits.maxContextTokens, limits.kvCells - 16);
  const prefillTokens = plan.prefillTokens.filter((t) => t <= maxTokens);
  if (prefillTokens.length < 3) {
    throw new Error(
      `profile: fewer than 3 prefill lengths fit a context of ${maxTokens} tokens (${plan.prefillTokens.join(", ")})`,
    );
  }
  return {
    ...plan,
    prefillTokens,
    decodeContexts: plan.decodeContexts.filter((c) => c < maxTokens),
    chunkContexts: plan.chunkContexts.filter((c) => c < maxTokens),
    offloadTokens: Math.min(plan.offloadTokens, maxTokens),
  };
}

export async function runProfile(options: RunProfileOptions = {}): Promise<ContinuumProfileFile> {
  const log = options.log ?? (() => {});
  const t0 = performance.now();
  const preset = options.builtinModel ?? (options.quick ? "tiny" : "small");
  const modelPath = options.modelPath ?? (await ensureBuiltinModel({ preset }));
  const threads = options.threads ?? defaultThreads();
  const nBatch = options.nBatch ?? 512;
  const kvCells = options.kvCacheTokens ?? 16384;
  const base = options.quick ? QUICK_PLAN : DEFAULT_PLAN;
  const maxBatch = Math.max(...(options.plan?.decodeBatches ?? base.decodeBatches));
  const kvLayout = options.kvLayout ?? "unified";
  await setUpGpuBackend({ modelPath, gpuLayers: "auto" });
  const runner = await LlamaModelRunner.open({
    modelPath,
    kvCells,
    kvLayout,
    // streams: one per sequence of the largest decode batch and one more, as serve's slots, each as large as it can be
    maxSeqs: kvLayout === "streams" ? maxBatch + 1 : Math.min(256, Math.max(maxBatch, 16) + 1),
    batchTokens: nBatch,
    threads,
  });
  try {
    const plan = planFor(
      base,
      { maxContextTokens: runner.maxContextTokens, kvCells: runner.kvCells },
      options.plan ?? {},
    );
    const model =
      options.modelName ??
      (options.modelPath
        ? (runner.model.meta("general.name") ?? basename(modelPath, ".gguf"))
        : `continuum-${preset}`);
    log(
      `profiling ${model} (${modelPath}) with ${threads} threads, nBatch ${nBatch}, ${runner.kvCells} KV cells` +
        (kvLayout === "streams" ? ` in ${runner.maxSeqs} streams of ${runner.maxContextTokens}` : ""),
    );
    const offload = await measureOffload(runner, plan, nBatch, options.diskDir, log);
    const prefill = await measurePrefill(runner, plan, nBatch, log);
    const prefillChunks = await measurePrefillChunks(runner, plan, nBatch, log);
    const decode = await measureDecode(runner, plan, nBatch, log);
    const engineOverhead = await measureEngineOverhead(runner, plan, nBatch, log);
    const hostCopy = measureHostCopyBandwidth(offload.bytes);
    if (hostCopy) {
      log(
        `GPU copies of ${(offload.bytes / 2 ** 20).toFixed(0)} MiB: pinned ${(hostCopy.pinned.hostToDeviceBps / 1e9).toFixed(1)} GB/s to the GPU, ` +
          `${(hostCopy.pinned.deviceToHostBps / 1e9).toFixed(1)} GB/s back; pageable ${(hostCopy.pageable.hostToDeviceBps / 1e9).toFixed(1)} / ${(hostCopy.pageable.deviceToHostBps / 1e9).toFixed(1)} GB/s`,
      );
    }
    const measurements: ProfileMeasurements = {
      prefill,
      prefillChunks,
      decode,
      offload,
      engineOverhead,
      hostCopy,
    };
    const seconds = (performance.now() - t0) / 1000;
    return buildProfile(
      {
        device: options.device ?? deviceId(runner.device),
        deviceInfo: runner.device,
        model,
        threads,
        kvBytesPerToken: runner.kvBytesPerToken,
        // what the engine's scheduler accounts for: the pool minus its headroom (engine.ts)
        kvCapacityTokens: runner.kvCells - Math.min(256, Math.floor(runner.kvCells / 64)),
        nBatch,
      },
      measurements,
      { seconds },
    );
  } finally {
    await runner.close();
  }
}
