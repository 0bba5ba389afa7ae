/**
 * The llama.cpp engine on a built-in model, next to the bare native layer doing the same work:
 *
 * - prefill: tokens/s of long prompts, bare `llama_decode` calls of nBatch rows vs the engine (chunked
 *   prefill through the scheduler, max_tokens 1);
 * - decode: aggregate tokens/s at 1, 8 and 32 sequences, and the time per step. "Bare" is a loop of
 *   `context.decode()` calls with one row per sequence and native greedy sampling, awaited from JS (so it
 *   includes the worker -> Promise hop). The engine's steady-state window is from the moment every
 *   request has its first token to the first finish: every step then decodes exactly one token per
 *   sequence. The step overhead our TypeScript layer adds = engine wall per step - bare wall per step,
 *   split into time inside step() beyond the native decode + sampling, and time between steps.
 *
 * Each level gets a fresh model runner (an empty KV pool: idle cells would slow decode, see
 * docs/engine.md), used bare, then cleared and driven by the engine, then bare again (the bare figures
 * are the mean of both runs, which evens out drift in the load of a shared machine).
 *
 *   npm run bench:engine -- [--preset <built-in preset>] [--threads 1] [--tokens 128]
 *                           [--concurrency 1,8,32] [--prefill-tokens 512] [--prefill-prompts 4]
 */
import { parseArgs } from "node:util";
import { formatTextTable } from "../../analysis/text-table.js";
import { Engine, type EngineLoopStats } from "../../engine/engine.js";
import type { GenerateRequest } from "../../engine/engine-api.js";
import { DecodeBatch, type LlamaContext } from "../../engine/native/llama-native.js";
import { LlamaModelRunner } from "../../engine/runners/llama-model-runner.js";
import { chat, request } from "../../engine/test-support/engine-helpers.js";
import { type BuiltinPreset, ensureBuiltinModel } from "../../gguf/index.js";

const { values } = parseArgs({
  options: {
    preset: { type: "string", default: "tiny" },
    threads: { type: "string", default: "1" },
    tokens: { type: "string", default: "128" },
    concurrency: { type: "string", default: "1,8,32" },
    "prefill-tokens": { type: "string", default: "512" },
    "prefill-prompts": { type: "string", default: "4" },
  },
});
const preset = values.preset as BuiltinPreset;
const threads = Number(values.threads);
const maxTokens = Number(values.tokens);
const levels = (values.concurrency as string).split(",").map(Number);
const prefillTokens = Number(values["prefill-tokens"]);
const prefillPrompts = Number(values["prefill-prompts"]);
const BATCH = 512;
const maxLevel = Math.max(...levels, prefillPrompts);
const modelPath = await ensureBuiltinModel({ preset });

async function openRunner(): Promise<LlamaModelRunner> {
  return LlamaModelRunner.open({
    modelPath,
    kvCells: Math.max(4096, maxLevel * (Math.max(prefillTokens, 128) + maxTokens + 32)),
    maxSeqs: Math.min(256, 2 * maxLevel + 2),
    batchTokens: BATCH,
    threads,
  });
}

function newEngine(runner: LlamaModelRunner, maxNumSeqs: number): Engine {
  return new Engine({ runner, policy: "vllm", maxNumSeqs, maxNumBatchedTokens: BATCH, closeRunner: false });
}

const ms = (s: number) => (s * 1000).toFixed(2);
const rate = (n: number, s: number) => (n / s).toFixed(0);

/** Token ids of a prompt of `n` tokens (BOS first), distinct from its second token on: no prefix hits. */
function rawPrompt(runner: LlamaModelRunner, i: number, n: number): number[] {
  const text = `prompt ${i}: ${"the build failed because the parser dropped the last token of each line ".repeat(Math.ceil(n / 8))}`;
  return Array.from(runner.tokenize(text)).slice(0, n);
}

async function drain(stream: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of stream) {
    // only the side effects matter
  }
}

/** Requests run concurrently; snapshots of the loop counters when all have a first token and at the first finish. */
async function runWindowed(engine: Engine, requests: GenerateRequest[]) {
  const snap = () => ({ t: performance.now(), ...engine.loopStats });
  let started = 0;
  let windowStart: (EngineLoopStats & { t: number }) | null = null;
  let windowEnd: (EngineLoopStats & { t: number }) | null = null;
  let completion = 0;
  const t0 = performance.now();
  await Promise.all(
    requests.map(async (r) => {
      let first = true;
      for await (const event of engine.generate(r, new AbortController().signal)) {
        // a token's delta (the prompt's usage comes on one of its own, after the first prefill chunk)
        if (event.type === "delta" && event.promptUsage === undefined && first) {
          first = false;
          if (++started === requests.length) windowStart = snap();
        } else if (event.type === "done") {
          windowEnd ??= snap();
          completion += event.usage.completionTokens;
        }
      }
    }),
  );
  return { wallS: (performance.now() - t0) / 1000, completion, start: windowStart!, end: windowEnd! };
}

// ------------------------------------------------------------------------------------------------ prefill

async function benchPrefill(): Promise<void> {
  const runner = await openRunner();
  const prompts = Array.from({ length: prefillPrompts }, (_, i) => rawPrompt(runner, i, prefillTokens));
  const ctx = runner.context;
  const batch = new DecodeBatch(BATCH);
  // warm-up
  await ctx.decode(batch.clear().addSequence(prompts[0]!.slice(0, 32), 0, 0, true));
  ctx.clear();
  let bareTokens = 0;
  let bareComputeMs = 0;
  const t0 = performance.now();
  for (const [seq, ids] of prompts.entries()) {
    for (let start = 0; start < ids.length; start += BATCH) {
      const chunk = ids.slice(start, start + BATCH);
      const r = await ctx.decode(
        batch.clear().addSequence(chunk, start, seq, start + chunk.length === ids.length),
      );
      bareComputeMs += r.decodeMs + r.sampleMs;
      bareTokens += chunk.length;
    }
  }
  const bareS = (performance.now() - t0) / 1000;
  ctx.clear();

  const engine = newEngine(runner, prefillPrompts);
  const texts = prompts.map((ids) => runner.model.detokenize(Int32Array.from(ids), { removeSpecial: true }));
  await drain(
    engine.generate(request("warm", "warm up", { sampling: { maxTokens: 1 } }), new AbortController().signal),
  );
  const before = { ...engine.loopStats };
  const t1 = performance.now();
  let engineTokens = 0;
  await Promise.all(
    texts.map(async (text, i) => {
      for await (const event of engine.generate(
        request(`prefill-${i}`, text, { sampling: { maxTokens: 1, ignoreEos: true } }),
        new AbortController().signal,
      )) {
        if (event.type === "done") engineTokens += event.usage.promptTokens - event.usage.cachedTokens;
      }
    }),
  );
  const engineS = (performance.now() - t1) / 1000;
  const computeS = engine.loopStats.computeS - before.computeS;
  await engine.shutdown();
  await runner.close();
  console.log(
    `prefill, ${prefillPrompts} prompts x ~${prefillTokens} tokens, ${BATCH}-row batches:\n` +
      `  bare    ${rate(bareTokens, bareS)} tok/s (${bareTokens} tokens in ${ms(bareS)} ms, native decode ${bareComputeMs.toFixed(2)} ms)\n` +
      `  engine  ${rate(engineTokens, engineS)} tok/s (${engineTokens} tokens in ${ms(engineS)} ms, native decode ${ms(computeS)} ms)`,
  );
}

// ------------------------------------------------------------------------------------------------ decode

interface BareDecode {
  stepS: number;
  computeS: number;
}

/**
 * c sequences, each prefilled with its prompt, then `steps` single-token steps of all c (greedy), each
 * step an awaited decode() on the worker or, with `sync`, a decodeSync() on this thread.
 */
async function bareDecode(
  ctx: LlamaContext,
  prompts: number[][],
  steps: number,
  sync = false,
): Promise<BareDecode> {
  const c = prompts.length;
  const batch = new DecodeBatch(Math.max(BATCH, c));
  const last = new Int32Array(c);
  const pos = new Int32Array(c);
  for (const [seq, ids] of prompts.entries()) {
    for (let start = 0; start < ids.length; start += BATCH) {
      const chunk = ids.slice(start, start + BATCH);
      const r = await ctx.decode(
        batch.clear().addSequence(chunk, start, seq, start + chunk.length === ids.length),
      );
      for (const o of r.outputs) last[o.seqId] = o.token;
    }
    pos[seq] = ids.length;
  }
  const warmup = 3;
  let t0 = 0;
  let computeMs = 0;
  for (let step = 0; step < steps + warmup; step++) {
    if (step === warmup) {
      t0 = performance.now();
      computeMs = 0;
    }
    batch.clear();
    for (let seq = 0; seq < c; seq++) batch.add(last[seq]!, pos[seq]!++, seq, true);
    const r = sync ? ctx.decodeSync(batch) : await ctx.decode(batch);
    computeMs += r.decodeMs + r.sampleMs;
    for (const o of r.outputs) last[o.seqId] = o.token;
  }
  return { stepS: (performance.now() - t0) / 1000 / steps, computeS: computeMs / 1000 / steps };
}

async function benchDecode(c: number) {
  const runner = await openRunner();
  const chatPrompt = (i: number) =>
    runner.renderChat(
      chat(`request ${i}: ${"summarise the repository layout and the failing tests ".repeat(6)}`),
    );
  const texts = Array.from({ length: c }, (_, i) => chatPrompt(i));
  const promptIds = texts.map((t) => Array.from(runner.tokenize(t)));
  const bareBefore = await bareDecode(runner.context, promptIds, maxTokens);
  runner.context.clear();
  const syncBefore = await bareDecode(runner.context, promptIds, maxTokens, true);
  runner.context.clear();

  const engine = newEngine(runner, c);
  const sampling = { maxTokens, ignoreEos: true };
  await drain(
    engine.generate(
      request("warm", "warm up", { sampling: { maxTokens: 8, ignoreEos: true } }),
      new AbortController().signal,
    ),
  );
  const run = await runWindowed(
    engine,
    texts.map((t, i) => request(`c${c}-${i}`, t, { sampling })),
  );
  await engine.shutdown(); // drops every slot's KV, keeps the runner
  // bare again on the same (now empty) context: the mean of before and after evens out load drift
  const bareAfter = await bareDecode(runner.context, promptIds, maxTokens);
  runner.context.clear();
  const syncAfter = await bareDecode(runner.context, promptIds, maxTokens, true);
  await runner.close();
  const syncStepS = (syncBefore.stepS + syncAfter.stepS) / 2;
  const bare = {
    stepS: (bareBefore.stepS + bareAfter.stepS) / 2,
    computeS: (bareBefore.computeS + bareAfter.computeS) / 2,
  };
  const { start, end } = run;
  const steps = end.steps - start.steps;
  const windowS = (end.t - start.t) / 1000;
  const stepS = windowS / steps;
  const inStepS = (end.stepWallS - start.stepWallS) / steps;
  const computeS = (end.computeS - start.computeS) / steps;
  const sampled = end.sampledTokens - start.sampledTokens;
  const bareHopS = bare.stepS - bare.computeS;
  return {
    c,
    bareTokS: c / bare.stepS,
    bareStepMs: bare.stepS * 1000,
    bareComputeMs: bare.computeS * 1000,
    bareHopMs: bareHopS * 1000,
    syncTokS: c / syncStepS,
    syncStepMs: syncStepS * 1000,
    engineTokS: sampled / windowS,
    engineStepMs: stepS * 1000,
    engineComputeMs: computeS * 1000,
    engineBeyondMs: (stepS - computeS) * 1000,
    overheadMs: (stepS - computeS - bareHopS) * 1000,
    inStepMs: (inStepS - computeS - bareHopS) * 1000,
    betweenMs: (stepS - inStepS) * 1000,
    endToEndTokS: run.completion / run.wallS,
  };
}

console.log(
  `preset ${preset}, threads ${threads}, flash attention on, f16 KV, greedy; ${new Date().toISOString()}`,
);
await benchPrefill();
console.log(
  `\ndecode, ${maxTokens} output tokens per sequence (~90-token chat prompts); per step = one token of every sequence`,
);
const rows = [];
for (const c of levels) rows.push(await benchDecode(c));
const header = [
  "seqs",
  "bare tok/s",
  "step ms",
  "native",
  "hop",
  "sync tok/s",
  "step ms",
  "engine tok/s",
  "step ms",
  "native",
  "step-native",
  "TS overhead",
  "in step()",
  "between",
  "e2e tok/s",
];
const table = rows.map((r) => [
  String(r.c),
  r.bareTokS.toFixed(0),
  r.bareStepMs.toFixed(2),
  r.bareComputeMs.toFixed(2),
  r.bareHopMs.toFixed(3),
  r.syncTokS.toFixed(0),
  r.syncStepMs.toFixed(2),
  r.engineTokS.toFixed(0),
  r.engineStepMs.toFixed(2),
  r.engineComputeMs.toFixed(2),
  r.engineBeyondMs.toFixed(3),
  r.overheadMs.toFixed(3),
  r.inStepMs.toFixed(3),
  r.betweenMs.toFixed(3),
  r.endToEndTokS.toFixed(0),
]);
console.log(formatTextTable(header, table, { labelColumn: false }));
console.log(
  "\nms per step. bare: awaited context.decode() of one row per sequence; native = llama_decode + sampling" +
    "\n  on the worker; hop = the rest (worker -> Promise -> JS). sync: the same steps by decodeSync() on the" +
    "\n  JS thread (what the engine does for decode steps expected to take <= 30 ms). engine: steady-state steps, every sequence" +
    "\n  decoding. TS overhead = (engine step - its native) - bare hop: what the engine adds per step over" +
    "\n  the bare native decode = in step() (scheduler, KV mapping, batch building, detokenizing, streaming)" +
    "\n  + between steps (the loop's yield to the event loop, consumers reading their streams)." +
    "\n  e2e tok/s: all completion tokens over the whole run, prefill of the chat prompts included.",
);
