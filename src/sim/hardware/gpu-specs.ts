export type GpuId = "a100" | "h100" | "h200" | "b200";

/**
 * Datasheet numbers plus efficiencies: the fraction of a datasheet peak the kernels reach, calibrated
 * where measurements exist (see docs/profile-format.md, "Calibration") and borrowed otherwise.
 */
export interface GpuSpec {
  readonly id: GpuId;
  readonly name: string;
  readonly memoryBytes: number;
  readonly hbmBandwidthBps: number;
  /** dense (no sparsity) tensor-core peaks */
  readonly bf16Flops: number;
  readonly fp8Flops: number | undefined;
  /** weight streaming in the memory-bound regime (1-token steps) */
  readonly weightReadEfficiency: number;
  /** linear layers in the compute-bound regime (thousands of tokens per step) */
  readonly matmulEfficiency: number;
  /** the same for fp8 linear layers, as a fraction of the fp8 peak (undefined without fp8 tensor cores) */
  readonly fp8MatmulEfficiency: number | undefined;
  /** prefill attention (FlashAttention-class kernels) */
  readonly attentionMatmulEfficiency: number;
  /** decode attention reading the KV cache */
  readonly kvReadEfficiency: number;
  /** per layer and attention kernel: launch and tail time that does not shrink with work */
  readonly attentionKernelS: number;
  /** NCCL all_reduce bus bandwidth inside one NVLink domain, and its small-message latency */
  readonly allReduceBusBandwidthBps: number;
  readonly allReduceLatencyS: number;
  /** GPU-to-host copy bandwidth per GPU for CPU offload */
  readonly cpuOffloadBandwidthBps: number;
}

const MIB = 1024 * 1024;

// Vidur A100 profiles, sum of per-layer operator medians (see calibration.test.ts):
// Llama-3-8B TP1 streams its 13.96 GB of linear weights in 9.79 ms at 1 token (0.699 of 2.039 TB/s),
// Llama-3-70B TP4 its 34.2 GB per GPU in 25.1 ms (0.668); both run ~204 TFLOPS at >= 2048 tokens
// (0.645 and 0.648 of 312 TFLOPS).
// FlashInfer decode attention, A100, Llama-3-8B, per layer: 0.040 ms at batch 1 / 9.5k context and
// 0.755 ms at batch 32 / 9.2k context; two equations in (fixed time, bandwidth) give 16.2 us and
// 1.632 TB/s = 0.80 of peak.
const A100: GpuSpec = {
  id: "a100",
  name: "NVIDIA A100 SXM 80GB",
  memoryBytes: 81920 * MIB,
  hbmBandwidthBps: 2.039e12,
  bf16Flops: 312e12,
  fp8Flops: undefined,
  fp8MatmulEfficiency: undefined,
  weightReadEfficiency: 0.685,
  matmulEfficiency: 0.646,
  // FlashAttention-2 reaches 50-73% of peak in its forward pass on A100; not calibrated here
  attentionMatmulEfficiency: 0.5,
  kvReadEfficiency: 0.8,
  attentionKernelS: 16.2e-6,
  // NVLink 3 (600 GB/s total); nccl-tests all_reduce bus bandwidth is typically ~230 GB/s
  allReduceBusBandwidthBps: 230e9,
  allReduceLatencyS: 8e-6,
  // PCIe Gen4 x16: 32 GB/s theoretical, ~25 GB/s achieved for pinned copies
  cpuOffloadBandwidthBps: 25e9,
};

// Vidur H100 Llama-2-7B TP1 (the only 7-8B H100 profile published): 12.95 GB of linear weights in
// 5.66 ms at 1 token (0.683 of 3.35 TB/s); 44.9k tokens/s at >= 2048 tokens = 582 TFLOPS (0.588 of 989).
// No H100 attention measurement: decode/prefill attention efficiencies are carried over from A100.
const H100: GpuSpec = {
  id: "h100",
  name: "NVIDIA H100 SXM 80GB",
  memoryBytes: 81559 * MIB,
  hbmBandwidthBps: 3.35e12,
  bf16Flops: 989e12,
  fp8Flops: 1979e12,
  weightReadEfficiency: 0.683,
  matmulEfficiency: 0.588,
  // fp8 GEMMs reach 0.9 of bf16's fraction of peak (per-tensor scaling, bf16 outputs): fitted to
  // TensorRT-LLM's compute-bound 128/128 throughput; the same value keeps 2048/128 and 20000/2000 within 15%.
  fp8MatmulEfficiency: 0.588 * 0.9,
  attentionMatmulEfficiency: 0.5,
  kvReadEfficiency: 0.8,
  attentionKernelS: 16.2e-6,
  // NVLink 4 (900 GB/s total)
  allReduceBusBandwidthBps: 360e9,
  allReduceLatencyS: 8e-6,
  // PCIe Gen5 class; LMCache measured 41-44 GB/s store/retrieve
  cpuOffloadBandwidthBps: 40e9,
};

// Same Hopper die and clocks as H100 with more and faster HBM3e; efficiencies carried over from H100.
const H200: GpuSpec = {
  ...H100,
  id: "h200",
  name: "NVIDIA H200 SXM 141GB",
  memoryBytes: 143771 * MIB,
  hbmBandwidthBps: 4.8e12,
};

// No public kernel profile: datasheet peaks (2.25 PFLOPS dense bf16, ~2.3x H100; 8 TB/s HBM3e) with
// H100 efficiencies.
const B200: GpuSpec = {
  ...H100,
  id: "b200",
  name: "NVIDIA B200 180GB",
  memoryBytes: 180e9,
  hbmBandwidthBps: 8e12,
  bf16Flops: 2250e12,
  fp8Flops: 4500e12,
  // NVLink 5 (1.8 TB/s total)
  allReduceBusBandwidthBps: 720e9,
};

export const GPUS: Readonly<Record<GpuId, GpuSpec>> = { a100: A100, h100: H100, h200: H200, b200: B200 };
