/**
 * Model time of single engine steps at given shapes, for holding llama.cpp's kernels against a reference
 * measured elsewhere at the same shapes (a JSONL of `{"kind":"prefill","N","P","ms"}` and
 * `{"kind":"decode","B","L","ms"}` lines, e.g. whole steps of PyTorch on the same GPU).
 *
 * Prefill (N, P): one llama_decode of N new tokens after P cached ones of the same sequence, the last row
 * sampled. Decode (B, L): one token for each of B sequences holding L tokens each, every sequence in its own
 * KV stream (attention reads only its own cells, as paged attention does), filled by restoring one saved
 * context into every stream (or by prefilling each stream when a saved context would not fit one Buffer).
 * Two times per step: llama_decode's wall time on the worker (it waits for the outputs), and the model's
 * compute alone (DecodeResult.computeMs: from the first layer to the logits, without building the graph and
 * the attention mask, uploading inputs or copying logits out), which is what a reference timed with CUDA
 * events around the model's kernels measures.
 */

import { describeStepPart, type ReferenceStep, type StepPart } from "../core/profile/step-reference.js";
import {
  allocPinnedBuffer,
  DecodeBatch,
  type DecodePhases,
  type DecodeResult,
  type LlamaContext,
  type LlamaModel,
} from "../engine/native/llama-native.js";
import { median, tokenAt } from "./measure.js";

type PrefillShape = Extract<StepPart, { kind: "prefill" }>;
type DecodeShape = Extract<StepPart, { kind: "decode" }>;

export interface MeasuredStep {
  readonly shape: StepPart;
  /** llama_decode's wall time, median over the timed repeats */
  readonly ms: number;
  readonly samplesMs: readonly number[];
  /** the model's compute alone, median over the same repeats; null when the backend could not time it */
  readonly computeMs: number | null;
  readonly computeSamplesMs: readonly number[];
  /** llama_decode's wall time by phase (DecodeResult.phasesMs), each phase's median; null where not timed */
  readonly phasesMs: DecodePhases | null;
}

export interface StepComparison {
  readonly shape: StepPart;
  /** what is held against the reference: the model's compute time where measured, else the wall time */
  readonly basis: "compute" | "wall";
  /** the time on that basis */
  readonly ms: number;
  readonly referenceMs: number;
  /** ms / referenceMs */
  readonly ratio: number;
  readonly within: boolean;
  /** llama_decode's whole wall time and its ratio to the reference (host work included) */
  readonly wallMs: number;
  readonly wallRatio: number;
}

/**
 * Each measured step beside the reference at the same shape; `tolerance` 0.25: within 25% either way. The
 * model's compute time is compared where it was measured (a reference of kernel time has no host work).
 */
export function compareSteps(
  measured: readonly MeasuredStep[],
  reference: readonly ReferenceStep[],
  tolerance: number,
): StepComparison[] {
  const key = (s: StepPart) => describeStepPart(s);
  const byShape = new Map(reference.map((r) => [key(r.shape), r.ms]));
  const out: StepComparison[] = [];
  for (const m of measured) {
    const referenceMs = byShape.get(key(m.shape));
    if (referenceMs === undefined) continue;
    const ms = m.computeMs ?? m.ms;
    const ratio = ms / referenceMs;
    out.push({
      shape: m.shape,
      basis: m.computeMs === null ? "wall" : "compute",
      ms,
      referenceMs,
      ratio,
      within: Math.abs(ratio - 1) <= tolerance,
      wallMs: m.ms,
      wallRatio: m.ms / referenceMs,
    });
  }
  return out;
}

export interface StepShapeOptions {
  /** KV cells at most (memory bound); shapes needing more are skipped and named in `skipped` */
  readonly maxKvCells: number;
  /** rows per ubatch (llama.cpp splits a longer call) */
  readonly ubatchTokens: number;
  /** timed repeats per shape after one warm-up */
  readonly repeats: number;
  readonly log?: (line: string) => void;
}

export interface StepShapeResult {
  readonly steps: MeasuredStep[];
  readonly skipped: { shape: StepPart; why: string }[];
}

/** Node's Buffers stop short of 4 GiB; a saved state is one Buffer. */
const MAX_STATE_BYTES = 2 ** 31;

/** The longest sequence the model was trained for (unbounded when the file does not say). */
const contextLimit = (model: LlamaModel) => model.info.nCtxTrain || Number.POSITIVE_INFINITY;

function measuredStep(shape: StepPart, samples: readonly DecodeResult[]): MeasuredStep {
  const wallMs = samples.map((d) => d.decodeMs);
  const phases = samples.map((d) => d.phasesMs).filter((p): p is DecodePhases => p !== null);
  const timed = phases.length === samples.length && phases.length > 0;
  const phase = (k: keyof DecodePhases) => median(phases.map((p) => p[k]));
  return {
    shape,
    ms: median(wallMs),
    samplesMs: wallMs,
    computeMs: timed ? phase("compute") : null,
    computeSamplesMs: phases.map((p) => p.compute),
    phasesMs: timed
      ? {
          prepare: phase("prepare"),
          inputs: phase("inputs"),
          compute: phase("compute"),
          finish: phase("finish"),
        }
      : null,
  };
}

function logStep(opts: StepShapeOptions, step: MeasuredStep): void {
  const p = step.phasesMs;
  const phases =
    p === null
      ? ""
      : ` (prepare ${p.prepare.toFixed(2)}, inputs ${p.inputs.toFixed(2)}, compute ${p.compute.toFixed(2)}, finish ${p.finish.toFixed(2)} ms)`;
  opts.log?.(`${describeStepPart(step.shape)}: ${step.ms.toFixed(2)} ms${phases}`);
}

/** Rounds up to llama.cpp's 256-cell granularity. */
const cellsFor = (tokens: number) => Math.ceil(tokens / 256) * 256;

async function fill(
  ctx: LlamaContext,
  seqId: number,
  from: number,
  to: number,
  nVocab: number,
): Promise<void> {
  const rows = ctx.info.nBatch;
  const batch = new DecodeBatch(rows);
  for (let start = from; start < to; start += rows) {
    batch.clear();
    const end = Math.min(to, start + rows);
    for (let p = start; p < end; p++) batch.add(tokenAt(p, nVocab), p, seqId, p === end - 1);
    await ctx.decode(batch, { sample: false });
  }
}

async function measurePrefills(
  model: LlamaModel,
  shapes: readonly PrefillShape[],
  opts: StepShapeOptions,
  result: StepShapeResult,
): Promise<void> {
  const fits = shapes.filter((s) => {
    const ok = s.N + s.P + 1 <= Math.min(opts.maxKvCells, contextLimit(model));
    if (!ok)
      result.skipped.push({
        shape: s,
        why: "more KV than this run allows, or longer than the model's context",
      });
    return ok;
  });
  if (fits.length === 0) return;
  const maxN = Math.max(...fits.map((s) => s.N));
  const ctx = await model.createContext({
    nCtx: cellsFor(Math.max(...fits.map((s) => s.N + s.P)) + 1),
    nSeqMax: 1,
    nBatch: maxN,
    nUBatch: Math.min(maxN, opts.ubatchTokens),
    computeTiming: true,
  });
  const nVocab = model.info.nVocab;
  try {
    const byContext = [...new Set(fits.map((s) => s.P))].sort((a, b) => a - b);
    const batch = new DecodeBatch(maxN);
    for (const P of byContext) {
      ctx.clear();
      if (P > 0) await fill(ctx, 0, 0, P, nVocab);
      for (const shape of fits.filter((s) => s.P === P)) {
        const samples: DecodeResult[] = [];
        for (let r = 0; r <= opts.repeats; r++) {
          batch.clear();
          for (let p = P; p < P + shape.N; p++) batch.add(tokenAt(p, nVocab), p, 0, p === P + shape.N - 1);
          const d = await ctx.decode(batch, { sample: false });
          ctx.seqRemove(0, P, -1);
          if (r > 0) samples.push(d);
        }
        const step = measuredStep(shape, samples);
        result.steps.push(step);
        logStep(opts, step);
      }
    }
  } finally {
    ctx.free();
  }
}

async function measureDecodes(
  model: LlamaModel,
  shapes: readonly DecodeShape[],
  opts: StepShapeOptions,
  result: StepShapeResult,
): Promise<void> {
  const nVocab = model.info.nVocab;
  const steps = opts.repeats + 1;
  for (const shape of shapes) {
    const streamCells = cellsFor(shape.L + steps + 1);
    if (shape.B > 256 || streamCells * shape.B > opts.maxKvCells || shape.L + steps > contextLimit(model)) {
      result.skipped.push({ shape, why: "more KV than this run allows, or longer than the model's context" });
      continue;
    }
    const ctx = await model.createContext({
      nCtx: streamCells * shape.B,
      nSeqMax: shape.B,
      kvUnified: false,
      nBatch: Math.max(shape.B, Math.min(shape.L, 2048)),
      nUBatch: Math.min(Math.max(shape.B, Math.min(shape.L, 2048)), opts.ubatchTokens),
      computeTiming: true,
    });
    try {
      await fill(ctx, 0, 0, shape.L, nVocab);
      if (shape.L * (model.info.kvBytesPerTokenF16 ?? 0) <= MAX_STATE_BYTES) {
        const state = await ctx.saveSeqStateInto(0, (n) => allocPinnedBuffer(n) ?? Buffer.allocUnsafeSlow(n));
        for (let s = 1; s < shape.B; s++) await ctx.restoreSeqState(s, state);
      } else {
        for (let s = 1; s < shape.B; s++) await fill(ctx, s, 0, shape.L, nVocab);
      }
      const batch = new DecodeBatch(shape.B);
      const samples: DecodeResult[] = [];
      for (let step = 0; step < steps; step++) {
        batch.clear();
        const pos = shape.L + step;
        for (let s = 0; s < shape.B; s++) batch.add(tokenAt(pos * 31 + s, nVocab), pos, s, true);
        const d = await ctx.decode(batch, { sample: false });
        if (step > 0) samples.push(d);
      }
      const measured = measuredStep(shape, samples);
      result.steps.push(measured);
      logStep(opts, measured);
    } finally {
      ctx.free();
    }
  }
}

/** Measures every shape that fits `maxKvCells` on a loaded model (its own contexts, freed after). */
export async function measureStepShapes(
  model: LlamaModel,
  shapes: readonly StepPart[],
  opts: StepShapeOptions,
): Promise<StepShapeResult> {
  const result: StepShapeResult = { steps: [], skipped: [] };
  const prefills = shapes.filter((s): s is PrefillShape => s.kind === "prefill");
  const decodes = shapes.filter((s): s is DecodeShape => s.kind === "decode");
  await measurePrefills(model, prefills, opts, result);
  await measureDecodes(model, decodes, opts, result);
  return result;
}
