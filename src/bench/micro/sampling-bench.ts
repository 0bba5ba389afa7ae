/**
 * The host's sampling time per decode step at a real vocabulary. Sampling runs on the CPU after every step,
 * once per output row, over the whole vocabulary: 128,256 candidates a row for Llama 3, 16x the built-in
 * models', so their tests never see it. The model here has Llama 3's vocabulary and a toy body (2 layers of
 * width 64), generated once into the model cache; B sequences decode one token each per step under each
 * sampler setting, and the median step's sampling time (DecodeResult.sampleMs) is printed beside the
 * decode's own. Rows of different sequences are sampled on up to `--threads` threads; on the CPU, ggml's own
 * workers spin for work after each step (`--poll`, the engine's threadpoolPoll, default 50) on the same cores.
 * Sampling is the engine's own (logit biases on a copy of the row). Under a grammar (the last three settings,
 * with one that allows any text) ours asks the grammar about the drawn token, or about the highest tokens
 * until top-k has k allowed; with top-p alone, llama.cpp's chain checks every candidate against it.
 *
 * Then one row at a time on this thread, ours and llama.cpp's chain on the same rows, side by side: rows shaped
 * like a trained model's (peaked) and like the toy model's (flat), `--repeats` times each (the range printed).
 *
 * Usage: node --import tsx src/bench/micro/sampling-bench.ts [--rows 32] [--threads 2] [--poll 50] [--steps 9]
 *        [--repeats 3]
 */
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { parseArgs } from "node:util";
import { formatTextTable } from "../../analysis/text-table.js";
import {
  DecodeBatch,
  loadModel,
  type RowSamplerImpl,
  type SamplerParams,
  sampleLogits,
} from "../../engine/native/llama-native.js";
import { FLAT_ROW, PEAKED_ROW, syntheticLogits } from "../../engine/native/logit-rows.js";
import { defaultModelCacheDir, generateLlamaGguf } from "../../gguf/index.js";
import { median, tokenAt } from "../../profiler/measure.js";

const VOCAB = 128_256;

const STOCHASTIC: readonly [string, SamplerParams][] = [
  ["temperature 1", { temperature: 1 }],
  ["temperature 1, top_k 40", { temperature: 1, topK: 40 }],
  ["temperature 0.7, top_p 0.95", { temperature: 0.7, topP: 0.95 }],
  ["temperature 1, min_p 0.05", { temperature: 1, minP: 0.05 }],
];

const ANY_TEXT = "root ::= [^\\x00]*";
/** a token of the bench model's vocabulary that is plain text, which the grammar allows */
const SURE_TOKEN = 1000;

const SETTINGS: readonly [string, SamplerParams | null][] = [
  ["greedy", null],
  ...STOCHASTIC,
  ["temperature 1 + logit_bias", { temperature: 1, logitBias: [{ token: 0, bias: 2 }] }],
  ["greedy + logprobs, top 20", { logprobs: 20 }],
  ["temperature 1 + logprobs, top 20", { temperature: 1, logprobs: 20 }],
  ["temperature 1 + grammar", { temperature: 1, grammar: ANY_TEXT }],
  ["temperature 1, top_k 40 + grammar", { temperature: 1, topK: 40, grammar: ANY_TEXT }],
  ["temperature 0.7, top_p 0.95 + grammar", { temperature: 0.7, topP: 0.95, grammar: ANY_TEXT }],
  // a position the model is sure of (most of a structured output's): one token holds nearly all the mass
  [
    "temperature 0.7, top_p 0.95 + grammar, one token +30",
    { temperature: 0.7, topP: 0.95, grammar: ANY_TEXT, logitBias: [{ token: SURE_TOKEN, bias: 30 }] },
  ],
];

/** Microseconds a row for each implementation, over `repeats` passes of the same rows: [ours, llama.cpp's]. */
function timeRows(logits: Float32Array, params: SamplerParams, repeats: number): [number[], number[]] {
  const perRow = (impl: RowSamplerImpl) => {
    const start = performance.now();
    sampleLogits(logits, VOCAB, { ...params, seed: 1 }, 1, impl);
    return ((performance.now() - start) * 1000) / (logits.length / VOCAB);
  };
  const ours: number[] = [];
  const theirs: number[] = [];
  perRow("continuum");
  perRow("llama.cpp");
  for (let r = 0; r < repeats; r++) {
    ours.push(perRow("continuum"));
    theirs.push(perRow("llama.cpp"));
  }
  return [ours, theirs];
}

function range(xs: readonly number[], digits = 0): string {
  const lo = Math.min(...xs).toFixed(digits);
  const hi = Math.max(...xs).toFixed(digits);
  return lo === hi ? lo : `${lo}-${hi}`;
}

function compareRowSamplers(repeats: number): void {
  const table: string[][] = [];
  for (const [shape, rowShape] of [
    ["peaked", PEAKED_ROW],
    ["flat", FLAT_ROW],
  ] as const) {
    const logits = syntheticLogits(VOCAB, rowShape, 16);
    for (const [label, params] of STOCHASTIC) {
      const [ours, theirs] = timeRows(logits, params, repeats);
      const ratios = ours.map((o, i) => (theirs[i] as number) / o);
      table.push([shape, label, range(ours), range(theirs), `${range(ratios, 1)}x`]);
    }
  }
  console.log(
    `\none row at a time on this thread, 16 rows of ${VOCAB} logits, ${repeats} passes (range): ours vs llama.cpp's chain`,
  );
  console.log(
    formatTextTable(["row", "sampler", "ours us a row", "llama.cpp us a row", "llama.cpp / ours"], table),
  );
}

async function modelPath(): Promise<string> {
  const path = join(defaultModelCacheDir(), `continuum-bench-vocab${VOCAB}.gguf`);
  if (!existsSync(path)) {
    await mkdir(dirname(path), { recursive: true });
    await generateLlamaGguf(path, {
      seed: 1,
      name: "continuum-bench-vocab",
      contextLength: 4096,
      embeddingLength: 64,
      blockCount: 2,
      feedForwardLength: 128,
      headCount: 2,
      headCountKv: 1,
      vocabSize: VOCAB,
    });
  }
  return path;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rows: { type: "string", default: "32" },
      threads: { type: "string", default: "2" },
      poll: { type: "string", default: "50" },
      steps: { type: "string", default: "9" },
      repeats: { type: "string", default: "3" },
    },
  });
  const rows = Number(values.rows);
  const steps = Number(values.steps);
  const model = await loadModel(await modelPath(), { gpuLayers: 0 });
  const ctx = await model.createContext({
    nCtx: Math.max(4096, rows * 64),
    nSeqMax: rows,
    nBatch: Math.max(512, rows * 16),
    threads: Number(values.threads),
    threadpoolPoll: Number(values.poll),
  });
  const table: string[][] = [];
  try {
    const batch = new DecodeBatch(Math.max(512, rows * 16));
    for (const [label, params] of SETTINGS) {
      ctx.clear();
      for (let s = 0; s < rows; s++) ctx.setSampler(s, params);
      batch.clear();
      for (let s = 0; s < rows; s++) {
        for (let p = 0; p < 16; p++) batch.add(tokenAt(p * 97 + s, VOCAB), p, s, p === 15);
      }
      await ctx.decode(batch);
      const sample: number[] = [];
      const decode: number[] = [];
      for (let step = 0; step < steps; step++) {
        batch.clear();
        for (let s = 0; s < rows; s++) batch.add(tokenAt(step * 31 + s, VOCAB), 16 + step, s, true);
        const d = await ctx.decode(batch);
        sample.push(d.sampleMs);
        decode.push(d.decodeMs);
      }
      const ms = median(sample);
      table.push([label, ms.toFixed(2), ((ms / rows) * 1000).toFixed(0), median(decode).toFixed(2)]);
    }
  } finally {
    ctx.free();
    model.free();
  }
  console.log(
    `sampling ${rows} rows of a ${VOCAB}-token vocabulary per step, ${values.threads} threads, poll ${values.poll} (median of ${steps} steps)`,
  );
  console.log(formatTextTable(["sampler", "sampling ms", "us a row", "llama_decode ms"], table));
  compareRowSamplers(Number(values.repeats));
}

try {
  await main();
} catch (error) {
  process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
