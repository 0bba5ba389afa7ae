import { fitQuadratic, type Quadratic } from "../../core/profile/quadratic.js";
import { GPUS, type GpuId } from "./gpu-specs.js";
import { kvBytesPerToken, MODELS, type ModelId } from "./model-specs.js";
import { RooflineLatencyModel } from "./roofline-model.js";
import { bytesPerElement, type KvCacheDtype, rooflineSpecFor } from "./roofline-spec.js";
import type { LatencyModel } from "./step-latency.js";

export interface HardwareProfile {
  readonly id: string;
  readonly gpu: string;
  readonly model: string;
  readonly tensorParallel: number;
  readonly latency: LatencyModel;
  /** K and V of one token across every layer and every GPU of the tensor-parallel group */
  readonly kvBytesPerToken: number;
  /** tokens of KV the instance holds on its GPUs */
  readonly kvCapacityTokens: number;
  /** the longest prompt plus output one program can reach: the model's context window, at most the KV pool */
  readonly maxContextTokens: number;
  /** GPU-to-host KV copy bandwidth of the whole instance (each GPU of a TP group uses its own link) */
  readonly cpuOffloadBandwidthBps: number;
  readonly diskBandwidthBps: number;
  /** prefill seconds ~ a*tokens^2 + b*tokens + c: the paper's offline profile of latency.prefillS */
  readonly prefillQuadratic: Quadratic;
}

/** The paper's offline prefill profile: these context lengths, prefilled in 2048-token chunks. */
export const PREFILL_PROFILE_TOKENS: readonly number[] = [1000, 2000, 4000, 8000, 16000, 32000];
export const PREFILL_PROFILE_CHUNK_TOKENS = 2048;

// vLLM's default gpu_memory_utilization: the rest is left for activations and the CUDA context.
export const GPU_MEMORY_UTILIZATION = 0.9;

// One datacenter NVMe SSD (PCIe Gen4 x4 sequential reads ~5-7 GB/s), shared by the instance.
export const DISK_BANDWIDTH_BPS = 5e9;

const TENSOR_PARALLEL: Readonly<Record<ModelId, number>> = {
  "llama-3.1-8b": 1,
  "llama-3.1-70b": 4,
  "gemma-3-12b": 1,
};

/** Least-squares quadratic through latency.prefillS at the offline profile's context lengths. */
export function fitPrefillQuadratic(latency: LatencyModel): Quadratic {
  const seconds = PREFILL_PROFILE_TOKENS.map((tokens) =>
    latency.prefillS(tokens, PREFILL_PROFILE_CHUNK_TOKENS),
  );
  return fitQuadratic(PREFILL_PROFILE_TOKENS.map((x, i) => ({ x, y: seconds[i] as number })));
}

/** A profile whose prefillQuadratic is fitted on first read and then kept. */
export function withLazyPrefillQuadratic(fields: Omit<HardwareProfile, "prefillQuadratic">): HardwareProfile {
  let quadratic: Quadratic | undefined;
  return {
    ...fields,
    get prefillQuadratic() {
      quadratic ??= fitPrefillQuadratic(fields.latency);
      return quadratic;
    },
  };
}

function rooflineModelOf(gpuId: GpuId, modelId: ModelId, kvCacheDtype: KvCacheDtype): RooflineLatencyModel {
  return new RooflineLatencyModel(
    rooflineSpecFor(GPUS[gpuId], MODELS[modelId], TENSOR_PARALLEL[modelId], { kvCacheDtype }),
  );
}

/** bf16 weights; the KV cache in `kvCacheDtype` (fp8: half the bytes per token, twice the tokens). */
function buildProfile(gpuId: GpuId, modelId: ModelId, kvCacheDtype: KvCacheDtype): HardwareProfile {
  const gpu = GPUS[gpuId];
  const shape = MODELS[modelId];
  const tp = TENSOR_PARALLEL[modelId];
  const bf16Bytes = 2;
  const kvBytes = kvBytesPerToken(shape, bytesPerElement(kvCacheDtype));
  const weightBytesPerGpu = (shape.totalParams * bf16Bytes) / tp;
  const kvBytesPerGpu = gpu.memoryBytes * GPU_MEMORY_UTILIZATION - weightBytesPerGpu;
  if (kvBytesPerGpu <= 0) throw new Error(`${shape.name} at TP${tp} does not fit on ${gpu.name}`);
  return withLazyPrefillQuadratic({
    id: profileId(gpuId, modelId, kvCacheDtype),
    gpu: gpuId,
    model: modelId,
    tensorParallel: tp,
    latency: rooflineModelOf(gpuId, modelId, kvCacheDtype),
    kvBytesPerToken: kvBytes,
    kvCapacityTokens: Math.floor(kvBytesPerGpu / (kvBytes / tp)),
    maxContextTokens: Math.min(shape.contextTokens, Math.floor(kvBytesPerGpu / (kvBytes / tp))),
    cpuOffloadBandwidthBps: gpu.cpuOffloadBandwidthBps * tp,
    diskBandwidthBps: DISK_BANDWIDTH_BPS,
  });
}

function profileId(gpu: string, model: string, kvCacheDtype: KvCacheDtype = "bf16"): string {
  return kvCacheDtype === "bf16" ? `${gpu}/${model}` : `${gpu}/${model}/kv-${kvCacheDtype}`;
}

const cache = new Map<string, HardwareProfile>();

function isGpuId(id: string): id is GpuId {
  return Object.hasOwn(GPUS, id);
}

function isModelId(id: string): id is ModelId {
  return Object.hasOwn(MODELS, id);
}

function unknownProfile(gpu: string, model: string): Error {
  return new Error(
    `unknown hardware profile ${profileId(gpu, model)}: gpu must be one of ${Object.keys(GPUS).join(", ")}` +
      ` and model one of ${Object.keys(MODELS).join(", ")}`,
  );
}

/** The step model of a shipped profile as a roofline, whose steps split by component (`breakdown`). */
export function getRooflineModel(
  gpu: string,
  model: string,
  kvCacheDtype: KvCacheDtype = "bf16",
): RooflineLatencyModel {
  if (!isGpuId(gpu) || !isModelId(model)) throw unknownProfile(gpu, model);
  return rooflineModelOf(gpu, model, kvCacheDtype);
}

/** The shipped profile for a GPU, model and KV cache dtype; the same object on every call. */
export function getProfile(gpu: string, model: string, kvCacheDtype: KvCacheDtype = "bf16"): HardwareProfile {
  if (!isGpuId(gpu) || !isModelId(model)) throw unknownProfile(gpu, model);
  const id = profileId(gpu, model, kvCacheDtype);
  let profile = cache.get(id);
  if (!profile) {
    profile = buildProfile(gpu, model, kvCacheDtype);
    cache.set(id, profile);
  }
  return profile;
}

export function listProfiles(): HardwareProfile[] {
  const gpus = Object.keys(GPUS) as GpuId[];
  const models = Object.keys(MODELS) as ModelId[];
  return gpus.flatMap((gpu) => models.map((model) => getProfile(gpu, model)));
}
