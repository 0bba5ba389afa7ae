/**
 * A loaded model and its contexts. One LlamaContext holds ONE unified KV pool shared by up to nSeqMax
 * sequences (seq ids 0..nSeqMax-1). decode() runs llama_decode plus per-sequence sampling on a worker thread
 * and resolves a Promise; while it (or any other async op on that context) is in flight, every other op on
 * the context throws LLAMA_CONTEXT_BUSY: the engine loop is expected to serialize ops per context.
 */
import { type DecodeBatch, decodeResult, rawArgs } from "./decode-batch.js";
import type {
  ChatMessage,
  ContextInfo,
  ContextOptions,
  DecodeOptions,
  DecodeResult,
  KvCacheType,
  LoadModelOptions,
  ModelInfo,
  SamplerParams,
  SeqStateFile,
} from "./llama-types.js";
import { loadedBackends, native, type RawContext, type RawModel } from "./native-addon.js";

/**
 * Where a model's weights go: n_gpu_layers (negative: all) and whether the token embeddings go to the GPU
 * too (by default when every layer does: llama.cpp would keep them on the CPU and upload each step's rows).
 */
export function weightPlacement(
  opts: Pick<LoadModelOptions, "gpuLayers" | "embeddingsOnGpu">,
  hasGpu: boolean,
): { gpuLayers: number; embeddingsOnGpu: boolean } {
  const g = opts.gpuLayers ?? "auto";
  const gpuLayers = g === "all" ? -1 : g === "auto" ? (hasGpu ? -1 : 0) : g;
  return { gpuLayers, embeddingsOnGpu: opts.embeddingsOnGpu ?? (hasGpu && gpuLayers < 0) };
}

export async function loadModel(path: string, opts: LoadModelOptions = {}): Promise<LlamaModel> {
  const hasGpu = loadedBackends().devices.some((d) => d.type === "gpu" || d.type === "igpu");
  const placement = weightPlacement(opts, hasGpu);
  const raw = await native().loadModel(path, {
    ...placement,
    vocabOnly: opts.vocabOnly ?? false,
    ...(opts.mmap === undefined ? {} : { mmap: opts.mmap }),
  });
  return new LlamaModel(raw, path, placement.gpuLayers);
}

/** Same as model.createContext(opts): one context with one unified KV pool for all its sequences. */
export function createContext(model: LlamaModel, opts: ContextOptions): Promise<LlamaContext> {
  return model.createContext(opts);
}

export class LlamaModel {
  readonly info: ModelInfo;

  /** @internal use loadModel() */
  constructor(
    private readonly raw: RawModel,
    readonly path: string,
    /** n_gpu_layers the model was loaded with (negative: all) */
    readonly gpuLayers: number,
  ) {
    this.info = raw.info();
  }

  /** Text -> tokens. addSpecial: prepend BOS etc. as the model wants; parseSpecial: "<|im_start|>" -> control token. */
  tokenize(text: string, opts: { addSpecial?: boolean; parseSpecial?: boolean } = {}): Int32Array {
    return this.raw.tokenize(text, opts.addSpecial ?? false, opts.parseSpecial ?? false);
  }

  /** tokenize on a libuv worker thread: the event loop runs on meanwhile. */
  tokenizeAsync(
    text: string,
    opts: { addSpecial?: boolean; parseSpecial?: boolean } = {},
  ): Promise<Int32Array> {
    return this.raw.tokenizeAsync(text, opts.addSpecial ?? false, opts.parseSpecial ?? false);
  }

  /** Raw bytes of one token's piece (may be a fragment of a UTF-8 character). */
  tokenToPiece(token: number, opts: { special?: boolean } = {}): Buffer {
    return this.raw.tokenToPiece(token, opts.special ?? false);
  }

  /** Tokens -> text. removeSpecial drops BOS/EOS; unparseSpecial renders control tokens as text. */
  detokenize(
    tokens: ArrayLike<number>,
    opts: { removeSpecial?: boolean; unparseSpecial?: boolean } = {},
  ): string {
    const arr = tokens instanceof Int32Array ? tokens : Int32Array.from(tokens);
    return this.raw.detokenize(arr, opts.removeSpecial ?? false, opts.unparseSpecial ?? false);
  }

  isEog(token: number): boolean {
    return this.raw.isEog(token);
  }

  /** llama_chat_apply_template with the model's template (or `template`). */
  applyChatTemplate(
    messages: ChatMessage[],
    opts: { addAssistant?: boolean; template?: string } = {},
  ): string {
    return this.raw.applyChatTemplate(messages, opts.addAssistant ?? true, opts.template);
  }

  kvBytesPerToken(typeK: KvCacheType = "f16", typeV: KvCacheType = typeK): number | null {
    return this.raw.kvBytesPerToken(typeK, typeV);
  }

  /** A GGUF metadata value as a string, or null. */
  meta(key: string): string | null {
    return this.raw.meta(key);
  }

  async createContext(opts: ContextOptions): Promise<LlamaContext> {
    const { flashAttn, ...rest } = opts;
    const nativeOpts: Record<string, unknown> = { kvUnified: true, ...rest };
    const fa = flashAttn ?? true;
    if (fa !== "auto") nativeOpts["flashAttn"] = fa;
    for (const k of Object.keys(nativeOpts)) if (nativeOpts[k] === undefined) delete nativeOpts[k];
    const raw = await native().createContext(this.raw, nativeOpts);
    return new LlamaContext(raw, this);
  }

  /** Frees the weights now (throws LLAMA_MODEL_IN_USE while contexts are alive). */
  free(): void {
    this.raw.free();
  }
}

export class LlamaContext {
  readonly info: ContextInfo;
  private inFlight = 0;

  /** @internal use LlamaModel.createContext() */
  constructor(
    private readonly raw: RawContext,
    readonly model: LlamaModel,
  ) {
    this.info = raw.info();
  }

  /** Whether an async op (decode/state) is in flight; sync ops throw LLAMA_CONTEXT_BUSY meanwhile. */
  get busy(): boolean {
    return this.inFlight > 0;
  }

  private async track<T>(p: Promise<T>): Promise<T> {
    this.inFlight++;
    try {
      return await p;
    } finally {
      this.inFlight--;
    }
  }

  /** Sampler chain for a sequence slot (null: greedy). Grammar state lives in the chain: see resetSampler. */
  setSampler(seqId: number, params: SamplerParams | null): void {
    this.raw.setSampler(seqId, params);
  }

  /** Restarts the slot's grammar at its root and its RNG at its seed. */
  resetSampler(seqId: number): void {
    this.raw.resetSampler(seqId);
  }

  /** Advances the slot's sampler state (grammar) by a token that was not sampled by it. */
  acceptToken(seqId: number, token: number): void {
    this.raw.acceptToken(seqId, token);
  }

  /**
   * Decodes a mixed batch of many sequences in one llama_decode, then samples each output with its
   * sequence's sampler chain — all on a worker thread. At most info.nBatch rows.
   */
  async decode(batch: DecodeBatch, opts: DecodeOptions = {}): Promise<DecodeResult> {
    return decodeResult(await this.track(this.raw.decode(...rawArgs(batch, opts))));
  }

  /**
   * decode() on the calling thread: no worker hop and no Promise, the event loop blocked meanwhile. For
   * steps of a few milliseconds (one token per sequence), where the hop is a tenth of the step.
   */
  decodeSync(batch: DecodeBatch, opts: DecodeOptions = {}): DecodeResult {
    return decodeResult(this.raw.decodeSync(...rawArgs(batch, opts)));
  }

  // --- KV memory (llama_memory_*) -------------------------------------------------------------------

  /** Empties the whole pool (data too unless data=false). */
  clear(data = true): void {
    this.raw.memClear(data);
  }

  /** Removes positions [p0, p1) of seqId (-1: any sequence); p0/p1 < 0 mean open ends. */
  seqRemove(seqId: number, p0 = -1, p1 = -1): boolean {
    return this.raw.memSeqRm(seqId, p0, p1);
  }

  /** dst shares src's cells for positions [p0, p1) (no data copy in the unified pool). */
  seqCopy(src: number, dst: number, p0 = -1, p1 = -1): void {
    this.raw.memSeqCp(src, dst, p0, p1);
  }

  /** Drops every sequence but seqId. */
  seqKeep(seqId: number): void {
    this.raw.memSeqKeep(seqId);
  }

  /** Adds delta to positions [p0, p1) of seqId (RoPE shift); throws LLAMA_CANNOT_SHIFT if unsupported. */
  seqShift(seqId: number, p0: number, p1: number, delta: number): void {
    this.raw.memSeqAdd(seqId, p0, p1, delta);
  }

  /** Smallest position held for seqId, -1 if empty. */
  seqPosMin(seqId: number): number {
    return this.raw.memSeqPosMin(seqId);
  }

  /** Largest position held for seqId, -1 if empty. */
  seqPosMax(seqId: number): number {
    return this.raw.memSeqPosMax(seqId);
  }

  canShift(): boolean {
    return this.raw.memCanShift();
  }

  // --- per-sequence state: RAM and disk tiers -------------------------------------------------------

  /** Exact size of saveSeqState(seqId)'s Buffer. */
  seqStateSize(seqId: number): number {
    return this.raw.stateSeqSize(seqId);
  }

  /** Serializes one sequence's KV cells (RAM tier). The KV stays in the pool: remove it to free cells. */
  saveSeqState(seqId: number): Promise<Buffer> {
    return this.track(this.raw.stateSeqSave(seqId));
  }

  /**
   * saveSeqState() into a Buffer of `take(bytes)` (at least `bytes` long); resolves to the part written. A
   * reused Buffer spares the page faults of fresh memory and the old-space collections that V8 runs as new
   * external memory piles up (a state is megabytes).
   */
  async saveSeqStateInto(seqId: number, take: (bytes: number) => Buffer): Promise<Buffer> {
    const target = take(this.raw.stateSeqSize(seqId));
    const written = await this.track(this.raw.stateSeqSaveInto(seqId, target));
    return target.subarray(0, written);
  }

  /** Restores a saveSeqState() Buffer into seqId (replacing what it held). Resolves to bytes read. */
  restoreSeqState(seqId: number, state: Buffer): Promise<number> {
    return this.track(this.raw.stateSeqLoad(seqId, state));
  }

  /** Writes one sequence's KV (and optionally its tokens) to a file (disk tier). Resolves to bytes. */
  saveSeqStateFile(seqId: number, path: string, tokens?: ArrayLike<number>): Promise<number> {
    const t =
      tokens === undefined ? undefined : tokens instanceof Int32Array ? tokens : Int32Array.from(tokens);
    return this.track(this.raw.stateSeqSaveFile(seqId, path, t));
  }

  /** Loads a saveSeqStateFile() file into seqId; returns the stored tokens (up to tokenCapacity). */
  loadSeqStateFile(seqId: number, path: string, tokenCapacity?: number): Promise<SeqStateFile> {
    return this.track(this.raw.stateSeqLoadFile(seqId, path, tokenCapacity));
  }

  /** Frees the KV pool, threadpool and samplers now (throws LLAMA_CONTEXT_BUSY while busy). */
  free(): void {
    this.raw.free();
  }
}
