/**
 * Typed wrapper over Continuum's own N-API addon for llama.cpp (src/engine/native/*.cpp, built by
 * scripts/build-native.mjs into .cache/native/continuum_llama.node).
 *
 * One LlamaContext holds ONE unified KV pool shared by up to nSeqMax sequences (seq ids 0..nSeqMax-1).
 * decode() runs llama_decode plus per-sequence sampling on a worker thread and resolves a Promise; while it
 * (or any other async op on that context) is in flight, every other op on the context throws
 * LLAMA_CONTEXT_BUSY: the engine loop is expected to serialize ops per context.
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { findGpuPlugin } from "../gpu/plugin-discovery.js";

// ---------------------------------------------------------------------------------------------------------
// public types

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
  /** Directory ggml_backend_load_all_from_path was given (the prebuilt package's bin dir). */
  dir: string;
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
}

export interface LoadModelOptions {
  /** Layers to offload to a GPU: a count, "all", or "auto" (all when a GPU device is loaded, else 0). */
  gpuLayers?: number | "all" | "auto";
  /** Load only the vocabulary (tokenize/detokenize/templates; no contexts). */
  vocabOnly?: boolean;
  /** Memory-map the file (llama.cpp's default when unset). */
  mmap?: boolean;
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
  logits?: Float32Array;
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

// ---------------------------------------------------------------------------------------------------------
// the raw addon (shapes as defined in addon.cpp / context.cpp)

interface RawDecodeResult {
  batchIndex: Int32Array;
  seqId: Int32Array;
  token?: Int32Array;
  isEog?: Uint8Array;
  logits?: Float32Array;
  nVocab: number;
  decodeUs: number;
  sampleUs: number;
  computeUs?: number;
}

function rawArgs(
  batch: DecodeBatch,
  opts: DecodeOptions,
): [Int32Array, Int32Array, Int32Array, Uint8Array, { sample: boolean; returnLogits: boolean }] {
  const n = batch.length;
  return [
    batch.tokens.subarray(0, n),
    batch.pos.subarray(0, n),
    batch.seqIds.subarray(0, n),
    batch.wantLogits.subarray(0, n),
    { sample: opts.sample ?? true, returnLogits: opts.returnLogits ?? false },
  ];
}

function decodeResult(r: RawDecodeResult): DecodeResult {
  const outputs: DecodeOutput[] = [];
  for (let j = 0; j < r.batchIndex.length; j++) {
    const out: DecodeOutput = {
      batchIndex: r.batchIndex[j]!,
      seqId: r.seqId[j]!,
      token: r.token ? r.token[j]! : -1,
      isEog: r.isEog ? r.isEog[j] === 1 : false,
    };
    if (r.logits) out.logits = r.logits.subarray(j * r.nVocab, (j + 1) * r.nVocab);
    outputs.push(out);
  }
  return {
    outputs,
    decodeMs: r.decodeUs / 1000,
    sampleMs: r.sampleUs / 1000,
    computeMs: r.computeUs === undefined ? null : r.computeUs / 1000,
  };
}

interface RawModel {
  info(): ModelInfo;
  meta(key: string): string | null;
  tokenize(text: string, addSpecial: boolean, parseSpecial: boolean): Int32Array;
  tokenizeAsync(text: string, addSpecial: boolean, parseSpecial: boolean): Promise<Int32Array>;
  tokenToPiece(token: number, special: boolean): Buffer;
  detokenize(tokens: Int32Array, removeSpecial: boolean, unparseSpecial: boolean): string;
  isEog(token: number): boolean;
  applyChatTemplate(messages: ChatMessage[], addAssistant: boolean, template?: string): string;
  kvBytesPerToken(typeK?: KvCacheType, typeV?: KvCacheType): number | null;
  free(): void;
}

interface RawContext {
  info(): ContextInfo;
  setSampler(seqId: number, params: SamplerParams | null): void;
  resetSampler(seqId: number): void;
  acceptToken(seqId: number, token: number): void;
  decode(
    tokens: Int32Array,
    pos: Int32Array,
    seqIds: Int32Array,
    wantLogits: Uint8Array,
    opts: { sample: boolean; returnLogits: boolean },
  ): Promise<RawDecodeResult>;
  decodeSync(
    tokens: Int32Array,
    pos: Int32Array,
    seqIds: Int32Array,
    wantLogits: Uint8Array,
    opts: { sample: boolean; returnLogits: boolean },
  ): RawDecodeResult;
  memClear(data: boolean): void;
  memSeqRm(seqId: number, p0: number, p1: number): boolean;
  memSeqCp(src: number, dst: number, p0: number, p1: number): void;
  memSeqKeep(seqId: number): void;
  memSeqAdd(seqId: number, p0: number, p1: number, delta: number): void;
  memSeqPosMin(seqId: number): number;
  memSeqPosMax(seqId: number): number;
  memCanShift(): boolean;
  stateSeqSize(seqId: number): number;
  stateSeqSave(seqId: number): Promise<Buffer>;
  stateSeqSaveInto(seqId: number, target: Buffer): Promise<number>;
  stateSeqLoad(seqId: number, state: Buffer): Promise<number>;
  stateSeqSaveFile(seqId: number, path: string, tokens?: Int32Array): Promise<number>;
  stateSeqLoadFile(seqId: number, path: string, capacity?: number): Promise<SeqStateFile>;
  free(): void;
}

interface RawAddon {
  versionInfo(): VersionInfo;
  systemInfo(): string;
  setLogLevel(level: LogLevel): void;
  loadBackends(dir?: string, extraPluginPaths?: string[]): BackendsInfo;
  devices(): DeviceInfo[];
  loadModel(path: string, opts: { gpuLayers: number; vocabOnly: boolean; mmap?: boolean }): Promise<RawModel>;
  createContext(model: RawModel, opts: Record<string, unknown>): Promise<RawContext>;
  allocPinnedBuffer(bytes: number): Buffer | null;
  measureHostCopyBandwidth(bytes: number, repeats: number): HostCopyBandwidth | null;
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

// ---------------------------------------------------------------------------------------------------------
// locating and loading the addon

const here = dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

export function findProjectRoot(): string {
  let dir = here;
  for (;;) {
    const pkg = join(dir, "package.json");
    if (existsSync(pkg)) {
      try {
        if ((JSON.parse(readFileSync(pkg, "utf8")) as { name?: string }).name === "continuum") return dir;
      } catch {
        // keep walking
      }
    }
    const parent = dirname(dir);
    if (parent === dir) return resolve(here, "..", "..", "..");
    dir = parent;
  }
}

/** Where the built addon is expected ($CONTINUUM_LLAMA_ADDON overrides). */
export function nativeAddonPath(): string {
  const env = process.env["CONTINUUM_LLAMA_ADDON"];
  if (env && env.length > 0) return env;
  return join(findProjectRoot(), ".cache", "native", "continuum_llama.node");
}

let addon: RawAddon | undefined;
let loadError: Error | undefined;

function native(): RawAddon {
  if (addon) return addon;
  if (loadError) throw loadError;
  const path = nativeAddonPath();
  if (process.platform !== "linux" || process.arch !== "x64") {
    loadError = Object.assign(
      new Error(`llama.cpp engine: linux-x64 only (this is ${process.platform}-${process.arch})`),
      {
        code: "LLAMA_NATIVE_UNAVAILABLE",
      },
    );
    throw loadError;
  }
  if (!existsSync(path)) {
    loadError = Object.assign(
      new Error(`llama.cpp addon not built: ${path} is missing (run \`node scripts/build-native.mjs\`)`),
      { code: "LLAMA_NATIVE_UNAVAILABLE" },
    );
    throw loadError;
  }
  try {
    addon = require(path) as RawAddon;
  } catch (err) {
    loadError = err instanceof Error ? err : new Error(String(err));
    throw loadError;
  }
  const level = process.env["CONTINUUM_LLAMA_LOG"];
  if (level) addon.setLogLevel(level as LogLevel);
  return addon;
}

/** Whether the addon can be loaded here (built, right platform, versions match). */
export function isNativeAvailable(): boolean {
  try {
    native();
    return true;
  } catch {
    return false;
  }
}

export function versionInfo(): VersionInfo {
  return native().versionInfo();
}

/** llama_print_system_info(): CPU features of the loaded backends. */
export function systemInfo(): string {
  return native().systemInfo();
}

/** Minimum level of llama.cpp/ggml log lines written to stderr (default "warn"; env CONTINUUM_LLAMA_LOG). */
export function setLogLevel(level: LogLevel): void {
  native().setLogLevel(level);
}

function defaultGpuPlugins(): string[] {
  const plugin = findGpuPlugin(findProjectRoot());
  return plugin ? [plugin.file] : [];
}

let backends: BackendsInfo | undefined;

/**
 * Loads ggml's runtime backend plugins: the best libggml-cpu-<arch>.so from the prebuilt package's bin dir
 * and the GPU plugins of opts.gpuPlugins. Must run before loadModel (which calls it if needed). Idempotent.
 */
export function loadBackends(opts: LoadBackendsOptions = {}): BackendsInfo {
  const gpuPlugins = opts.gpuPlugins ?? defaultGpuPlugins();
  const info = native().loadBackends(opts.dir, [...gpuPlugins]);
  backends = {
    dir: info.dir,
    loaded: [...(backends?.loaded ?? []), ...info.loaded],
    failed: [...(backends?.failed ?? []), ...info.failed],
    devices: info.devices,
  };
  return backends;
}

/**
 * Page-locked host memory of the first GPU backend (cudaMallocHost for CUDA), which the GPU copies at DMA
 * speed where ordinary memory goes through a staging buffer; null without a GPU backend that offers it.
 */
export function allocPinnedBuffer(bytes: number): Buffer | null {
  return native().allocPinnedBuffer(bytes);
}

/** The machine's host <-> GPU copy bandwidth (best of `repeats` copies of `bytes`); null without a GPU. */
export function measureHostCopyBandwidth(bytes: number, repeats = 5): HostCopyBandwidth | null {
  return native().measureHostCopyBandwidth(bytes, repeats);
}

export function devices(): DeviceInfo[] {
  return native().devices();
}

export async function loadModel(path: string, opts: LoadModelOptions = {}): Promise<LlamaModel> {
  const b = backends ?? loadBackends();
  const hasGpu = b.devices.some((d) => d.type === "gpu" || d.type === "igpu");
  const g = opts.gpuLayers ?? "auto";
  const gpuLayers = g === "all" ? -1 : g === "auto" ? (hasGpu ? -1 : 0) : g;
  const raw = await native().loadModel(path, {
    gpuLayers,
    vocabOnly: opts.vocabOnly ?? false,
    ...(opts.mmap === undefined ? {} : { mmap: opts.mmap }),
  });
  return new LlamaModel(raw, path, gpuLayers);
}

/** Same as model.createContext(opts): one context with one unified KV pool for all its sequences. */
export function createContext(model: LlamaModel, opts: ContextOptions): Promise<LlamaContext> {
  return model.createContext(opts);
}

// ---------------------------------------------------------------------------------------------------------
// model

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

// ---------------------------------------------------------------------------------------------------------
// batch

/** A reusable mixed batch: (token, pos, seqId, wantLogits) rows for any number of sequences. */
export class DecodeBatch {
  readonly tokens: Int32Array;
  readonly pos: Int32Array;
  readonly seqIds: Int32Array;
  readonly wantLogits: Uint8Array;
  private n = 0;

  constructor(readonly capacity: number) {
    this.tokens = new Int32Array(capacity);
    this.pos = new Int32Array(capacity);
    this.seqIds = new Int32Array(capacity);
    this.wantLogits = new Uint8Array(capacity);
  }

  get length(): number {
    return this.n;
  }

  clear(): this {
    this.n = 0;
    return this;
  }

  /** Adds one row and returns its batch index. */
  add(token: number, pos: number, seqId: number, wantLogits = false): number {
    if (this.n >= this.capacity) throw new RangeError(`DecodeBatch full (${this.capacity})`);
    const i = this.n++;
    this.tokens[i] = token;
    this.pos[i] = pos;
    this.seqIds[i] = seqId;
    this.wantLogits[i] = wantLogits ? 1 : 0;
    return i;
  }

  /** Adds tokens at positions startPos.. for seqId; logits for the last one unless told otherwise. */
  addSequence(tokens: ArrayLike<number>, startPos: number, seqId: number, logitsForLast = true): this {
    for (let i = 0; i < tokens.length; i++) {
      this.add(tokens[i]!, startPos + i, seqId, logitsForLast && i === tokens.length - 1);
    }
    return this;
  }
}

// ---------------------------------------------------------------------------------------------------------
// context

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
