/**
 * What do idle (pinned) sequences in the unified KV pool cost the sequences that are decoding?
 *
 * One context, one unified pool. N idle sequences each hold `--idle-len` tokens of KV (filled by
 * restoring one saved 2k-token state into every idle slot: the cells are real and distinct, only the
 * prefill is skipped); one active sequence with `--active-len` tokens of history then decodes single-token
 * steps. Reports median llama_decode ms per step for N = 0 / 8 / 32 (or --idle), flash attention off and
 * on side by side, with ratios to N = 0 (ratios are what to compare on a shared, noisy machine).
 *
 * A second table shows that the cost follows the pool's high-water mark (llama.cpp attends over cells
 * [0, highest used cell], padded to 256), not the number of idle sequences: removing the idle sequences
 * does not help while the active one sits above them; saving, clearing and restoring it (compaction) does.
 *
 * Usage: node --import tsx src/bench/micro/native-idle-kv-bench.ts [--preset small] [--threads 1]
 *        [--idle 0,8,32] [--idle-len 2048] [--active-len 512] [--steps 40] [--kv-type f16]
 */
import { parseArgs } from "node:util";
import { formatTextTable } from "../../analysis/text-table.js";
import {
  DecodeBatch,
  type KvCacheType,
  type LlamaContext,
  type LlamaModel,
  loadModel,
} from "../../engine/native/llama-native.js";
import { type BuiltinPreset, ensureBuiltinModel } from "../../gguf/index.js";

interface Cell {
  msPerStep: number;
  nCtx: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

function syntheticTokens(n: number, nVocab: number, salt: number): Int32Array {
  const out = new Int32Array(n);
  let x = (salt * 2654435761) >>> 0;
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out[i] = 300 + (x % (nVocab - 300));
  }
  return out;
}

async function prefill(ctx: LlamaContext, tokens: Int32Array, seqId: number): Promise<void> {
  const nBatch = ctx.info.nBatch;
  const batch = new DecodeBatch(nBatch);
  for (let start = 0; start < tokens.length; start += nBatch) {
    const chunk = tokens.subarray(start, Math.min(tokens.length, start + nBatch));
    batch.clear().addSequence(chunk, start, seqId, false);
    await ctx.decode(batch, { sample: false });
  }
}

async function measure(
  model: LlamaModel,
  opts: {
    flashAttn: boolean;
    idleCounts: number[];
    idleLen: number;
    activeLen: number;
    steps: number;
    threads: number;
    kvType: KvCacheType;
  },
): Promise<Map<number, Cell>> {
  const maxIdle = Math.max(...opts.idleCounts);
  const nCtx = Math.ceil(((maxIdle + 1) * opts.idleLen + opts.activeLen + opts.steps + 256) / 256) * 256;
  const ctx = await model.createContext({
    nCtx,
    nSeqMax: maxIdle + 2,
    nBatch: 512,
    nUBatch: 512,
    threads: opts.threads,
    threadsBatch: opts.threads,
    flashAttn: opts.flashAttn,
    typeK: opts.kvType,
    typeV: opts.kvType,
  });
  const results = new Map<number, Cell>();
  try {
    const nVocab = model.info.nVocab;
    // one real 2k-token prefill, saved once; idle slots are restored copies (distinct cells)
    const template = maxIdle + 1;
    await prefill(ctx, syntheticTokens(opts.idleLen, nVocab, 7), template);
    const saved = await ctx.saveSeqState(template);
    ctx.seqRemove(template);
    const activeSeq = 0;
    const activeTokens = syntheticTokens(opts.activeLen, nVocab, 11);

    for (const idle of [...opts.idleCounts].sort((a, b) => a - b)) {
      ctx.clear();
      for (let s = 1; s <= idle; s++) await ctx.restoreSeqState(s, saved);
      await prefill(ctx, activeTokens, activeSeq);
      const batch = new DecodeBatch(1);
      const times: number[] = [];
      let pos = opts.activeLen;
      let token = activeTokens[activeTokens.length - 1]!;
      for (let step = 0; step < opts.steps + 3; step++) {
        batch.clear().add(token, pos++, activeSeq, true);
        const r = await ctx.decode(batch);
        token = r.outputs[0]!.token;
        if (step >= 3) times.push(r.decodeMs); // skip warm-up steps
      }
      results.set(idle, { msPerStep: median(times), nCtx: ctx.info.nCtx });
    }
  } finally {
    ctx.free();
  }
  return results;
}

async function stepMs(ctx: LlamaContext, seqId: number, pos: number, steps: number): Promise<number> {
  const batch = new DecodeBatch(1);
  const times: number[] = [];
  for (let i = 0; i < steps + 3; i++) {
    batch.clear().add(500, pos + i, seqId, true);
    const r = await ctx.decode(batch, { sample: false });
    if (i >= 3) times.push(r.decodeMs);
  }
  ctx.seqRemove(seqId, pos); // back to the same history length for the next measurement
  return median(times);
}

/** ms/step for: 8 idle below the active seq; idle removed (active still high); active compacted. */
async function measureHighWater(
  model: LlamaModel,
  opts: {
    flashAttn: boolean;
    idleLen: number;
    activeLen: number;
    steps: number;
    threads: number;
    kvType: KvCacheType;
  },
): Promise<number[]> {
  const idle = 8;
  const nCtx = Math.ceil(((idle + 1) * opts.idleLen + opts.activeLen + opts.steps + 256) / 256) * 256;
  const ctx = await model.createContext({
    nCtx,
    nSeqMax: idle + 2,
    nBatch: 512,
    threads: opts.threads,
    flashAttn: opts.flashAttn,
    typeK: opts.kvType,
    typeV: opts.kvType,
  });
  try {
    const nVocab = model.info.nVocab;
    await prefill(ctx, syntheticTokens(opts.idleLen, nVocab, 7), idle + 1);
    const saved = await ctx.saveSeqState(idle + 1);
    ctx.clear();
    for (let s = 1; s <= idle; s++) await ctx.restoreSeqState(s, saved);
    await prefill(ctx, syntheticTokens(opts.activeLen, nVocab, 11), 0);
    const below = await stepMs(ctx, 0, opts.activeLen, opts.steps);
    for (let s = 1; s <= idle; s++) ctx.seqRemove(s);
    const removed = await stepMs(ctx, 0, opts.activeLen, opts.steps);
    const state = await ctx.saveSeqState(0);
    ctx.clear();
    await ctx.restoreSeqState(0, state);
    const compacted = await stepMs(ctx, 0, opts.activeLen, opts.steps);
    return [below, removed, compacted];
  } finally {
    ctx.free();
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      preset: { type: "string", default: "small" },
      threads: { type: "string", default: "1" },
      idle: { type: "string", default: "0,8,32" },
      "idle-len": { type: "string", default: "2048" },
      "active-len": { type: "string", default: "512" },
      steps: { type: "string", default: "40" },
      "kv-type": { type: "string", default: "f16" },
    },
  });
  const preset = values.preset as BuiltinPreset;
  const idleCounts = values.idle.split(",").map((s) => Number.parseInt(s, 10));
  const opts = {
    idleCounts,
    idleLen: Number.parseInt(values["idle-len"], 10),
    activeLen: Number.parseInt(values["active-len"], 10),
    steps: Number.parseInt(values.steps, 10),
    threads: Number.parseInt(values.threads, 10),
    kvType: values["kv-type"] as KvCacheType,
  };
  const model = await loadModel(await ensureBuiltinModel({ preset }));
  const i = model.info;
  console.log(
    `model ${preset}: ${i.nLayer} layers, n_embd ${i.nEmbd}, ${i.nHead}/${i.nHeadKv} heads, ` +
      `${model.kvBytesPerToken(opts.kvType)} KV B/token (${opts.kvType}); threads ${opts.threads}`,
  );
  console.log(
    `1 active seq (${opts.activeLen} tokens of history) decoding 1 token/step; idle seqs hold ${opts.idleLen} tokens each; ` +
      `median llama_decode ms over ${opts.steps} steps`,
  );
  const off = await measure(model, { ...opts, flashAttn: false });
  const on = await measure(model, { ...opts, flashAttn: true });
  const base = (m: Map<number, Cell>) => m.get(Math.min(...idleCounts))!.msPerStep;
  const head = [
    "idle seqs",
    "idle KV cells",
    "FA off ms",
    "FA off ratio",
    "FA on ms",
    "FA on ratio",
    "on/off",
  ];
  const rows: string[][] = [];
  for (const n of [...idleCounts].sort((a, b) => a - b)) {
    const a = off.get(n)!;
    const b = on.get(n)!;
    rows.push([
      String(n),
      String(n * opts.idleLen),
      a.msPerStep.toFixed(3),
      (a.msPerStep / base(off)).toFixed(2),
      b.msPerStep.toFixed(3),
      (b.msPerStep / base(on)).toFixed(2),
      (b.msPerStep / a.msPerStep).toFixed(2),
    ]);
  }
  console.log(formatTextTable(head, rows, { labelColumn: false }));

  console.log(
    "\nhigh-water mark: 8 idle seqs, then removed, then the active seq compacted (save/clear/restore)",
  );
  const hwOff = await measureHighWater(model, { ...opts, flashAttn: false });
  const hwOn = await measureHighWater(model, { ...opts, flashAttn: true });
  const labels = [
    "8 idle below the active seq",
    "idle removed, active still above",
    "active compacted to low cells",
  ];
  const hwRows = [["pool state", "FA off ms", "FA on ms"]];
  labels.forEach((l, k) => {
    hwRows.push([l, hwOff[k]!.toFixed(3), hwOn[k]!.toFixed(3)]);
  });
  const hwWidths = hwRows[0]!.map((_, c) => Math.max(...hwRows.map((r) => r[c]!.length)));
  for (const r of hwRows)
    console.log(r.map((v, c) => (c === 0 ? v.padEnd(hwWidths[c]!) : v.padStart(hwWidths[c]!))).join("  "));
  model.free();
}

await main();
