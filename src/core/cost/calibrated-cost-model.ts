import type { TierName } from "../kv/offload-tiers.js";
import type { CostModel } from "./cost-model.js";

/** Rows one step computed for one sequence, after how many positions it already held. */
export type StepChunk = readonly [rows: number, contextTokens: number];

/**
 * A step's price as `perStepS + perRowS x rows + perCellS x attended cells`, where a row at position p
 * attends to p + 1 cells: the model's fixed cost per call (on a CPU the weights are read once per step),
 * the linear layers per row, and attention growing with the context.
 */
export interface StepPrice {
  readonly perStepS: number;
  readonly perRowS: number;
  readonly perCellS: number;
}

/** Steps kept per kind (with and without a prefill chunk) for the fit; older ones are forgotten first. */
const WINDOW_STEPS = 256;
/** A step with a chunk of at least this many rows prices rows, not just the per-step cost. */
const PREFILL_CHUNK_ROWS = 32;
/** Prefill steps seen before the fit replaces the prior. */
const MIN_PREFILL_STEPS = 8;
/** Restores kept per tier for its reload price; restores seen before it replaces the prior. */
const RELOAD_WINDOW = 64;
const MIN_RELOADS = 4;

interface Sample {
  readonly x: readonly [number, number, number];
  readonly y: number;
}

/**
 * PrefillReload without an offline profile: prefill priced from the engine's own steps, as they run, and a
 * tier's reload from the engine's own restores out of it (seconds per token over the recent ones). Until
 * enough of either were seen, the prior prices it. The prefill fit is least squares over the recent steps,
 * restricted to non-negative prices.
 */
export class CalibratedCostModel implements CostModel {
  private readonly prefillSteps: Sample[] = [];
  private readonly otherSteps: Sample[] = [];
  private price: StepPrice | null = null;
  private stale = false;
  private readonly reloads = new Map<TierName, { tokens: number; seconds: number }[]>();

  constructor(
    private readonly prior: CostModel,
    /** rows per step (max-num-batched-tokens): a long prefill runs in chunks, each paying the step cost */
    private readonly chunkTokens: number,
  ) {
    if (!(chunkTokens >= 1)) throw new Error(`chunkTokens must be at least 1, got ${chunkTokens}`);
  }

  observe(chunks: readonly StepChunk[], computeS: number): void {
    if (!(computeS > 0) || chunks.length === 0) return;
    let rows = 0;
    let cells = 0;
    let prefill = false;
    for (const [n, context] of chunks) {
      rows += n;
      cells += n * context + (n * (n + 1)) / 2;
      if (n >= PREFILL_CHUNK_ROWS) prefill = true;
    }
    const window = prefill ? this.prefillSteps : this.otherSteps;
    window.push({ x: [1, rows, cells], y: computeS });
    if (window.length > WINDOW_STEPS) window.shift();
    this.stale = true;
  }

  /** A tier entry of `tokens` tokens brought back into the pool in `seconds` (loading and restoring). */
  observeReload(tier: TierName, tokens: number, seconds: number): void {
    if (!(tokens > 0) || !(seconds > 0)) return;
    const window = this.reloads.get(tier) ?? [];
    this.reloads.set(tier, window);
    window.push({ tokens, seconds });
    if (window.length > RELOAD_WINDOW) window.shift();
  }

  /** Seconds per reloaded token from a tier, or null while the prior still prices its reloads. */
  reloadSecondsPerToken(tier: TierName): number | null {
    const window = this.reloads.get(tier);
    if (!window || window.length < MIN_RELOADS) return null;
    let tokens = 0;
    let seconds = 0;
    for (const r of window) {
      tokens += r.tokens;
      seconds += r.seconds;
    }
    return seconds / tokens;
  }

  /** The fitted step price, or null while the prior still prices prefill. */
  get fitted(): StepPrice | null {
    if (this.stale) {
      this.stale = false;
      this.price =
        this.prefillSteps.length >= MIN_PREFILL_STEPS
          ? fitStepPrice([...this.prefillSteps, ...this.otherSteps])
          : null;
    }
    return this.price;
  }

  prefillS(tokens: number): number {
    if (tokens <= 0) return 0;
    const price = this.fitted;
    if (!price) return this.prior.prefillS(tokens);
    return (
      price.perStepS * Math.ceil(tokens / this.chunkTokens) +
      price.perRowS * tokens +
      (price.perCellS * tokens * (tokens + 1)) / 2
    );
  }

  reloadS(tokens: number, tier: TierName): number {
    const perToken = this.reloadSecondsPerToken(tier);
    return perToken === null ? this.prior.reloadS(tokens, tier) : tokens * perToken;
  }
}

/** Least squares over every subset of the three prices, keeping the best fit whose prices are all >= 0. */
export function fitStepPrice(samples: readonly Sample[]): StepPrice | null {
  let best: { price: StepPrice; sse: number } | null = null;
  for (let mask = 1; mask < 8; mask++) {
    const columns = [0, 1, 2].filter((j) => mask & (1 << j));
    const coefficients = leastSquares(samples, columns);
    if (!coefficients || coefficients.some((c) => c < 0)) continue;
    const full = [0, 0, 0];
    columns.forEach((j, r) => {
      full[j] = coefficients[r]!;
    });
    const [perStepS, perRowS, perCellS] = full as [number, number, number];
    let sse = 0;
    for (const { x, y } of samples) {
      const residual = y - perStepS - perRowS * x[1] - perCellS * x[2];
      sse += residual * residual;
    }
    if (!best || sse < best.sse) best = { price: { perStepS, perRowS, perCellS }, sse };
  }
  return best?.price ?? null;
}

/** Normal equations on the chosen columns, each scaled to its largest value; null when singular. */
function leastSquares(samples: readonly Sample[], columns: readonly number[]): number[] | null {
  const k = columns.length;
  const width = k + 1;
  const scale = columns.map((j) => Math.max(...samples.map((s) => Math.abs(s.x[j]!))) || 1);
  // row-major k x (k + 1): X'X beside X'y
  const m = new Float64Array(k * width);
  for (const { x, y } of samples) {
    const xs = columns.map((j, r) => x[j]! / scale[r]!);
    for (let r = 0; r < k; r++) {
      for (let c = 0; c < k; c++) m[r * width + c]! += xs[r]! * xs[c]!;
      m[r * width + k]! += xs[r]! * y;
    }
  }
  // Gauss-Jordan with partial pivoting
  for (let p = 0; p < k; p++) {
    let pivot = p;
    for (let r = p + 1; r < k; r++)
      if (Math.abs(m[r * width + p]!) > Math.abs(m[pivot * width + p]!)) pivot = r;
    if (Math.abs(m[pivot * width + p]!) < 1e-12) return null;
    for (let c = 0; c < width; c++) {
      const t = m[p * width + c]!;
      m[p * width + c] = m[pivot * width + c]!;
      m[pivot * width + c] = t;
    }
    for (let r = 0; r < k; r++) {
      if (r === p) continue;
      const f = m[r * width + p]! / m[p * width + p]!;
      for (let c = p; c < width; c++) m[r * width + c]! -= f * m[p * width + c]!;
    }
  }
  return columns.map((_, r) => m[r * width + k]! / m[r * width + r]! / scale[r]!);
}
