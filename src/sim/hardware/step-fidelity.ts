import type { ReferenceStep, StepPart } from "../../core/profile/step-reference.js";
import { describeStepPart } from "../../core/profile/step-reference.js";
import type { RooflineLatencyModel, StepBreakdown } from "./roofline-model.js";
import type { StepChunk } from "./step-latency.js";

/** The chunks of a step made of these parts, in the order given. */
export function chunksOf(parts: readonly StepPart[]): StepChunk[] {
  return parts.flatMap((part) =>
    part.kind === "prefill"
      ? [{ numTokens: part.N, contextTokens: part.P }]
      : Array.from({ length: part.B }, () => ({ numTokens: 1, contextTokens: part.L })),
  );
}

export interface StepTime {
  /** the kernels: the step without its fixed per-step overhead */
  readonly kernelS: number;
  /** scheduling, sampling and launch outside the kernels, once per step */
  readonly overheadS: number;
  readonly breakdown: StepBreakdown;
}

export function stepTimeOf(model: RooflineLatencyModel, chunks: readonly StepChunk[]): StepTime {
  const breakdown = model.breakdown(chunks);
  const { overheadS, ...kernels } = breakdown;
  const kernelS = Object.values(kernels).reduce((sum, s) => sum + s, 0);
  return { kernelS, overheadS, breakdown };
}

export interface FidelityRow {
  readonly shape: string;
  readonly measuredMs: number;
  readonly modelMs: number;
  /** model / measured - 1 */
  readonly error: number;
}

export interface Fidelity {
  readonly rows: readonly FidelityRow[];
  readonly medianAbsError: number;
  /** the row with the largest |error| */
  readonly worst: FidelityRow;
}

/**
 * The model's kernel time beside each measured step's. References timed with CUDA events around the
 * model's kernels hold no scheduling or sampling, so the per-step overhead is left out of the model too.
 */
export function fidelityOf(model: RooflineLatencyModel, steps: readonly ReferenceStep[]): Fidelity {
  if (steps.length === 0) throw new Error("no prefill or decode steps to compare");
  const rows = steps.map((step): FidelityRow => {
    const modelMs = stepTimeOf(model, chunksOf([step.shape])).kernelS * 1e3;
    return {
      shape: describeStepPart(step.shape),
      measuredMs: step.ms,
      modelMs,
      error: modelMs / step.ms - 1,
    };
  });
  const byError = [...rows].sort((a, b) => Math.abs(a.error) - Math.abs(b.error));
  const mid = byError.length / 2;
  const at = (i: number) => Math.abs((byError[i] as FidelityRow).error);
  const medianAbsError = byError.length % 2 === 1 ? at(Math.floor(mid)) : (at(mid - 1) + at(mid)) / 2;
  return { rows, medianAbsError, worst: byError[byError.length - 1] as FidelityRow };
}
