/**
 * The host's share of a decode step as the KV pool grows: llama.cpp fills an attention mask of (rows x KV
 * cells) on the CPU before every micro-batch, and in one unified pool every decoding row spans the cells of
 * every sequence, where a per-sequence stream spans only its own. B sequences each hold (pool / B) tokens of
 * distinct KV (one prefill, restored into every other slot); each then decodes one token per step. Reports
 * the median step's wall time and two of its phases (DecodeResult.phasesMs): prepare (the mask and the graph,
 * host work the GPU does not shorten) and compute, for both layouts side by side.
 *
 * Usage: node --import tsx src/bench/micro/decode-mask-bench.ts [--preset tiny] [--sequences 32]
 *        [--pools 16384,65536,262144] [--steps 5] [--threads 2]
 */
import { parseArgs } from "node:util";
import { formatTextTable } from "../../analysis/text-table.js";
import {
  DecodeBatch,
  type DecodeResult,
  type LlamaModel,
  loadModel,
} from "../../engine/native/llama-native.js";
import { type BuiltinPreset, ensureBuiltinModel } from "../../gguf/index.js";
import { median, tokenAt } from "../../profiler/measure.js";

interface Options {
  sequences: number;
  steps: number;
  threads: number;
}

/** The median decode step of `sequences` rows, each sequence holding pool / sequences tokens. */
async function decodeSteps(model: LlamaModel, pool: number, unified: boolean, o: Options) {
  const held = Math.floor(pool / o.sequences) - o.steps - 256;
  if (held < 1) throw new Error(`a pool of ${pool} cells is too small for ${o.sequences} sequences`);
  const ctx = await model.createContext({
    nCtx: pool,
    nSeqMax: o.sequences,
    kvUnified: unified,
    nBatch: 2048,
    nUBatch: 512,
    threads: o.threads,
    threadsBatch: o.threads,
    computeTiming: true,
  });
  try {
    const nVocab = model.info.nVocab;
    const batch = new DecodeBatch(Math.max(2048, o.sequences));
    for (let start = 0; start < held; start += 2048) {
      batch.clear();
      const end = Math.min(held, start + 2048);
      for (let p = start; p < end; p++) batch.add(tokenAt(p, nVocab), p, 0, p === end - 1);
      await ctx.decode(batch, { sample: false });
    }
    const state = await ctx.saveSeqStateInto(0, (n) => Buffer.allocUnsafeSlow(n));
    for (let s = 1; s < o.sequences; s++) await ctx.restoreSeqState(s, state);
    const steps: DecodeResult[] = [];
    for (let step = 0; step <= o.steps; step++) {
      batch.clear();
      for (let s = 0; s < o.sequences; s++) batch.add(tokenAt(step * 31 + s, nVocab), held + step, s, true);
      const d = await ctx.decode(batch, { sample: false });
      if (step > 0) steps.push(d);
    }
    const phase = (k: "prepare" | "compute") => median(steps.map((d) => d.phasesMs?.[k] ?? Number.NaN));
    return {
      wall: median(steps.map((d) => d.decodeMs)),
      prepare: phase("prepare"),
      compute: phase("compute"),
    };
  } finally {
    ctx.free();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      preset: { type: "string", default: "tiny" },
      sequences: { type: "string", default: "32" },
      pools: { type: "string", default: "16384,65536,262144" },
      steps: { type: "string", default: "5" },
      threads: { type: "string", default: "2" },
    },
  });
  const o: Options = {
    sequences: Number(values.sequences),
    steps: Number(values.steps),
    threads: Number(values.threads),
  };
  const pools = (values.pools ?? "").split(",").map(Number);
  const model = await loadModel(await ensureBuiltinModel({ preset: values.preset as BuiltinPreset }), {
    gpuLayers: 0,
  });
  const ms = (x: number) => x.toFixed(2);
  const rows: string[][] = [];
  try {
    for (const pool of pools) {
      const u = await decodeSteps(model, pool, true, o);
      const s = await decodeSteps(model, pool, false, o);
      rows.push([
        `${pool}`,
        ms(u.wall),
        ms(u.prepare),
        ms(u.compute),
        ms(s.wall),
        ms(s.prepare),
        ms(s.compute),
      ]);
      process.stderr.write(`pool ${pool}: done\n`);
    }
  } finally {
    model.free();
  }
  console.log(
    `decode steps of ${o.sequences} sequences filling the pool (${values.preset}, ${o.threads} threads; ms, median of ${o.steps})`,
  );
  console.log(
    formatTextTable(
      ["pool cells", "unified wall", "prepare", "compute", "streams wall", "prepare", "compute"],
      rows,
    ),
  );
}

try {
  await main();
} catch (error) {
  process.stderr.write(`error: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 1;
}
