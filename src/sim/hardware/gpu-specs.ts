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
  /** streaming multiprocessors: how many (sequence, KV head) pairs fill the GPU in decode attention */
  readonly multiprocessors: number;
  /** GEMMs streaming their weights in the memory-bound regime (1-token steps) */
  readonly weightReadEfficiency: number;
  /** GEMMs in the compute-bound regime (thousands of tokens per step) */
  readonly matmulEfficiency: number;
  /** the same for fp8 linear layers, as a fraction of the fp8 peak (undefined without fp8 tensor cores) */
  readonly fp8MatmulEfficiency: number | undefined;
  /**
   * per layer: the fixed time of the small kernels between the GEMMs (norms, RoPE, activation, residual
   * adds), which a step pays however few tokens it carries
   */
  readonly layerKernelsS: number;
  /** those kernels moving activations: the fraction of HBM bandwidth they reach */
  readonly elementwiseEfficiency: number;
  /** attention's tensor-core work (prefill, and decode's padded query tiles) as a fraction of bf16 peak */
  readonly attentionMatmulEfficiency: number;
  /** decode attention reading the KV cache */
  readonly kvReadEfficiency: number;
  /** per layer and attention kernel: launch and tail time that does not shrink with work */
  readonly attentionKernelS: number;
  /**
   * query rows of the decode attention kernel's tile: a GQA group's query heads (one row each) are padded
   * up to it, and every row is multiplied against every key. `standard` when there are enough (sequence,
   * KV head) pairs to fill the GPU; `splitKv` when the kernel instead splits each sequence's keys across
   * multiprocessors (flash-decoding). 1: no padding.
   */
  readonly decodeQueryTileRows: { readonly standard: number; readonly splitKv: number };
  /** NCCL all_reduce bus bandwidth inside one NVLink domain, and its small-message latency */
  readonly allReduceBusBandwidthBps: number;
  readonly allReduceLatencyS: number;
  /** GPU-to-host copy bandwidth per GPU for CPU offload */
  readonly cpuOffloadBandwidthBps: number;
}

const MIB = 1024 * 1024;

// Vidur A100 profiles, sums of per-layer operator medians (see calibration.test.ts). Llama-3-8B TP1: the
// four GEMMs stream 13.96 GB of weights in 8.83 ms at 1 token (0.775 of 2.039 TB/s) and run 226 TFLOPS at
// >= 2048 tokens (0.723 of 312); the other six operators (norms, RoPE, activation, residual adds,
// embedding) take 0.96 ms at 1 token (30 us per layer) and 7.46 us per token at >= 2048 tokens (6.03 MB
// of activations at 0.396 of HBM bandwidth). Llama-3-70B TP4 agrees (0.736, 0.748, 29 us, 0.376).
// FlashInfer decode attention, A100, Llama-3-8B, per layer: 0.040 ms at batch 1 / 9.5k context and
// 0.755 ms at batch 32 / 9.2k context; two equations in (fixed time, bandwidth) give 16.2 us and
// 1.632 TB/s = 0.80 of peak. FlashInfer's decode kernel computes a GQA group's query heads as they are
// (no tensor-core tile to pad them to), so its arithmetic never binds.
const A100: GpuSpec = {
  id: "a100",
  name: "NVIDIA A100 SXM 80GB",
  memoryBytes: 81920 * MIB,
  hbmBandwidthBps: 2.039e12,
  bf16Flops: 312e12,
  fp8Flops: undefined,
  fp8MatmulEfficiency: undefined,
  multiprocessors: 108,
  weightReadEfficiency: 0.775,
  matmulEfficiency: 0.723,
  layerKernelsS: 30e-6,
  elementwiseEfficiency: 0.396,
  // FlashAttention-2 reaches 50-73% of peak in its forward pass on A100; not calibrated here
  attentionMatmulEfficiency: 0.5,
  kvReadEfficiency: 0.8,
  attentionKernelS: 16.2e-6,
  decodeQueryTileRows: { standard: 1, splitKv: 1 },
  // NVLink 3 (600 GB/s total); nccl-tests all_reduce bus bandwidth is typically ~230 GB/s
  allReduceBusBandwidthBps: 230e9,
  allReduceLatencyS: 8e-6,
  // PCIe Gen4 x16: 32 GB/s theoretical, ~25 GB/s achieved for pinned copies
  cpuOffloadBandwidthBps: 25e9,
};

// Hopper: whole steps of a Llama-3.1-8B-shaped model in PyTorch (cuBLAS GEMMs, SDPA attention, CUDA graphs
// for decode; ../shared/calibration/gpu/, docs/simulator.md "Fidelity") and Vidur's H100 Llama-2-7B
// operators. From Vidur: the GEMMs stream 12.95 GB in 4.99 ms at 1 token (0.775 of 3.35 TB/s, as on
// A100); the other operators take 21 us per layer at 1 token and 3.97 us per token at >= 2048 tokens
// (5.78 MB at 0.435 of HBM bandwidth). Fitted to the 27 H100 steps alone (least squares in log error,
// the H200 file held out): GEMMs at 0.69 of bf16 peak (Vidur's 7B: 0.716), attention's tensor-core work
// at 0.33 (FlashAttention-2's 35% on H100, as the FlashAttention-3 paper reports it) and KV reads at 0.94
// of HBM bandwidth. SDPA's decode kernel (FlashAttention-2) pads a GQA group's 4 query heads to a
// 128-row tile, or to 64 rows in its split-KV kernel (when sequences x KV heads < 1.6 x SMs): with many
// sequences its tensor cores, not HBM, bound decode attention. vLLM's FlashAttention-3 / FlashInfer
// kernels pack the group and run nearer 75% of peak, so for vLLM this model is pessimistic on long-context
// prefill and on decode attention at 27+ sequences.
const H100: GpuSpec = {
  id: "h100",
  name: "NVIDIA H100 SXM 80GB",
  memoryBytes: 81559 * MIB,
  hbmBandwidthBps: 3.35e12,
  bf16Flops: 989e12,
  fp8Flops: 1979e12,
  multiprocessors: 132,
  weightReadEfficiency: 0.775,
  matmulEfficiency: 0.69,
  // fp8 GEMMs reach 0.9 of bf16's fraction of peak (per-tensor scaling, bf16 outputs): chosen against
  // TensorRT-LLM's compute-bound 128/128 throughput (3.5% under it with the bf16 fraction fitted above).
  fp8MatmulEfficiency: 0.69 * 0.9,
  layerKernelsS: 21e-6,
  elementwiseEfficiency: 0.435,
  attentionMatmulEfficiency: 0.33,
  kvReadEfficiency: 0.94,
  attentionKernelS: 16.2e-6,
  decodeQueryTileRows: { standard: 128, splitKv: 64 },
  // NVLink 4 (900 GB/s total)
  allReduceBusBandwidthBps: 360e9,
  allReduceLatencyS: 8e-6,
  // PCIe Gen5 class; LMCache measured 41-44 GB/s store/retrieve
  cpuOffloadBandwidthBps: 40e9,
};

// Same Hopper die, clocks and SM count as H100 with more and faster HBM3e; every efficiency is H100's
// (the H200 steps are predicted, not fitted).
const H200: GpuSpec = {
  ...H100,
  id: "h200",
  name: "NVIDIA H200 SXM 141GB",
  memoryBytes: 143771 * MIB,
  hbmBandwidthBps: 4.8e12,
};

// No public kernel profile: datasheet peaks (2.25 PFLOPS dense bf16, ~2.3x H100; 8 TB/s HBM3e; 148 SMs)
// with H100 efficiencies.
const B200: GpuSpec = {
  ...H100,
  id: "b200",
  name: "NVIDIA B200 180GB",
  memoryBytes: 180e9,
  hbmBandwidthBps: 8e12,
  bf16Flops: 2250e12,
  fp8Flops: 4500e12,
  multiprocessors: 148,
  // NVLink 5 (1.8 TB/s total)
  allReduceBusBandwidthBps: 720e9,
};

export const GPUS: Readonly<Record<GpuId, GpuSpec>> = { a100: A100, h100: H100, h200: H200, b200: B200 };
