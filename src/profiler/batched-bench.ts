/**
 * Our engine's equivalent of llama.cpp's `llama-batched-bench` (default mode: no shared prompt, batched
 * generation): for each (pp, tg, pl), `pl` sequences each prefill `pp` tokens — all rows in one logical
 * batch decoded in nBatch chunks — then `tg` steps each decode one token for every sequence. Speeds:
 * S_PP = pl*pp / T_PP, S_TG = pl*tg / T_TG, wall time around the awaited calls.
 *
 * It runs through LlamaModelRunner.execute, i.e. the serving engine's own path (its KV layout — one unified
 * pool, or one stream per sequence as `serve --kv-layout streams` — flash attention, persistent threadpool,
 * the async worker hop, greedy sampling of every requested row), so the comparison is the engine's
 * kernels-plus-plumbing against llama.cpp's own loop.
 *
 *   node --import tsx src/profiler/batched-bench.ts --model <gguf> | --builtin-model small
 *        [--threads 1] [--npp 128,512] [--ntg 64] [--npl 1,4,16] [--ctx 16384] [--batch 512]
 *        [--kv-layout unified|streams] [--json]
 */
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { defaultThreads, LlamaModelRunner } from "../engine/runners/llama-model-runner.js";
import { KV_LAYOUTS, type KvLayout, RunnerBatch } from "../engine/runners/model-runner.js";
import { type BuiltinPreset, ensureBuiltinModel } from "../gguf/index.js";

export interface BatchedBenchRow {
  readonly pp: number;
  readonly tg: number;
  readonly pl: number;
  readonly nKv: number;
  readonly tPp: number;
  readonly speedPp: number;
  readonly tTg: number;
  readonly speedTg: number;
}

export interface BatchedBenchOptions {
  readonly modelPath: string;
  readonly threads: number;
  readonly npp: readonly number[];
  readonly ntg: readonly number[];
  readonly npl: readonly number[];
  /** KV cells (llama-batched-bench -c) */
  readonly ctx: number;
  /** rows per llama_decode (-b; -ub = min(b, 512)) */
  readonly batch: number;
  /** default unified (llama-batched-bench -kvu); streams = its default per-sequence streams */
  readonly kvLayout?: KvLayout;
  readonly log?: (row: BatchedBenchRow) => void;
}

function randomToken(state: { x: number }, nVocab: number): number {
  state.x = (Math.imul(state.x, 1103515245) + 12345) >>> 0;
  return state.x % nVocab;
}

export async function runBatchedBench(o: BatchedBenchOptions): Promise<BatchedBenchRow[]> {
  const maxPl = Math.max(...o.npl);
  const runner = await LlamaModelRunner.open({
    modelPath: o.modelPath,
    kvCells: o.ctx,
    maxSeqs: maxPl,
    batchTokens: o.batch,
    threads: o.threads,
    kvLayout: o.kvLayout ?? "unified",
  });
  const rows: BatchedBenchRow[] = [];
  try {
    const nVocab = runner.model.info.nVocab;
    const rng = { x: 1 };
    const big = new RunnerBatch(1024);
    // warm-up, as llama-batched-bench does (16 tokens)
    for (let i = 0; i < 16; i++) big.add(randomToken(rng, nVocab), i, 0, i === 15);
    await runner.execute(big);
    for (const pp of o.npp) {
      for (const tg of o.ntg) {
        for (const pl of o.npl) {
          const nKv = pl * (pp + tg);
          if (nKv > runner.kvCells || pp + tg > runner.maxContextTokens) continue;
          runner.context.clear();
          big.clear();
          for (let j = 0; j < pl; j++) {
            for (let i = 0; i < pp; i++) big.add(randomToken(rng, nVocab), i, j, i === pp - 1);
          }
          let t0 = performance.now();
          await runner.execute(big); // split into nBatch-row decodes, like decode_helper
          const tPp = (performance.now() - t0) / 1000;
          const step = new RunnerBatch(pl);
          t0 = performance.now();
          for (let i = 0; i < tg; i++) {
            step.clear();
            for (let j = 0; j < pl; j++) step.add(randomToken(rng, nVocab), pp + i, j, true);
            await runner.execute(step);
          }
          const tTg = (performance.now() - t0) / 1000;
          const row = { pp, tg, pl, nKv, tPp, speedPp: (pl * pp) / tPp, tTg, speedTg: (pl * tg) / tTg };
          o.log?.(row);
          rows.push(row);
        }
      }
    }
  } finally {
    await runner.close();
  }
  return rows;
}

const intList = (s: string) => s.split(",").map((x) => Number.parseInt(x, 10));

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { values } = parseArgs({
    options: {
      model: { type: "string" },
      "builtin-model": { type: "string", default: "small" },
      threads: { type: "string" },
      npp: { type: "string", default: "128,512" },
      ntg: { type: "string", default: "64" },
      npl: { type: "string", default: "1,4,16" },
      ctx: { type: "string", default: "16384" },
      batch: { type: "string", default: "512" },
      "kv-layout": { type: "string", default: "unified" },
      json: { type: "boolean", default: false },
    },
  });
  const modelPath =
    values.model ?? (await ensureBuiltinModel({ preset: values["builtin-model"] as BuiltinPreset }));
  const print = (r: BatchedBenchRow) =>
    process.stdout.write(
      values.json
        ? `${JSON.stringify(r)}\n`
        : `pp ${r.pp} tg ${r.tg} pl ${r.pl}: S_PP ${r.speedPp.toFixed(1)} t/s, S_TG ${r.speedTg.toFixed(1)} t/s\n`,
    );
  const kvLayout = values["kv-layout"] as KvLayout;
  if (!KV_LAYOUTS.includes(kvLayout)) throw new Error(`--kv-layout must be one of ${KV_LAYOUTS.join(", ")}`);
  await runBatchedBench({
    modelPath,
    kvLayout,
    threads: values.threads ? Number(values.threads) : defaultThreads(),
    npp: intList(values.npp),
    ntg: intList(values.ntg),
    npl: intList(values.npl),
    ctx: Number(values.ctx),
    batch: Number(values.batch),
    log: print,
  });
}
