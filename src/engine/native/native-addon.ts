/**
 * Continuum's own N-API addon for llama.cpp (src/engine/native/addon/*.cpp, built by scripts/build-native.mjs into
 * .cache/native/continuum_llama.node): its raw shapes (as defined in addon.cpp / context.cpp), where it is
 * found and loaded, and what it offers process-wide (versions, log level, backends, devices, host buffers).
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { findGpuPlugin } from "../gpu/plugin-discovery.js";
import {
  builtCpuBackendDir,
  builtCpuBackendFile,
  builtCpuBackendProblem,
  builtCpuBackendStampFile,
  cpuBackendHost,
  NATIVE_CPU_VARIANT,
  PREBUILT_CPU_VARIANTS,
  readCpuBackendStamp,
} from "./cpu-backend-location.js";
import type {
  BackendsInfo,
  ChatMessage,
  ContextInfo,
  DeviceInfo,
  HostCopyBandwidth,
  KvCacheType,
  LoadBackendsOptions,
  LogLevel,
  ModelInfo,
  SamplerParams,
  SeqStateFile,
  VersionInfo,
} from "./llama-types.js";

export interface RawDecodeOptions {
  sample: boolean;
  returnLogits: boolean;
  /** per row: the token a scored row is scored against (-1: sampled as usual), and its top count (0-20) */
  scoreTargets?: Int32Array;
  scoreTop?: Int32Array;
}

export interface RawDecodeResult {
  batchIndex: Int32Array;
  seqId: Int32Array;
  token?: Int32Array;
  isEog?: Uint8Array;
  /** with scoreTargets: 1 for a scored row (its `token` is the target), and the target's rank in its row */
  scored?: Uint8Array;
  rank?: Int32Array;
  /** when a sampled row's sequence asked for logprobs: one a row (NaN where it did not ask) ... */
  logprob?: Float32Array;
  topCount?: Uint8Array;
  /** ... and topStride entries a row, topCount of them filled */
  topToken?: Int32Array;
  topLogprob?: Float32Array;
  topStride?: number;
  logits?: Float32Array;
  nVocab: number;
  decodeUs: number;
  sampleUs: number;
  computeUs?: number;
  prepareUs?: number;
  inputsUs?: number;
  finishUs?: number;
}

export interface RawModel {
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

export interface RawContext {
  info(): ContextInfo;
  setSampler(seqId: number, params: SamplerParams | null): void;
  resetSampler(seqId: number): void;
  acceptToken(seqId: number, token: number): void;
  decode(
    tokens: Int32Array,
    pos: Int32Array,
    seqIds: Int32Array,
    wantLogits: Uint8Array,
    opts: RawDecodeOptions,
  ): Promise<RawDecodeResult>;
  decodeSync(
    tokens: Int32Array,
    pos: Int32Array,
    seqIds: Int32Array,
    wantLogits: Uint8Array,
    opts: RawDecodeOptions,
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

export interface RawAddon {
  versionInfo(): VersionInfo;
  systemInfo(): string;
  setLogLevel(level: LogLevel): void;
  loadBackends(dir?: string, extraPluginPaths?: string[], cpuVariant?: string): Omit<BackendsInfo, "cpu">;
  devices(): DeviceInfo[];
  loadModel(
    path: string,
    opts: { gpuLayers: number; vocabOnly: boolean; mmap?: boolean; embeddingsOnGpu: boolean },
  ): Promise<RawModel>;
  createContext(model: RawModel, opts: Record<string, unknown>): Promise<RawContext>;
  allocPinnedBuffer(bytes: number): Buffer | null;
  measureHostCopyBandwidth(bytes: number, repeats: number): HostCopyBandwidth | null;
  sampleLogits(
    logits: Float32Array,
    nVocab: number,
    params: RowSamplerParams,
    draws: number,
    sampler: RowSamplerImpl,
  ): Int32Array;
}

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

/** The addon, loaded on first use; throws (code LLAMA_NATIVE_UNAVAILABLE) where it cannot be. */
export function native(): RawAddon {
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

/** Which code samples a row: ours, as the engine samples, or llama.cpp's chain. */
export type RowSamplerImpl = "continuum" | "llama.cpp";

/** A request's sampling parameters, with a constraint standing in for a grammar. */
export interface RowSamplerParams extends SamplerParams {
  /** only these tokens may be drawn (llama.cpp's chain: a -inf bias on every other token) */
  readonly allowedTokens?: readonly number[];
  /** tokens taken before the first draw, which the penalties count (the draws take none) */
  readonly history?: readonly number[];
}

/**
 * Samples `draws` tokens from each row of `logits` (rows of nVocab) with one sampler made from `params`
 * (logit biases, then top-k, top-p, min-p and the temperature, as llama-server chains them; a temperature
 * <= 0 is greedy), its random stream running on from draw to draw and row to row: for holding our sampler
 * beside llama.cpp's on the same rows (the sampling bench, the distribution tests).
 */
export function sampleLogits(
  logits: Float32Array,
  nVocab: number,
  params: RowSamplerParams,
  draws: number,
  sampler: RowSamplerImpl,
): Int32Array {
  return native().sampleLogits(logits, nVocab, params, draws, sampler);
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
let cpuChoice: CpuBackendChoice | undefined;

interface CpuBackendChoice {
  dir: string | undefined;
  variant: string | undefined;
  description: string;
}

/**
 * Loads ggml's runtime backend plugins: the CPU backend (the one `continuum build-cpu` compiled for this
 * machine when it is built and fits, else the best libggml-cpu-<arch>.so from the prebuilt package's bin
 * dir; opts.cpuVariant / CONTINUUM_GGML_CPU name one) and the GPU plugins of opts.gpuPlugins. Must run
 * before loadModel (which calls it if needed). Idempotent.
 */
export function loadBackends(opts: LoadBackendsOptions = {}): BackendsInfo {
  const gpuPlugins = opts.gpuPlugins ?? defaultGpuPlugins();
  const requested = opts.cpuVariant ?? (process.env["CONTINUUM_GGML_CPU"] || undefined);
  const raw = native();
  // the first call decides: ggml would register a second CPU backend beside the first
  cpuChoice ??= chooseCpuBackend(requested, opts.dir);
  const cpu = cpuChoice;
  const info = raw.loadBackends(cpu.dir, [...gpuPlugins], cpu.variant);
  backends = {
    dir: info.dir,
    cpu: cpu.description,
    loaded: [...(backends?.loaded ?? []), ...info.loaded],
    failed: [...(backends?.failed ?? []), ...info.failed],
    devices: info.devices,
  };
  return backends;
}

/**
 * The CPU backend to load: a prebuilt variant when one is named (ggml's pick of them for "prebuilt"), else
 * the native build when it is there and was built on this CPU against the engine's ggml-base (a mismatch is
 * named: an error when "native" was asked for, the reason in the description when it was only found), else
 * ggml's pick of the prebuilt ones.
 */
function chooseCpuBackend(requested: string | undefined, prebuiltDir: string | undefined): CpuBackendChoice {
  const prebuilt: CpuBackendChoice = {
    dir: prebuiltDir,
    variant: undefined,
    description: "prebuilt, the variant ggml picks for this CPU",
  };
  if (requested === PREBUILT_CPU_VARIANTS)
    return { ...prebuilt, description: `${prebuilt.description} (as asked)` };
  if (requested !== undefined && requested !== NATIVE_CPU_VARIANT) {
    return { dir: prebuiltDir, variant: requested, description: `prebuilt ${requested} variant (as asked)` };
  }
  const root = findProjectRoot();
  const file = builtCpuBackendFile(root);
  if (requested === undefined && !existsSync(file)) return prebuilt;
  const problem = builtCpuBackendProblem(
    file,
    readCpuBackendStamp(builtCpuBackendStampFile(root)),
    cpuBackendHost(),
  );
  if (problem && requested === NATIVE_CPU_VARIANT) {
    throw Object.assign(new Error(`CPU backend ${NATIVE_CPU_VARIANT}: ${problem}`), {
      code: "LLAMA_CPU_VARIANT",
    });
  }
  if (problem) return { ...prebuilt, description: `${prebuilt.description} (${problem})` };
  return {
    dir: builtCpuBackendDir(root),
    variant: NATIVE_CPU_VARIANT,
    description: `built for this CPU (${file})`,
  };
}

/** The backends loaded so far, or undefined before any were (loads nothing). */
export function backendsIfLoaded(): BackendsInfo | undefined {
  return backends;
}

/** The backends loaded so far; the default ones are loaded first when none were. */
export function loadedBackends(): BackendsInfo {
  return backends ?? loadBackends();
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
