/**
 * Built-in models: GGUF files generated on demand (seeded random weights, built-in tokenizer and
 * ChatML template) and cached on disk, since no weights can be downloaded. Small ones for tests and
 * CPUs, and ones with the exact tensor shapes of real 8B models for GPUs.
 */
import { randomBytes } from "node:crypto";
import { mkdir, rename, rm } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { assertDiskSpace } from "./disk-space.js";
import { type GgufInfo, readGgufInfo } from "./format/gguf-reader.js";
import { GgufValueType } from "./format/gguf-types.js";
import { byteProgress, formatBytes, formatParams } from "./generation-progress.js";
import {
  countLlamaParams,
  GENERATOR_VERSION,
  generateLlamaGguf,
  type LlamaShape,
  type LlamaSpec,
  llamaFileType,
  llamaGgufLayout,
  planLlamaTensors,
  type TokenizerKind,
  type WeightType,
} from "./llama-model.js";
import { LLAMA_3_1_ROPE_SCALING } from "./llama3-rope.js";

export type { ChatMessage } from "./chat-template.js";
export { CHATML_TEMPLATE, renderChatML } from "./chat-template.js";
export {
  type GgufInfo,
  type GgufTensorInfo,
  metaArray,
  metaNumber,
  metaString,
  readGgufInfo,
} from "./format/gguf-reader.js";
export { GgmlType, GgufValueType, LlamaFileType } from "./format/gguf-types.js";
export {
  type GgufLayout,
  type GgufMetadataValue,
  GgufWriter,
  type TensorSource,
} from "./format/gguf-writer.js";
export {
  countLlamaParams,
  GENERATOR_VERSION,
  generateLlamaGguf,
  type LlamaShape,
  type LlamaSpec,
  llamaFileType,
  llamaGgufLayout,
  type ModelArch,
  planLlamaTensors,
  type TokenizerKind,
  type WeightDraw,
  type WeightType,
} from "./llama-model.js";
export { SpmTokenizer, type TokenizeOptions } from "./vocab/spm-tokenizer.js";
export { buildVocab, DEFAULT_VOCAB_SIZE, TokenType, type Vocab } from "./vocab/vocab.js";

export type BuiltinPreset =
  | "tiny"
  | "small"
  | "medium"
  | "llama-3.1-8b-f16"
  | "llama-3.1-8b-bf16"
  | "llama-3.1-8b-q8_0"
  | "qwen3-8b-f16"
  | "qwen3-8b-bf16"
  | "qwen3-8b-q8_0";

/** Everything that fixes a preset's bytes, but the seed. */
export type PresetSpec = Required<Omit<LlamaShape, "ropeScaling" | "slidingWindow">> &
  Pick<LlamaShape, "ropeScaling"> &
  Required<Pick<LlamaSpec, "weightType" | "weights" | "ropeFreqBase" | "rmsEps">>;

export interface BuiltinPresetInfo extends PresetSpec {
  /** Parameter count (weights), for reference. */
  params: number;
}

type SmallShape = Omit<PresetSpec, "arch" | "weightType" | "weights" | "ropeFreqBase" | "rmsEps">;

/** The small presets: llama arch, every weight drawn (their bytes are pinned by tests). */
function smallPreset(shape: SmallShape, weightType: WeightType): BuiltinPresetInfo {
  return preset({
    ...shape,
    arch: "llama",
    weightType,
    weights: "gaussian",
    ropeFreqBase: 10000,
    rmsEps: 1e-5,
  });
}

function preset(spec: PresetSpec): BuiltinPresetInfo {
  return { ...spec, params: countLlamaParams(spec) };
}

/** Llama-3.1-8B's shapes (Meta's config.json); tokenizer and template are the built-in ones. */
const LLAMA_3_1_8B = {
  arch: "llama",
  contextLength: 131072,
  embeddingLength: 4096,
  blockCount: 32,
  feedForwardLength: 14336,
  headCount: 32,
  headCountKv: 8,
  vocabSize: 128256,
  ropeScaling: LLAMA_3_1_ROPE_SCALING,
  ropeFreqBase: 500000,
  rmsEps: 1e-5,
  weights: "pooled",
} as const;

/** Qwen3-8B's shapes (Qwen's config.json): untied output, per-head query/key norms. */
const QWEN3_8B = {
  arch: "qwen3",
  contextLength: 40960,
  embeddingLength: 4096,
  blockCount: 36,
  feedForwardLength: 12288,
  headCount: 32,
  headCountKv: 8,
  vocabSize: 151936,
  ropeFreqBase: 1000000,
  rmsEps: 1e-6,
  weights: "pooled",
} as const;

/** Shapes of the built-in models. */
export const BUILTIN_PRESETS: Readonly<Record<BuiltinPreset, BuiltinPresetInfo>> = {
  // ~2.9M params, 5.8 MB: fast enough for unit tests
  tiny: smallPreset(
    {
      contextLength: 4096,
      embeddingLength: 128,
      blockCount: 4,
      feedForwardLength: 384,
      headCount: 4,
      headCountKv: 2,
      vocabSize: 8192,
    },
    "f16",
  ),
  // ~25M params, 27 MB (Q8_0: llama.cpp's CPU matmuls are ~2x faster on it than on F16); a 64k context
  // holds what coding-agent harnesses send (Claude Code's first prompt is ~38k tokens)
  small: smallPreset(
    {
      contextLength: 65536,
      embeddingLength: 384,
      blockCount: 10,
      feedForwardLength: 1280,
      headCount: 6,
      headCountKv: 2,
      vocabSize: 8192,
    },
    "q8_0",
  ),
  // ~60M params, 64 MB
  medium: smallPreset(
    {
      contextLength: 16384,
      embeddingLength: 576,
      blockCount: 12,
      feedForwardLength: 1920,
      headCount: 9,
      headCountKv: 3,
      vocabSize: 8192,
    },
    "q8_0",
  ),
  // 8.03B params: 16.1 GB (f16 and bf16, the type Meta ships), 8.5 GB
  "llama-3.1-8b-f16": preset({ ...LLAMA_3_1_8B, weightType: "f16" }),
  "llama-3.1-8b-bf16": preset({ ...LLAMA_3_1_8B, weightType: "bf16" }),
  "llama-3.1-8b-q8_0": preset({ ...LLAMA_3_1_8B, weightType: "q8_0" }),
  // 8.19B params: 16.4 GB (f16 and bf16, the type Qwen ships), 8.7 GB
  "qwen3-8b-f16": preset({ ...QWEN3_8B, weightType: "f16" }),
  "qwen3-8b-bf16": preset({ ...QWEN3_8B, weightType: "bf16" }),
  "qwen3-8b-q8_0": preset({ ...QWEN3_8B, weightType: "q8_0" }),
};

/** Files of at least this size show progress while generated (smaller ones take about a second). */
const PROGRESS_MIN_BYTES = 256e6;

export const DEFAULT_BUILTIN_SEED = 1;

export interface EnsureBuiltinModelOptions {
  preset: BuiltinPreset;
  /** Default: $CONTINUUM_CACHE_DIR, else ~/.cache/continuum/models. */
  cacheDir?: string;
  /** Default: DEFAULT_BUILTIN_SEED. */
  seed?: number;
  /** Default "spm", the built-in models' own; "bpe" gives the same shapes a byte-level BPE tokenizer. */
  tokenizer?: TokenizerKind;
}

export function defaultModelCacheDir(): string {
  const env = process.env["CONTINUUM_CACHE_DIR"];
  return env && env.length > 0 ? env : join(homedir(), ".cache", "continuum", "models");
}

export function builtinModelPath(opts: EnsureBuiltinModelOptions): string {
  const seed = (opts.seed ?? DEFAULT_BUILTIN_SEED) >>> 0;
  const tokenizer = (opts.tokenizer ?? "spm") === "spm" ? "" : `-${opts.tokenizer}`;
  return join(opts.cacheDir ?? defaultModelCacheDir(), `continuum-${opts.preset}${tokenizer}-${seed}.gguf`);
}

function scalar(info: GgufInfo, key: string): unknown {
  const v = info.metadata.get(key);
  return v && v.type !== GgufValueType.ARRAY ? v.value : undefined;
}

/** Whether the file at `path` is the complete built-in model for `presetName` and `seed`. */
async function matches(
  path: string,
  presetName: BuiltinPreset,
  seed: number,
  tokenizer: TokenizerKind,
): Promise<boolean> {
  let info: GgufInfo;
  try {
    info = await readGgufInfo(path);
  } catch {
    return false;
  }
  const p = BUILTIN_PRESETS[presetName];
  const expected: Record<string, unknown> = {
    "general.architecture": p.arch,
    "continuum.generator_version": GENERATOR_VERSION,
    "continuum.seed": seed,
    "continuum.preset": presetName,
    [`${p.arch}.context_length`]: p.contextLength,
    [`${p.arch}.embedding_length`]: p.embeddingLength,
    [`${p.arch}.block_count`]: p.blockCount,
    [`${p.arch}.feed_forward_length`]: p.feedForwardLength,
    [`${p.arch}.attention.head_count`]: p.headCount,
    [`${p.arch}.attention.head_count_kv`]: p.headCountKv,
    [`${p.arch}.vocab_size`]: p.vocabSize,
    "general.file_type": llamaFileType(p.weightType),
    "tokenizer.ggml.model": tokenizer === "bpe" ? "gpt2" : "llama",
  };
  for (const [key, value] of Object.entries(expected)) if (scalar(info, key) !== value) return false;
  const plan = planLlamaTensors(p, p.weightType);
  if (info.tensors.length !== plan.length) return false;
  const last = info.tensors[info.tensors.length - 1];
  if (!last || last.size < 0) return false;
  return info.fileSize >= info.dataOffset + last.offset + last.size;
}

/**
 * Returns the path of the built-in model `preset` for `seed`, generating it first unless a matching
 * file is already cached. Generation writes a temporary file and renames it into place, so
 * concurrent callers and interrupted runs never leave a partial model under the final name.
 */
export async function ensureBuiltinModel(opts: EnsureBuiltinModelOptions): Promise<string> {
  const p = BUILTIN_PRESETS[opts.preset];
  if (!p) throw new Error(`unknown built-in model preset ${String(opts.preset)}`);
  const seed = (opts.seed ?? DEFAULT_BUILTIN_SEED) >>> 0;
  const cacheDir = opts.cacheDir ?? defaultModelCacheDir();
  const path = builtinModelPath({ ...opts, cacheDir, seed });
  const tokenizer = opts.tokenizer ?? "spm";
  if (await matches(path, opts.preset, seed, tokenizer)) return path;
  const spec: LlamaSpec = {
    ...p,
    tokenizer,
    seed,
    name: `continuum-${opts.preset}`,
    extraMetadata: { "continuum.preset": opts.preset },
  };
  const size = llamaGgufLayout(spec).fileSize;
  await mkdir(cacheDir, { recursive: true });
  await assertDiskSpace(cacheDir, size, `built-in model ${opts.preset}`);
  process.stderr.write(
    `generating built-in model ${opts.preset} (${formatBytes(size)}, ${formatParams(p.params)} params) into ${path}\n`,
  );
  const progress = size >= PROGRESS_MIN_BYTES ? byteProgress(size) : undefined;
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    await generateLlamaGguf(tmp, spec, progress ? { onProgress: (written) => progress.update(written) } : {});
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  } finally {
    progress?.stop();
  }
  return path;
}
