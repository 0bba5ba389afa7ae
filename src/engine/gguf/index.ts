/**
 * Built-in models: small llama GGUF files generated on demand (seeded random weights, built-in
 * tokenizer and ChatML template) and cached on disk, since no weights can be downloaded.
 */
import { randomBytes } from "node:crypto";
import { mkdir, rename, rm } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { type GgufInfo, readGgufInfo } from "./gguf-reader.js";
import { GgufValueType } from "./gguf-types.js";
import {
  countLlamaParams,
  GENERATOR_VERSION,
  generateLlamaGguf,
  type LlamaShape,
  llamaFileType,
  planLlamaTensors,
  type WeightType,
} from "./llama-model.js";

export type { ChatMessage } from "./chat-template.js";
export { CHATML_TEMPLATE, renderChatML } from "./chat-template.js";
export {
  type GgufInfo,
  type GgufTensorInfo,
  metaArray,
  metaNumber,
  metaString,
  readGgufInfo,
} from "./gguf-reader.js";
export { GgmlType, GgufValueType, LlamaFileType } from "./gguf-types.js";
export { type GgufLayout, type GgufMetadataValue, GgufWriter, type TensorSource } from "./gguf-writer.js";
export {
  countLlamaParams,
  GENERATOR_VERSION,
  generateLlamaGguf,
  type LlamaShape,
  type LlamaSpec,
  llamaFileType,
  planLlamaTensors,
  type WeightType,
} from "./llama-model.js";
export { SpmTokenizer, type TokenizeOptions } from "./spm-tokenizer.js";
export { buildVocab, DEFAULT_VOCAB_SIZE, TokenType, type Vocab } from "./vocab.js";

export type BuiltinPreset = "tiny" | "small" | "medium";

export interface BuiltinPresetInfo extends Required<LlamaShape> {
  weightType: WeightType;
  /** Parameter count (weights), for reference. */
  params: number;
}

function preset(shape: Required<LlamaShape>, weightType: WeightType): BuiltinPresetInfo {
  return { ...shape, weightType, params: countLlamaParams(shape) };
}

/** Shapes of the built-in models (all share the 8192-token built-in vocabulary). */
export const BUILTIN_PRESETS: Readonly<Record<BuiltinPreset, BuiltinPresetInfo>> = {
  // ~2.9M params, 5.8 MB: fast enough for unit tests
  tiny: preset(
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
  // ~25M params, 27 MB (Q8_0: llama.cpp's CPU matmuls are ~2x faster on it than on F16)
  small: preset(
    {
      contextLength: 8192,
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
  medium: preset(
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
};

export const DEFAULT_BUILTIN_SEED = 1;

export interface EnsureBuiltinModelOptions {
  preset: BuiltinPreset;
  /** Default: $CONTINUUM_CACHE_DIR, else ~/.cache/continuum/models. */
  cacheDir?: string;
  /** Default: DEFAULT_BUILTIN_SEED. */
  seed?: number;
}

export function defaultModelCacheDir(): string {
  const env = process.env["CONTINUUM_CACHE_DIR"];
  return env && env.length > 0 ? env : join(homedir(), ".cache", "continuum", "models");
}

export function builtinModelPath(opts: EnsureBuiltinModelOptions): string {
  const seed = (opts.seed ?? DEFAULT_BUILTIN_SEED) >>> 0;
  return join(opts.cacheDir ?? defaultModelCacheDir(), `continuum-${opts.preset}-${seed}.gguf`);
}

function scalar(info: GgufInfo, key: string): unknown {
  const v = info.metadata.get(key);
  return v && v.type !== GgufValueType.ARRAY ? v.value : undefined;
}

/** Whether the file at `path` is the complete built-in model for `presetName` and `seed`. */
async function matches(path: string, presetName: BuiltinPreset, seed: number): Promise<boolean> {
  let info: GgufInfo;
  try {
    info = await readGgufInfo(path);
  } catch {
    return false;
  }
  const p = BUILTIN_PRESETS[presetName];
  const expected: Record<string, unknown> = {
    "general.architecture": "llama",
    "continuum.generator_version": GENERATOR_VERSION,
    "continuum.seed": seed,
    "continuum.preset": presetName,
    "llama.context_length": p.contextLength,
    "llama.embedding_length": p.embeddingLength,
    "llama.block_count": p.blockCount,
    "llama.feed_forward_length": p.feedForwardLength,
    "llama.attention.head_count": p.headCount,
    "llama.attention.head_count_kv": p.headCountKv,
    "llama.vocab_size": p.vocabSize,
    "general.file_type": llamaFileType(p.weightType),
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
  if (await matches(path, opts.preset, seed)) return path;
  await mkdir(cacheDir, { recursive: true });
  const tmp = `${path}.tmp-${process.pid}-${randomBytes(4).toString("hex")}`;
  try {
    await generateLlamaGguf(tmp, {
      ...p,
      seed,
      name: `continuum-${opts.preset}`,
      weightType: p.weightType,
      extraMetadata: { "continuum.preset": opts.preset },
    });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  return path;
}
