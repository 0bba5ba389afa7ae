/**
 * Where the simulator's step prices and the real engine's steps part: every step the engine logged
 * (`serve --step-log`) is priced by a latency model (a `continuum profile`) twice — the plan's chunks, as
 * the simulator sees them, and the rows the engine really ran — and set beside
 * the model's compute time and the step's wall time. Grouped by step kind, the ratios say which part of
 * the sim-vs-real error comes from what:
 *   wall / compute          the loop outside the model (KV mapping, tier copies, bookkeeping)
 *   sampling / compute      the host's sampling after each decode, within compute (no simulator prices it
 *                           apart: the profile's fixed per-step overhead holds it)
 *   compute / priced ran    the latency model's error on the work the kernels really did
 *   priced ran / planned    work the simulator does not see (1 since the scheduler places the KV; logs
 *                           written before, where the engine recomputed prefixes it had dropped, show it)
 *   wall / priced planned   all of it: what the simulator misses per step
 */
import { readFileSync } from "node:fs";
import type { EngineStepRecord } from "../engine/step-log.js";
import { type LatencyModel, stepAccumulatorFor } from "../sim/hardware/step-latency.js";

export type StepKind = "decode" | "prefill" | "mixed" | "restore";

export interface StepKindTotals {
  /** a kind of step, or "all" for the sum over kinds */
  readonly kind: StepKind | "all";
  steps: number;
  wallS: number;
  computeS: number;
  /** of computeS, the host's sampling (0 for logs written before it was recorded) */
  sampleS: number;
  pricedPlannedS: number;
  pricedRanS: number;
}

/** decode: only one-token chunks; prefill: no one-token chunk; mixed: both; restore: a tier restore ran */
export function stepKind(record: EngineStepRecord): StepKind {
  if (record.restoredTokens > 0) return "restore";
  const decodes = record.planned.filter(([tokens]) => tokens === 1).length;
  if (decodes === record.planned.length) return "decode";
  return decodes === 0 ? "prefill" : "mixed";
}

export function readStepLog(path: string): EngineStepRecord[] {
  return readFileSync(path, "utf8")
    .split("\n")
    .filter((line) => line.trim().length > 0)
    .map((line, i) => {
      try {
        return JSON.parse(line) as EngineStepRecord;
      } catch {
        throw new Error(`${path}:${i + 1}: not a step record`);
      }
    });
}

export function analyzeSteps(records: readonly EngineStepRecord[], model: LatencyModel): StepKindTotals[] {
  const accumulator = stepAccumulatorFor(model);
  const price = (chunks: readonly (readonly [number, number])[]) => {
    accumulator.beginStep();
    for (const [tokens, context] of chunks) accumulator.addChunk(tokens, context);
    return accumulator.endStepS();
  };
  const byKind = new Map<StepKind, StepKindTotals>();
  for (const record of records) {
    if (record.planned.length === 0) continue;
    const kind = stepKind(record);
    let totals = byKind.get(kind);
    if (!totals) {
      totals = { kind, steps: 0, wallS: 0, computeS: 0, sampleS: 0, pricedPlannedS: 0, pricedRanS: 0 };
      byKind.set(kind, totals);
    }
    totals.steps++;
    totals.wallS += record.wallS;
    totals.computeS += record.computeS;
    totals.sampleS += record.sampleS ?? 0;
    totals.pricedPlannedS += price(record.planned);
    totals.pricedRanS += record.ran.length > 0 ? price(record.ran) : 0;
  }
  const order: StepKind[] = ["decode", "prefill", "mixed", "restore"];
  const kinds = order.flatMap((k) => (byKind.get(k) ? [byKind.get(k) as StepKindTotals] : []));
  const all: StepKindTotals = {
    kind: "all",
    steps: 0,
    wallS: 0,
    computeS: 0,
    sampleS: 0,
    pricedPlannedS: 0,
    pricedRanS: 0,
  };
  for (const k of kinds) {
    all.steps += k.steps;
    all.wallS += k.wallS;
    all.computeS += k.computeS;
    all.sampleS += k.sampleS;
    all.pricedPlannedS += k.pricedPlannedS;
    all.pricedRanS += k.pricedRanS;
  }
  return kinds.length > 1 ? [...kinds, all] : kinds;
}
