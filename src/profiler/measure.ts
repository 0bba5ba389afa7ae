/**
 * Measurements of the real engine for `continuum profile`: prefill time vs context, decode step time vs
 * batch and context, the engine loop's own per-step cost, and KV state save/restore bandwidth (RAM and
 * file). Everything runs through LlamaModelRunner — the same context options, the same nBatch split and the
 * same sampling path as `continuum serve` — so the numbers price the steps the engine really takes.
 *
 * Times of model work are the native decode + sampling time the runner reports (what the engine's
 * loopStats call compute); the engine's wall time per step beyond that (scheduler, KV mapping, the
 * worker -> Promise hop, streaming) is measured once with a real Engine run and added per step by
 * build-profile.ts.
 */
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Engine } from "../engine/engine.js";
import type { GenerateRequest } from "../engine/engine-api.js";
import { StateBufferPool } from "../engine/kv/state-buffer-pool.js";
import type { LlamaModelRunner } from "../engine/runners/llama-model-runner.js";
import { RunnerBatch } from "../engine/runners/model-runner.js";

export interface PrefillSample {
  readonly tokens: number;
  /** llama_decode calls (chunks of at most nBatch rows) */
  readonly chunks: number;
  /** model compute per repeat, seconds (sorted) */
  readonly seconds: readonly number[];
}

export interface DecodeSample {
  readonly batch: number;
  readonly contextTokens: number;
  /** model compute of each measured step, seconds (sorted) */
  readonly seconds: readonly number[];
}

export interface PrefillChunkSample {
  /** new tokens in the chunk (one llama_decode) */
  readonly tokens: number;
  /** tokens of the same sequence already in the pool before it */
  readonly contextTokens: number;
  /** model compute per repeat, seconds (sorted) */
  readonly seconds: readonly number[];
}

export interface OffloadSample {
  readonly tokens: number;
  readonly bytes: number;
  /** seconds (sorted): save to a Buffer, restore from it, save to a file, load from it */
  readonly saveRamS: readonly number[];
  readonly restoreRamS: readonly number[];
  readonly saveFileS: readonly number[];
  readonly loadFileS: readonly number[];
}

export interface EngineOverheadSample {
  readonly steps: number;
  readonly wallS: number;
  readonly computeS: number;
  /** (wall - compute) / steps */
  readonly perStepS: number;
}

export interface ProfilePlan {
  /** prefill lengths from an empty context */
  readonly prefillTokens: readonly number[];
  /** repeats per prefill length (the median is kept); shorter lengths may repeat more (see repeatsFor) */
  readonly prefillRepeats: number;
  /** single prefill chunks (new tokens, at most nBatch) ... */
  readonly chunkTokens: readonly number[];
  /** ... after this much context of the same sequence */
  readonly chunkContexts: readonly number[];
  readonly decodeBatches: readonly number[];
  readonly decodeContexts: readonly number[];
  /** measured decode steps per (batch, context), after one warm-up step */
  readonly decodeSteps: number;
  /** tokens of the sequence whose state is saved and restored */
  readonly offloadTokens: number;
  readonly offloadRepeats: number;
  /** engine-loop overhead run: concurrent requests x output tokens each */
  readonly overheadRequests: number;
  readonly overheadTokens: number;
}

export type ProgressLog = (line: string) => void;

const silent: ProgressLog = () => {};

/** Deterministic non-special token ids (the values do not change compute, only keep logits finite). */
export function tokenAt(i: number, nVocab: number): number {
  const lo = Math.min(64, nVocab - 1);
  return lo + (((i * 2654435761) >>> 0) % Math.max(1, nVocab - lo));
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) return Number.NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * Prefills `tokens` tokens into `seqId` from position `startPos` the way the engine does: one execute()
 * per chunk of at most `chunkTokens` rows, a sample on the last row only. Returns the model compute
 * seconds and the chunk count.
 */
export async function prefillSequence(
  runner: LlamaModelRunner,
  seqId: number,
  tokens: number,
  chunkTokens: number,
  startPos = 0,
): Promise<{ computeS: number; chunks: number }> {
  const nVocab = runner.model.info.nVocab;
  const batch = new RunnerBatch(Math.min(chunkTokens, Math.max(1, tokens)));
  let computeS = 0;
  let chunks = 0;
  for (let start = 0; start < tokens; start += chunkTokens) {
    const end = Math.min(tokens, start + chunkTokens);
    batch.clear();
    for (let i = start; i < end; i++) {
      batch.add(tokenAt(startPos + i, nVocab), startPos + i, seqId, i === tokens - 1);
    }
    const r = await runner.execute(batch);
    computeS += r.computeS;
    chunks++;
  }
  return { computeS, chunks };
}

/** Prefill time vs context length, from an empty pool each time. */
export async function measurePrefill(
  runner: LlamaModelRunner,
  plan: Pick<ProfilePlan, "prefillTokens" | "prefillRepeats">,
  chunkTokens: number,
  log: ProgressLog = silent,
): Promise<PrefillSample[]> {
  const out: PrefillSample[] = [];
  // warm-up: first decodes pay one-off allocations
  runner.context.clear();
  await prefillSequence(runner, 0, Math.min(chunkTokens, 64), chunkTokens);
  for (const tokens of plan.prefillTokens) {
    const seconds: number[] = [];
    let chunks = 0;
    const repeats = repeatsFor(tokens, plan.prefillRepeats);
    for (let r = 0; r < repeats; r++) {
      runner.context.clear();
      const m = await prefillSequence(runner, 0, tokens, chunkTokens);
      seconds.push(m.computeS);
      chunks = m.chunks;
    }
    runner.context.clear();
    seconds.sort((a, b) => a - b);
    log(`prefill ${tokens} tokens: ${(median(seconds) * 1000).toFixed(1)} ms (${chunks} chunks)`);
    out.push({ tokens, chunks, seconds });
  }
  return out;
}

/**
 * One prefill chunk of n new tokens after c tokens of the same sequence, for every (n, c) of the plan. A
 * returning agent turn is exactly this: a few hundred new tokens after thousands of cached ones. On CPU
 * the cost of such a chunk is not the difference of two whole prefills: a short chunk streams the whole
 * context's K/V for few query rows, so per row it costs several times what a long chunk does.
 */
export async function measurePrefillChunks(
  runner: LlamaModelRunner,
  plan: Pick<ProfilePlan, "chunkTokens" | "chunkContexts" | "prefillRepeats">,
  chunkTokens: number,
  log: ProgressLog = silent,
): Promise<PrefillChunkSample[]> {
  const out: PrefillChunkSample[] = [];
  const sizes = plan.chunkTokens.filter((n) => n <= chunkTokens);
  for (const contextTokens of plan.chunkContexts) {
    runner.context.clear();
    if (contextTokens > 0) await prefillSequence(runner, 0, contextTokens, chunkTokens);
    for (const tokens of sizes) {
      if (contextTokens + tokens > runner.maxContextTokens) continue;
      const seconds: number[] = [];
      for (let r = 0; r < plan.prefillRepeats; r++) {
        const m = await prefillSequence(runner, 0, tokens, chunkTokens, contextTokens);
        seconds.push(m.computeS);
        runner.removeSeq(0, contextTokens, -1);
      }
      seconds.sort((a, b) => a - b);
      log(`prefill chunk ${tokens} after ${contextTokens}: ${(median(seconds) * 1000).toFixed(1)} ms`);
      out.push({ tokens, contextTokens, seconds });
    }
  }
  runner.context.clear();
  return out;
}

/** Long prefills take seconds each: repeat them less. */
export function repeatsFor(tokens: number, repeats: number): number {
  if (tokens >= 8192) return Math.max(1, Math.min(repeats, 1));
  if (tokens >= 4096) return Math.max(1, Math.min(repeats, 2));
  return repeats;
}

/**
 * Decode step time for `batch` sequences of `contextTokens` each. Every sequence holds its own cells (the
 * context is prefilled once, saved, and restored into each slot), as distinct conversations do in serving:
 * the pool's n_kv is batch x context.
 */
export async function measureDecode(
  runner: LlamaModelRunner,
  plan: Pick<ProfilePlan, "decodeBatches" | "decodeContexts" | "decodeSteps">,
  chunkTokens: number,
  log: ProgressLog = silent,
): Promise<DecodeSample[]> {
  const out: DecodeSample[] = [];
  const nVocab = runner.model.info.nVocab;
  const cells = runner.kvCells;
  const batch = new RunnerBatch(Math.max(...plan.decodeBatches, 1));
  for (const contextTokens of plan.decodeContexts) {
    const batches = plan.decodeBatches.filter(
      (b) =>
        b <= runner.maxSeqs &&
        b * (contextTokens + plan.decodeSteps + 1) <= cells &&
        contextTokens + plan.decodeSteps + 1 <= runner.maxContextTokens,
    );
    if (batches.length === 0) continue;
    runner.context.clear();
    let state: Buffer | null = null;
    if (contextTokens > 0) {
      await prefillSequence(runner, 0, contextTokens, chunkTokens);
      state = await runner.saveSeq(0);
    }
    for (const b of batches) {
      runner.context.clear();
      if (state) for (let s = 0; s < b; s++) await runner.restoreSeq(s, state);
      const seconds: number[] = [];
      for (let step = 0; step <= plan.decodeSteps; step++) {
        batch.clear();
        const pos = contextTokens + step;
        for (let s = 0; s < b; s++) batch.add(tokenAt(pos * 31 + s, nVocab), pos, s, true);
        const r = await runner.execute(batch);
        if (step > 0) seconds.push(r.computeS); // step 0 warms up
      }
      seconds.sort((x, y) => x - y);
      log(`decode batch ${b} at context ${contextTokens}: ${(median(seconds) * 1000).toFixed(2)} ms/step`);
      out.push({ batch: b, contextTokens, seconds });
    }
  }
  runner.context.clear();
  return out;
}

/** Save/restore of one sequence's KV: to a Buffer (CPU tier) and to a file (disk tier). */
export async function measureOffload(
  runner: LlamaModelRunner,
  plan: Pick<ProfilePlan, "offloadTokens" | "offloadRepeats">,
  chunkTokens: number,
  diskDir: string | undefined,
  log: ProgressLog = silent,
): Promise<OffloadSample> {
  const tokens = Math.max(
    1,
    Math.min(plan.offloadTokens, runner.kvCells / 2 - 1, runner.maxContextTokens - 1),
  );
  runner.context.clear();
  await prefillSequence(runner, 0, tokens, chunkTokens);
  const saveRamS: number[] = [];
  const restoreRamS: number[] = [];
  const saveFileS: number[] = [];
  const loadFileS: number[] = [];
  const dir = await mkdtemp(join(diskDir ?? tmpdir(), "continuum-profile-"));
  const file = join(dir, "seq.state");
  let bytes = 0;
  // saves write into a reused buffer, as the engine's RAM tier does (the warm-up allocates it)
  const buffers = new StateBufferPool(1, (n) => runner.allocateStateBuffer(n));
  const take = (n: number) => buffers.take(n);
  try {
    for (let r = 0; r <= plan.offloadRepeats; r++) {
      let t0 = performance.now();
      const state = await runner.saveSeq(0, take);
      const save = (performance.now() - t0) / 1000;
      bytes = state.length;
      runner.removeSeq(1);
      t0 = performance.now();
      await runner.restoreSeq(1, state);
      const restore = (performance.now() - t0) / 1000;
      buffers.give(state);
      runner.removeSeq(1);
      t0 = performance.now();
      await runner.context.saveSeqStateFile(0, file);
      const saveFile = (performance.now() - t0) / 1000;
      t0 = performance.now();
      await runner.context.loadSeqStateFile(1, file);
      const loadFile = (performance.now() - t0) / 1000;
      runner.removeSeq(1);
      await rm(file, { force: true });
      if (r === 0) continue; // warm-up (first-touch page faults)
      saveRamS.push(save);
      restoreRamS.push(restore);
      saveFileS.push(saveFile);
      loadFileS.push(loadFile);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
    runner.context.clear();
  }
  for (const xs of [saveRamS, restoreRamS, saveFileS, loadFileS]) xs.sort((a, b) => a - b);
  const mbps = (s: readonly number[]) => ((bytes / median(s)) * 1e-6).toFixed(0);
  log(
    `offload ${tokens} tokens (${(bytes / 1024 / 1024).toFixed(1)} MiB): RAM save ${mbps(saveRamS)} MB/s, ` +
      `restore ${mbps(restoreRamS)} MB/s; file save ${mbps(saveFileS)} MB/s, load ${mbps(loadFileS)} MB/s`,
  );
  return { tokens, bytes, saveRamS, restoreRamS, saveFileS, loadFileS };
}

/** True when the file system under `dir` exists (the disk tier's directory). */
export async function isDirectory(dir: string): Promise<boolean> {
  try {
    return (await stat(dir)).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The engine loop's own cost per step: a real Engine over the same runner serves a few concurrent
 * greedy requests, and everything beyond the model's compute (scheduling, KV mapping, admission,
 * detokenization, the worker -> Promise hop, the loop's awaits) is divided by its steps.
 */
export async function measureEngineOverhead(
  runner: LlamaModelRunner,
  plan: Pick<ProfilePlan, "overheadRequests" | "overheadTokens">,
  chunkTokens: number,
  log: ProgressLog = silent,
): Promise<EngineOverheadSample> {
  runner.context.clear();
  const maxNumSeqs = Math.max(1, Math.min(plan.overheadRequests, runner.maxSeqs - 1));
  const engine = new Engine({
    runner,
    policy: "vllm",
    maxNumSeqs,
    maxNumBatchedTokens: chunkTokens,
    closeRunner: false,
  });
  try {
    const prompt = (i: number) =>
      engine.renderChat([
        { role: "user", content: `profile request ${i}: ${"list the files and run the tests ".repeat(4)}` },
      ]);
    const request = (id: string, maxTokens: number): GenerateRequest => ({
      requestId: id,
      programId: null,
      isLastStep: true,
      toolHint: null,
      prompt: prompt(id.length),
      sampling: {
        temperature: 0,
        topP: 1,
        topK: 0,
        minP: 0,
        seed: null,
        maxTokens,
        stop: [],
        grammar: null,
        ignoreEos: true,
      },
    });
    const drain = async (req: GenerateRequest) => {
      for await (const _ of engine.generate(req, new AbortController().signal)) {
        // the events themselves are not needed
      }
    };
    await drain(request("warmup", 8));
    const before = { ...engine.loopStats };
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: plan.overheadRequests }, (_, i) => drain(request(`r${i}`, plan.overheadTokens))),
    );
    const wallS = (performance.now() - t0) / 1000;
    const steps = engine.loopStats.steps - before.steps;
    const computeS = engine.loopStats.computeS - before.computeS;
    const perStepS = steps > 0 ? Math.max(0, (wallS - computeS) / steps) : 0;
    log(
      `engine loop: ${steps} steps, ${(wallS * 1000).toFixed(0)} ms wall, ${(computeS * 1000).toFixed(0)} ms model ` +
        `compute -> ${(perStepS * 1000).toFixed(3)} ms per step outside the model`,
    );
    return { steps, wallS, computeS, perStepS };
  } finally {
    await engine.shutdown();
    runner.context.clear();
  }
}
