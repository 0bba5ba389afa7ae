/**
 * What a quantized KV cache costs in accuracy: the KL divergence of every next-token distribution of a fixed
 * prompt set with the KV cache in `type` against the same prompts with an f16 cache, and how often the most
 * likely token stays the same.
 *
 * One model, one context per KV type (typeK = typeV = type); each prompt is fed in chunks of `chunkTokens`
 * with logits at every position, so each position's attention reads its keys and values from the cache in
 * that type. Prompts are seeded text from the replay word list, cut to `promptTokens` tokens: the same
 * seed gives the same prompts and, on the same build and thread count, the same figures.
 *
 * Usage: node --import tsx src/bench/micro/kv-precision.ts [--preset small] [--types f16,q8_0] [--prompts 8]
 *        [--prompt-tokens 384] [--chunk-tokens 512] [--threads 1] [--seed 1]
 */
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { formatTextTable } from "../../analysis/text-table.js";
import { Rng } from "../../core/rng.js";
import {
  DecodeBatch,
  type KvCacheType,
  type LlamaContext,
  type LlamaModel,
  loadModel,
} from "../../engine/native/llama-native.js";
import { type BuiltinPreset, ensureBuiltinModel } from "../../gguf/index.js";
import { REPLAY_WORDS } from "../replay/replay-words.js";

export const REFERENCE_KV_TYPE: KvCacheType = "f16";

export interface KvPrecisionOptions {
  /** KV types to hold against f16 (f16 itself gives the floor: 0 on a deterministic build) */
  readonly types: readonly KvCacheType[];
  readonly prompts: number;
  readonly promptTokens: number;
  /** tokens per decode call */
  readonly chunkTokens: number;
  readonly threads: number;
  readonly seed: number;
}

export interface KvPrecisionRow {
  readonly type: KvCacheType;
  /** bytes of K and V per token over all layers */
  readonly kvBytesPerToken: number | null;
  readonly positions: number;
  /** KL(f16 || type) of next-token distributions, nats */
  readonly meanKl: number;
  readonly maxKl: number;
  /** share of positions whose most likely token is f16's */
  readonly top1Agreement: number;
}

/** Seeded text from the replay word list, tokenized and cut to `tokens` tokens (BOS first). */
export function promptSet(model: LlamaModel, count: number, tokens: number, seed: number): Int32Array[] {
  const rng = new Rng(seed);
  return Array.from({ length: count }, () => {
    const words: string[] = [];
    let ids: Int32Array = new Int32Array(0);
    while (ids.length < tokens) {
      for (let i = 0; i < tokens; i++)
        words.push(REPLAY_WORDS[rng.int(0, REPLAY_WORDS.length - 1)] as string);
      ids = model.tokenize(words.join(" "), { addSpecial: true });
    }
    return ids.slice(0, tokens);
  });
}

/** log-softmax in float64 */
function logSoftmax(logits: Float32Array, out: Float64Array): void {
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < logits.length; i++) max = Math.max(max, logits[i] as number);
  let sum = 0;
  for (let i = 0; i < logits.length; i++) sum += Math.exp((logits[i] as number) - max);
  const logZ = max + Math.log(sum);
  for (let i = 0; i < logits.length; i++) out[i] = (logits[i] as number) - logZ;
}

/** KL(p || q) in nats from log-probabilities. */
export function klDivergence(logP: Float64Array, logQ: Float64Array): number {
  let kl = 0;
  for (let i = 0; i < logP.length; i++) {
    const lp = logP[i] as number;
    kl += Math.exp(lp) * (lp - (logQ[i] as number));
  }
  // rounding can leave a tiny negative sum where the distributions agree
  return Math.max(0, kl);
}

function argmax(xs: Float64Array): number {
  let best = 0;
  for (let i = 1; i < xs.length; i++) if ((xs[i] as number) > (xs[best] as number)) best = i;
  return best;
}

/** Logits at every position of `tokens`, fed in chunks; the context is cleared first. */
async function* logitsOf(ctx: LlamaContext, tokens: Int32Array, chunkTokens: number) {
  ctx.clear();
  const batch = new DecodeBatch(chunkTokens);
  for (let start = 0; start < tokens.length; start += chunkTokens) {
    batch.clear();
    const end = Math.min(tokens.length, start + chunkTokens);
    for (let i = start; i < end; i++) batch.add(tokens[i] as number, i, 0, true);
    const r = await ctx.decode(batch, { sample: false, returnLogits: true });
    for (const out of r.outputs) yield out.logits as Float32Array;
  }
}

interface Tally {
  positions: number;
  klSum: number;
  klMax: number;
  agree: number;
}

/** Holds every type in `options.types` against an f16 KV cache on the same prompts. */
export async function measureKvPrecision(
  model: LlamaModel,
  options: KvPrecisionOptions,
): Promise<KvPrecisionRow[]> {
  const prompts = promptSet(model, options.prompts, options.promptTokens, options.seed);
  const nCtx = Math.ceil(options.promptTokens / 256) * 256;
  const chunkTokens = Math.min(options.chunkTokens, options.promptTokens);
  const contextFor = (type: KvCacheType) =>
    model.createContext({
      nCtx,
      nSeqMax: 1,
      nBatch: chunkTokens,
      nUBatch: chunkTokens,
      threads: options.threads,
      threadsBatch: options.threads,
      typeK: type,
      typeV: type,
    });
  const reference = await contextFor(REFERENCE_KV_TYPE);
  const contexts: LlamaContext[] = [];
  try {
    for (const type of options.types) contexts.push(await contextFor(type));
    const nVocab = model.info.nVocab;
    const logP = new Float64Array(nVocab);
    const logQ = new Float64Array(nVocab);
    const tallies: Tally[] = options.types.map(() => ({ positions: 0, klSum: 0, klMax: 0, agree: 0 }));
    for (const prompt of prompts) {
      const referenceLogits: Float32Array[] = [];
      for await (const logits of logitsOf(reference, prompt, chunkTokens)) referenceLogits.push(logits);
      for (const [t, ctx] of contexts.entries()) {
        const tally = tallies[t] as Tally;
        let position = 0;
        for await (const logits of logitsOf(ctx, prompt, chunkTokens)) {
          logSoftmax(referenceLogits[position++] as Float32Array, logP);
          logSoftmax(logits, logQ);
          const kl = klDivergence(logP, logQ);
          tally.positions++;
          tally.klSum += kl;
          tally.klMax = Math.max(tally.klMax, kl);
          if (argmax(logP) === argmax(logQ)) tally.agree++;
        }
      }
    }
    return options.types.map((type, t) => {
      const tally = tallies[t] as Tally;
      return {
        type,
        kvBytesPerToken: model.kvBytesPerToken(type, type),
        positions: tally.positions,
        meanKl: tally.klSum / tally.positions,
        maxKl: tally.klMax,
        top1Agreement: tally.agree / tally.positions,
      };
    });
  } finally {
    for (const ctx of contexts) ctx.free();
    reference.free();
  }
}

export function formatKvPrecision(rows: readonly KvPrecisionRow[]): string {
  const f16Bytes = rows.find((r) => r.type === REFERENCE_KV_TYPE)?.kvBytesPerToken ?? null;
  return formatTextTable(
    ["KV type", "KV B/token", "vs f16", "positions", "mean KL (nats)", "max KL (nats)", "top-1 agreement"],
    rows.map((r) => [
      r.type,
      String(r.kvBytesPerToken ?? "?"),
      f16Bytes && r.kvBytesPerToken ? `${(r.kvBytesPerToken / f16Bytes).toFixed(3)}x` : "",
      String(r.positions),
      r.meanKl.toExponential(2),
      r.maxKl.toExponential(2),
      `${(r.top1Agreement * 100).toFixed(2)}%`,
    ]),
  );
}

const KV_TYPES: readonly KvCacheType[] = ["f16", "f32", "bf16", "q8_0", "q4_0"];

function kvType(value: string): KvCacheType {
  const type = KV_TYPES.find((t) => t === value);
  if (!type) throw new Error(`unknown KV type "${value}"; choose from ${KV_TYPES.join(", ")}`);
  return type;
}

function positiveInt(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0)
    throw new Error(`--${name}: expected a positive integer, got "${value}"`);
  return n;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      preset: { type: "string", default: "small" },
      types: { type: "string", default: "f16,q8_0" },
      prompts: { type: "string", default: "8" },
      "prompt-tokens": { type: "string", default: "384" },
      "chunk-tokens": { type: "string", default: "512" },
      threads: { type: "string", default: "1" },
      seed: { type: "string", default: "1" },
    },
  });
  const options: KvPrecisionOptions = {
    types: values.types.split(",").map((s) => kvType(s.trim())),
    prompts: positiveInt("prompts", values.prompts),
    promptTokens: positiveInt("prompt-tokens", values["prompt-tokens"]),
    chunkTokens: positiveInt("chunk-tokens", values["chunk-tokens"]),
    threads: positiveInt("threads", values.threads),
    seed: positiveInt("seed", values.seed),
  };
  const preset = values.preset as BuiltinPreset;
  const model = await loadModel(await ensureBuiltinModel({ preset }));
  try {
    const startMs = performance.now();
    const rows = await measureKvPrecision(model, options);
    console.log(
      `built-in ${preset} model; ${options.prompts} prompts x ${options.promptTokens} tokens (seed ${options.seed}), ` +
        `${options.chunkTokens} tokens per decode, ${options.threads} thread(s); KL(f16 || type) of the next-token ` +
        `distribution at every position (${((performance.now() - startMs) / 1000).toFixed(1)} s)`,
    );
    console.log(formatKvPrecision(rows));
  } finally {
    model.free();
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) await main();
