import type { GpuSpec } from "./gpu-specs.js";
import { linearParams, type ModelShape } from "./model-specs.js";
import type { RooflineSpec } from "./roofline-model.js";

export type Precision = "bf16" | "fp8";

export interface RooflineOptions {
  /** weights, activations and KV cache; fp8 also runs the linear layers on fp8 tensor cores */
  readonly precision?: Precision;
  readonly stepOverheadS?: number;
}

// Scheduling, input preparation and sampling outside the kernels: ~1-2 ms per step for vLLM-class
// engines with CUDA graphs. Assumed, not calibrated: no public measurement isolates it.
export const DEFAULT_STEP_OVERHEAD_S = 1.5e-3;

/** Derives every roofline number for `shape` sharded over `tensorParallel` GPUs of type `gpu`. */
export function rooflineSpecFor(
  gpu: GpuSpec,
  shape: ModelShape,
  tensorParallel: number,
  options: RooflineOptions = {},
): RooflineSpec {
  const precision = options.precision ?? "bf16";
  const bytesPerValue = precision === "fp8" ? 1 : 2;
  const matmulFlops = precision === "fp8" ? gpu.fp8Flops : gpu.bf16Flops;
  const matmulEfficiency = precision === "fp8" ? gpu.fp8MatmulEfficiency : gpu.matmulEfficiency;
  if (matmulFlops === undefined || matmulEfficiency === undefined) {
    throw new Error(`${gpu.name} has no ${precision} tensor cores`);
  }
  const tp = tensorParallel;
  const linearParamsPerGpu = linearParams(shape) / tp;
  const lmHeadParamsPerGpu = (shape.vocabSize * shape.hiddenSize) / tp;
  return {
    name: `${gpu.id}/${shape.name}/TP${tp}/${precision}`,
    stepOverheadS: options.stepOverheadS ?? DEFAULT_STEP_OVERHEAD_S,
    linearWeightBytes: linearParamsPerGpu * bytesPerValue,
    linearFlopsPerToken: 2 * linearParamsPerGpu,
    lmHeadWeightBytes: lmHeadParamsPerGpu * bytesPerValue,
    lmHeadFlopsPerRow: 2 * lmHeadParamsPerGpu,
    hbmBandwidthBps: gpu.hbmBandwidthBps,
    weightReadEfficiency: gpu.weightReadEfficiency,
    matmulFlops,
    matmulEfficiency,
    rooflineKneeExponent: 2,
    layers: shape.layers,
    slidingWindowLayers: shape.slidingWindowLayers,
    slidingWindowTokens: shape.slidingWindowTokens,
    attentionFlopsPerQueryKey: (4 * shape.attentionHeads * shape.headDim) / tp,
    attentionFlops: gpu.bf16Flops,
    attentionMatmulEfficiency: gpu.attentionMatmulEfficiency,
    kvBytesPerTokenLayer: (2 * shape.kvHeads * shape.headDim * bytesPerValue) / tp,
    kvReadEfficiency: gpu.kvReadEfficiency,
    attentionKernelS: gpu.attentionKernelS,
    tensorParallel: tp,
    // activations stay bf16 on the wire even with fp8 weights
    allReduceBytesPerToken: shape.hiddenSize * 2,
    allReduceBusBandwidthBps: gpu.allReduceBusBandwidthBps,
    allReduceLatencyS: gpu.allReduceLatencyS,
  };
}
