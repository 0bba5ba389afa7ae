/** The public data shapes of the llama.cpp binding: options, infos, decode results, error codes. */

export type LogLevel = "debug" | "info" | "warn" | "error" | "none";
export type KvCacheType = "f16" | "f32" | "bf16" | "q8_0" | "q4_0";

export interface VersionInfo {
  headerLlamaVersion: string;
  headerGgmlVersion: string;
  libLlamaVersion: string;
  libGgmlVersion: string;
  libGgmlCommit: string;
  maxParallelSequences: number;
  supportsGpuOffload: boolean;
  supportsMmap: boolean;
}

export interface DeviceInfo {
  name: string;
  description: string;
  type: "cpu" | "gpu" | "igpu" | "accel" | "other";
  backend: string;
  memoryFree: number;
  memoryTotal: number;
}

export interface BackendsInfo {
  /** Directory the CPU backend came from (the prebuilt package's bin dir, or continuum build-cpu's). */
  dir: string;
  /** Which CPU backend runs the model, in words (built for this CPU, or which prebuilt variant and why). */
  cpu: string;
  /** Extra GPU backend plugins loaded from optional GPU packages. */
  loaded: string[];
  /** Extra GPU backend plugins found but not loadable (e.g. no CUDA runtime). */
  failed: string[];
  devices: DeviceInfo[];
}

export interface LoadBackendsOptions {
  /** Directory with libggml-cpu-*.so (default: the directory of the linked libllama). */
  dir?: string;
  /**
   * GPU backend plugin files to load (default: the one findGpuPlugin picks: CONTINUUM_GPU_PLUGIN, a plugin
   * built here, an installed GPU package's; none with CONTINUUM_LLAMA_GPU=0).
   */
  gpuPlugins?: readonly string[];
  /**
   * Load only this CPU variant (libggml-cpu-<name>.so: haswell is AVX2, zen4/skylakex/sapphirerapids
   * AVX-512, ..., "native": the one `continuum build-cpu` compiled here, "prebuilt": ggml's pick of the
   * prebuilt ones) instead of the native build when there is one, else the best prebuilt one for this CPU;
   * default env CONTINUUM_GGML_CPU. A variant this CPU cannot run is an error.
   */
  cpuVariant?: string;
}

export interface LoadModelOptions {
  /** Layers to offload to a GPU: a count, "all", or "auto" (all when a GPU device is loaded, else 0). */
  gpuLayers?: number | "all" | "auto";
  /** Load only the vocabulary (tokenize/detokenize/templates; no contexts). */
  vocabOnly?: boolean;
  /** Memory-map the file (llama.cpp's default when unset). */
  mmap?: boolean;
  /**
   * Keep the token embeddings on the first GPU. llama.cpp keeps them on the CPU, which then looks up every
   * token's row and uploads it each step: 6 ms of a 2048-token prefill of Llama-3.1-8B on an H100 (docs/gpu.md),
   * for 1 GB of GPU memory (f16; 0.5 GB q8_0). Default: true with gpuLayers "all" (or "auto" with a GPU), false
   * with a layer count. No effect without a GPU.
   */
  embeddingsOnGpu?: boolean;
}

export interface ModelInfo {
  description: string;
  nVocab: number;
  nCtxTrain: number;
  nEmbd: number;
  nLayer: number;
  nHead: number;
  nHeadKv: number;
  nSwa: number;
  nParams: number;
  sizeBytes: number;
  isRecurrent: boolean;
  isHybrid: boolean;
  chatTemplate: string | null;
  /** `tokenizer.chat_template.tool_use` (Hermes, Command R): the template for requests with tools */
  chatTemplateToolUse: string | null;
  bos: number | null;
  eos: number | null;
  eot: number | null;
  nl: number | null;
  addBos: boolean;
  addEos: boolean;
  /** K+V bytes of one token over all layers with an f16 cache (null for recurrent models). */
  kvBytesPerTokenF16: number | null;
}

export interface ContextOptions {
  /** Total KV cells of the unified pool (shared by all sequences). */
  nCtx: number;
  /** Sequence slots (seq ids 0..nSeqMax-1), up to versionInfo().maxParallelSequences (256). */
  nSeqMax?: number;
  /** Max tokens per decode() call. Default 512. */
  nBatch?: number;
  /** Physical micro-batch. Default min(nBatch, 512). */
  nUBatch?: number;
  /** Threads for single-token steps. Default: all cores. */
  threads?: number;
  /** Threads for multi-token batches. Default: threads. */
  threadsBatch?: number;
  /**
   * Flash attention. Default true: on CPU its kernel skips masked cells, so KV that idle (pinned)
   * sequences hold in the unified pool costs the decoding ones far less (docs/engine.md). "auto" = llama.cpp's choice.
   */
  flashAttn?: boolean | "auto";
  /** One KV pool across sequences. Must stay true for Continuum's pinning model. Default true. */
  kvUnified?: boolean;
  typeK?: KvCacheType;
  typeV?: KvCacheType;
  swaFull?: boolean;
  /** ggml threadpool spin level between graph computes, 0..100 (0 = sleep at once). Default 50. */
  threadpoolPoll?: number;
  /**
   * Report each decode's model compute time (DecodeResult.computeMs). ggml then synchronizes twice per
   * micro-batch: for measurements, not for serving. Default false.
   */
  computeTiming?: boolean;
}

export interface ContextInfo {
  nCtx: number;
  nCtxSeq: number;
  nBatch: number;
  nUBatch: number;
  nSeqMax: number;
  threads: number;
  threadsBatch: number;
  threadpool: boolean;
  flashAttn: boolean | "auto";
  kvUnified: boolean;
  typeK: string;
  typeV: string;
  /** Bytes one KV cell takes over all layers with this context's cache types (null if not derivable). */
  kvBytesPerToken: number | null;
}

export interface SamplerParams {
  /** <= 0: greedy (argmax). Default 0. */
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  /** RNG seed for temperature > 0 (uint32). Default: random. */
  seed?: number;
  /** GBNF grammar constraining the output (applied first in the chain). */
  grammar?: string;
  grammarRoot?: string;
  /** added to the token's logit before the grammar and sampling (OpenAI's logit_bias) */
  logitBias?: readonly { readonly token: number; readonly bias: number }[];
  /** OpenAI's: subtracted from the logit of a token the sequence has taken (sampled or accepted), once */
  presencePenalty?: number;
  /** OpenAI's: subtracted from the logit of a token the sequence has taken, once per time taken */
  frequencyPenalty?: number;
  /**
   * vLLM's: the logit of a token in promptTokens or taken by the sequence, divided by it where positive and
   * multiplied where not (1: off; > 0)
   */
  repetitionPenalty?: number;
  /** what the repetition penalty counts besides the sequence's own tokens */
  promptTokens?: Int32Array;
  /**
   * Report each sampled token's log-probability and this many most likely tokens' (0-20), from the raw
   * logits (before biases, penalties, filters, temperature and grammar). Default: none.
   */
  logprobs?: number;
}

export interface ChatMessage {
  role: string;
  content: string;
}

export interface DecodeOptions {
  /** Sample a token for every output (each sequence's own sampler chain). Default true. */
  sample?: boolean;
  /** Copy each output's logits (nVocab floats). Default false. */
  returnLogits?: boolean;
}

export interface DecodeOutput {
  /** Index of the token in the batch whose logits this is. */
  batchIndex: number;
  seqId: number;
  /** Sampled token, or -1 when sample was false. */
  token: number;
  /** Whether the sampled token ends generation (EOS/EOT/...). */
  isEog: boolean;
  /** A scored row (DecodeBatch.add's `score`): not sampled; `token` is its target, `logprobs` the target's. */
  scored?: boolean;
  /** a scored row's target's rank in its row (1: the most likely) */
  rank?: number;
  logits?: Float32Array;
  /** With SamplerParams.logprobs: the sampled token's log-probability and the top tokens' (highest first). */
  logprobs?: { logprob: number; top: { token: number; logprob: number }[] };
}

export interface DecodeResult {
  outputs: DecodeOutput[];
  /** Wall time of llama_decode on the worker thread, until its outputs are ready (a GPU synchronized). */
  decodeMs: number;
  /** Wall time of sampling (and logits copies) on the worker thread. */
  sampleMs: number;
  /**
   * With ContextOptions.computeTiming: the time from the first layer's input norm to the logits, summed over
   * micro-batches (the model's kernels, without building the graph and mask, uploads or copying logits out).
   * null otherwise, or when the model's graph has no such tensors.
   */
  computeMs: number | null;
  /**
   * With ContextOptions.computeTiming: llama_decode's wall time in phases that sum to decodeMs, each summed
   * over micro-batches (null otherwise): preparing each micro-batch on the host (graph, attention mask),
   * its inputs (the graph's CPU part, e.g. token embeddings kept there, and the uploads), the model's compute
   * (computeMs), and finishing (copying outputs out).
   */
  phasesMs: DecodePhases | null;
}

export interface DecodePhases {
  prepare: number;
  inputs: number;
  compute: number;
  finish: number;
}

export interface SeqStateFile {
  bytes: number;
  tokens: Int32Array;
}

/** Error codes the native layer sets on `error.code`. */
export type LlamaErrorCode =
  | "LLAMA_VERSION_MISMATCH"
  | "LLAMA_NO_BACKENDS"
  | "LLAMA_NO_CPU_BACKEND"
  | "LLAMA_MODEL_LOAD_FAILED"
  | "LLAMA_MODEL_FREED"
  | "LLAMA_MODEL_IN_USE"
  | "LLAMA_CONTEXT_CREATE_FAILED"
  | "LLAMA_CONTEXT_FREED"
  | "LLAMA_CONTEXT_BUSY"
  | "LLAMA_DECODE_NO_KV_SLOT"
  | "LLAMA_DECODE_ABORTED"
  | "LLAMA_DECODE_INVALID_BATCH"
  | "LLAMA_DECODE_FAILED"
  | "LLAMA_SAMPLE_FAILED"
  | "LLAMA_SAMPLER_REJECTED"
  | "LLAMA_GRAMMAR_INVALID"
  | "LLAMA_CANNOT_SHIFT"
  | "LLAMA_STATE_SAVE_FAILED"
  | "LLAMA_STATE_LOAD_FAILED"
  | "LLAMA_TOKENIZE_FAILED"
  | "LLAMA_DETOKENIZE_FAILED"
  | "LLAMA_NO_CHAT_TEMPLATE"
  | "LLAMA_CHAT_TEMPLATE_UNSUPPORTED"
  | "LLAMA_NATIVE_UNAVAILABLE";

export function isLlamaError(err: unknown, code?: LlamaErrorCode): err is Error & { code: LlamaErrorCode } {
  if (!(err instanceof Error)) return false;
  const c = (err as { code?: unknown }).code;
  return typeof c === "string" && c.startsWith("LLAMA_") && (code === undefined || c === code);
}

/** Bytes per second one way and the other between host memory and the GPU. */
export interface CopyRates {
  readonly hostToDeviceBps: number;
  readonly deviceToHostBps: number;
}

/** Whole-buffer copies between the first GPU and host memory, page-locked (pinned) and ordinary (pageable). */
export interface HostCopyBandwidth {
  readonly device: string;
  readonly bytes: number;
  readonly pinned: CopyRates;
  readonly pageable: CopyRates;
}
