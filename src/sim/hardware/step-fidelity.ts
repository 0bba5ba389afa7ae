import type { RooflineLatencyModel, StepBreakdown } from "./roofline-model.js";
import type { StepChunk } from "./step-latency.js";

/**
 * Part of one engine step, as step references write it (`{"kind":"prefill","N","P"}`,
 * `{"kind":"decode","B","L"}`): N new tokens of one sequence after P cached ones, or B sequences each
 * decoding one token after L tokens of KV.
 */
export type StepPart =
  | { readonly kind: "prefill"; readonly N: number; readonly P: number }
  | { readonly kind: "decode"; readonly B: number; readonly L: number };

export function describeStepPart(part: StepPart): string {
  return part.kind === "prefill" ? `prefill ${part.N} after ${part.P}` : `decode ${part.B} x ${part.L}`;
}

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

export interface MeasuredStep {
  readonly shape: StepPart;
  /** kernel time of the whole step, ms */
  readonly ms: number;
}

/**
 * The prefill and decode lines of a JSONL file of measured steps (`{"kind":"prefill","N","P","ms"}`,
 * `{"kind":"decode","B","L","ms"}`); lines of other kinds (info, done) are skipped.
 */
export function parseMeasuredSteps(jsonl: string): MeasuredStep[] {
  const steps: MeasuredStep[] = [];
  for (const [i, line] of jsonl.split("\n").entries()) {
    if (line.trim() === "") continue;
    let row: Record<string, unknown>;
    try {
      row = JSON.parse(line) as Record<string, unknown>;
    } catch {
      throw new Error(`line ${i + 1}: not JSON`);
    }
    const kind = row["kind"];
    if (kind !== "prefill" && kind !== "decode") continue;
    const count = (key: string, min: number): number => {
      const v = row[key];
      if (typeof v !== "number" || !Number.isInteger(v) || v < min) {
        throw new Error(`line ${i + 1}: a ${kind} step needs an integer ${key} >= ${min}`);
      }
      return v;
    };
    const ms = row["ms"];
    if (typeof ms !== "number" || !(ms > 0)) throw new Error(`line ${i + 1}: a ${kind} step needs ms > 0`);
    const shape: StepPart =
      kind === "prefill"
        ? { kind, N: count("N", 1), P: count("P", 0) }
        : { kind, B: count("B", 1), L: count("L", 0) };
    steps.push({ shape, ms });
  }
  return steps;
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
export function fidelityOf(model: RooflineLatencyModel, steps: readonly MeasuredStep[]): Fidelity {
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
