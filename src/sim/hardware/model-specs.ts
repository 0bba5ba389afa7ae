export type ModelId = "llama-3.1-8b" | "llama-3.1-70b" | "gemma-3-12b";

/** Published transformer shapes (Hugging Face config.json), enough to count bytes and FLOPs. */
export interface ModelShape {
  readonly name: string;
  readonly layers: number;
  readonly hiddenSize: number;
  readonly intermediateSize: number;
  readonly attentionHeads: number;
  readonly kvHeads: number;
  readonly headDim: number;
  readonly vocabSize: number;
  /** every parameter held in GPU memory (embeddings, vision tower), for the KV capacity */
  readonly totalParams: number;
  /** layers attending only to the last slidingWindowTokens keys; the rest attend to everything */
  readonly slidingWindowLayers: number;
  readonly slidingWindowTokens: number;
  /** the context window: the longest prompt plus output the model serves */
  readonly contextTokens: number;
}

export const LLAMA_3_1_8B: ModelShape = {
  name: "Llama-3.1-8B",
  layers: 32,
  hiddenSize: 4096,
  intermediateSize: 14336,
  attentionHeads: 32,
  kvHeads: 8,
  headDim: 128,
  vocabSize: 128256,
  totalParams: 8.03e9,
  slidingWindowLayers: 0,
  slidingWindowTokens: 0,
  contextTokens: 131_072,
};

export const LLAMA_3_1_70B: ModelShape = {
  name: "Llama-3.1-70B",
  layers: 80,
  hiddenSize: 8192,
  intermediateSize: 28672,
  attentionHeads: 64,
  kvHeads: 8,
  headDim: 128,
  vocabSize: 128256,
  totalParams: 70.55e9,
  slidingWindowLayers: 0,
  slidingWindowTokens: 0,
  contextTokens: 131_072,
};

// Gemma 3 interleaves five 1024-token sliding-window layers with one global layer: 40 local + 8 global.
// 11.77B text parameters (262k-entry tied embedding) plus the ~0.42B SigLIP vision tower of the -it model.
export const GEMMA_3_12B: ModelShape = {
  name: "Gemma-3-12B",
  layers: 48,
  hiddenSize: 3840,
  intermediateSize: 15360,
  attentionHeads: 16,
  kvHeads: 8,
  headDim: 256,
  vocabSize: 262144,
  totalParams: 12.19e9,
  slidingWindowLayers: 40,
  slidingWindowTokens: 1024,
  contextTokens: 131_072,
};

/** Not shipped as a profile: the shape behind Vidur's H100 calibration data. */
export const LLAMA_2_7B: ModelShape = {
  name: "Llama-2-7B",
  layers: 32,
  hiddenSize: 4096,
  intermediateSize: 11008,
  attentionHeads: 32,
  kvHeads: 32,
  headDim: 128,
  vocabSize: 32000,
  totalParams: 6.74e9,
  slidingWindowLayers: 0,
  slidingWindowTokens: 0,
  contextTokens: 4096,
};

export const MODELS: Readonly<Record<ModelId, ModelShape>> = {
  "llama-3.1-8b": LLAMA_3_1_8B,
  "llama-3.1-70b": LLAMA_3_1_70B,
  "gemma-3-12b": GEMMA_3_12B,
};

/** Parameters of the per-layer matmuls (QKV, output projection, gated MLP) across all layers. */
export function linearParams(shape: ModelShape): number {
  const { hiddenSize: h, attentionHeads, kvHeads, headDim, intermediateSize } = shape;
  const qkv = h * (attentionHeads + 2 * kvHeads) * headDim;
  const output = attentionHeads * headDim * h;
  const gatedMlp = 3 * h * intermediateSize;
  return (qkv + output + gatedMlp) * shape.layers;
}

/**
 * K and V of every layer for one token. For sliding-window models this is the full-attention upper
 * bound: local layers really keep at most slidingWindowTokens per sequence.
 */
export function kvBytesPerToken(shape: ModelShape, bytesPerElement: number): number {
  return 2 * shape.kvHeads * shape.headDim * shape.layers * bytesPerElement;
}
