import type { GpuSpec } from "./gpu-specs.js";
import { linearParams, type ModelShape } from "./model-specs.js";
import type { RooflineSpec } from "./roofline-model.js";

export type Precision = "bf16" | "fp8";

/** The KV cache's element type: fp8 halves its bytes per token (pool, offload tiers, attention reads). */
export type KvCacheDtype = Precision;
export const KV_CACHE_DTYPES: readonly KvCacheDtype[] = ["bf16", "fp8"];

export function bytesPerElement(precision: Precision): number {
  return precision === "fp8" ? 1 : 2;
}

export interface RooflineOptions {
  /** weights, activations and KV cache; fp8 also runs the linear layers on fp8 tensor cores */
  readonly precision?: Precision;
  /**
   * the KV cache alone, when it differs from `precision` (default: `precision`): attention reads its bytes,
   * but its FLOPs stay bf16 (fp8 K and V are dequantized in the kernel, as vLLM's and FlashInfer's do)
   */
  readonly kvCacheDtype?: KvCacheDtype;
  readonly stepOverheadS?: number;
}

// Scheduling, input preparation and sampling outside the kernels: ~1-2 ms per step for vLLM-class
// engines with CUDA graphs. Assumed, not calibrated: no public measurement isolates it.
export const DEFAULT_STEP_OVERHEAD_S = 1.5e-3;

// FlashAttention-2 splits each sequence's keys across multiprocessors (flash-decoding) unless the
// (sequence, KV head) pairs, one 128-thread block each, fill 80% of two blocks per multiprocessor.
const SPLIT_KV_BELOW_BLOCKS_PER_MULTIPROCESSOR = 0.8 * 2;

/**
 * Activation bytes one token moves through the small kernels of one layer, per GPU: two RMSNorms (read
 * and write the hidden state), RoPE on its queries and keys (read and write), the gated activation (read
 * gate and up, write one) and two residual adds (read two, write one). Sharded dimensions split over TP.
 */
function elementwiseBytesPerTokenLayer(shape: ModelShape, tensorParallel: number): number {
  const bf16 = 2;
  const h = shape.hiddenSize;
  const rotated = ((shape.attentionHeads + shape.kvHeads) * shape.headDim) / tensorParallel;
  const intermediate = shape.intermediateSize / tensorParallel;
  return bf16 * (2 * 2 * h + 2 * rotated + 3 * intermediate + 2 * 3 * h);
}

/** Query rows per (sequence, KV head) in a decode attention tile: the GQA group padded up to the tile. */
function paddedQueryRows(shape: ModelShape, tileRows: number): number {
  const group = shape.attentionHeads / shape.kvHeads;
  return Math.ceil(group / tileRows) * tileRows;
}

/** Derives every roofline number for `shape` sharded over `tensorParallel` GPUs of type `gpu`. */
export function rooflineSpecFor(
  gpu: GpuSpec,
  shape: ModelShape,
  tensorParallel: number,
  options: RooflineOptions = {},
): RooflineSpec {
  const precision = options.precision ?? "bf16";
  const bytesPerValue = bytesPerElement(precision);
  const kvDtype = options.kvCacheDtype ?? precision;
  const matmulFlops = precision === "fp8" ? gpu.fp8Flops : gpu.bf16Flops;
  const matmulEfficiency = precision === "fp8" ? gpu.fp8MatmulEfficiency : gpu.matmulEfficiency;
  if (matmulFlops === undefined || matmulEfficiency === undefined) {
    throw new Error(`${gpu.name} has no ${precision} tensor cores`);
  }
  const tp = tensorParallel;
  const linearParamsPerGpu = linearParams(shape) / tp;
  const lmHeadParamsPerGpu = (shape.vocabSize * shape.hiddenSize) / tp;
  const kvHeadsPerGpu = shape.kvHeads / tp;
  // per key and layer: QK^T and PV (2 FLOPs per multiply-add each) for every padded query row
  const decodeFlopsPerKey = (tileRows: number) =>
    4 * kvHeadsPerGpu * paddedQueryRows(shape, tileRows) * shape.headDim;
  return {
    name: `${gpu.id}/${shape.name}/TP${tp}/${precision}${kvDtype === precision ? "" : `/kv-${kvDtype}`}`,
    stepOverheadS: options.stepOverheadS ?? DEFAULT_STEP_OVERHEAD_S,
    linearWeightBytes: linearParamsPerGpu * bytesPerValue,
    linearFlopsPerToken: 2 * linearParamsPerGpu,
    lmHeadWeightBytes: lmHeadParamsPerGpu * bytesPerValue,
    lmHeadFlopsPerRow: 2 * lmHeadParamsPerGpu,
    hbmBandwidthBps: gpu.hbmBandwidthBps,
    weightReadEfficiency: gpu.weightReadEfficiency,
    layerKernelsS: gpu.layerKernelsS,
    elementwiseBytesPerToken: elementwiseBytesPerTokenLayer(shape, tp) * shape.layers,
    elementwiseEfficiency: gpu.elementwiseEfficiency,
    matmulFlops,
    matmulEfficiency,
    rooflineKneeExponent: 2,
    layers: shape.layers,
    slidingWindowLayers: shape.slidingWindowLayers,
    slidingWindowTokens: shape.slidingWindowTokens,
    attentionFlopsPerQueryKey: (4 * shape.attentionHeads * shape.headDim) / tp,
    attentionFlops: gpu.bf16Flops,
    attentionMatmulEfficiency: gpu.attentionMatmulEfficiency,
    kvBytesPerTokenLayer: (2 * shape.kvHeads * shape.headDim * bytesPerElement(kvDtype)) / tp,
    kvReadEfficiency: gpu.kvReadEfficiency,
    decodeAttentionFlopsPerKey: {
      standard: decodeFlopsPerKey(gpu.decodeQueryTileRows.standard),
      splitKv: decodeFlopsPerKey(gpu.decodeQueryTileRows.splitKv),
    },
    splitKvBelowSequences: (SPLIT_KV_BELOW_BLOCKS_PER_MULTIPROCESSOR * gpu.multiprocessors) / kvHeadsPerGpu,
    attentionKernelS: gpu.attentionKernelS,
    tensorParallel: tp,
    // activations stay bf16 on the wire even with fp8 weights
    allReduceBytesPerToken: shape.hiddenSize * 2,
    allReduceBusBandwidthBps: gpu.allReduceBusBandwidthBps,
    allReduceLatencyS: gpu.allReduceLatencyS,
  };
}
