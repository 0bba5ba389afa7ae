/**
 * Whole engine steps measured at given shapes (a JSONL file per GPU, e.g. PyTorch's kernels on an H100): what
 * the simulator's step model and the engine's own step timings are both held against.
 */

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

export interface ReferenceStep {
  readonly shape: StepPart;
  /** the measured time of the whole step, ms */
  readonly ms: number;
}

/**
 * The prefill and decode lines of a JSONL file of measured steps (`{"kind":"prefill","N","P","ms"}`,
 * `{"kind":"decode","B","L","ms"}`); lines of other kinds (info, done) are skipped.
 */
export function parseReferenceSteps(jsonl: string): ReferenceStep[] {
  const steps: ReferenceStep[] = [];
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
