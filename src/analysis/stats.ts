/** Descriptive statistics over plain number arrays. Pure: inputs are never mutated. */

export interface Summary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p95: number;
  p99: number;
  min: number;
  max: number;
}

/** Arithmetic mean; 0 for an empty array. */
export function mean(xs: readonly number[]): number {
  if (xs.length === 0) return 0;
  let sum = 0;
  for (const x of xs) sum += x;
  return sum / xs.length;
}

/**
 * Percentile with linear interpolation between closest ranks (numpy's default `linear` method),
 * p in [0, 100]. 0 for an empty array.
 */
export function percentile(xs: readonly number[], p: number): number {
  return percentileOfSorted(sortedCopy(xs), p);
}

/** count 0 and every statistic 0 when xs is empty. */
export function summarize(xs: readonly number[]): Summary {
  const sorted = sortedCopy(xs);
  return {
    count: sorted.length,
    mean: mean(sorted),
    p50: percentileOfSorted(sorted, 50),
    p90: percentileOfSorted(sorted, 90),
    p95: percentileOfSorted(sorted, 95),
    p99: percentileOfSorted(sorted, 99),
    min: sorted[0] ?? 0,
    max: sorted[sorted.length - 1] ?? 0,
  };
}

function sortedCopy(xs: readonly number[]): number[] {
  return [...xs].sort((a, b) => a - b);
}

// Mirrors numpy's arithmetic (virtual index (n-1)*q, lerp from the nearer end) so results match bit for bit.
function percentileOfSorted(sorted: readonly number[], p: number): number {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile p must be in [0, 100], got ${p}`);
  const n = sorted.length;
  if (n === 0) return 0;
  const q = p / 100;
  const index = (n - 1) * q;
  const lo = Math.floor(index);
  const a = sorted[lo]!;
  const b = sorted[Math.min(lo + 1, n - 1)]!;
  const t = index - lo;
  const diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}
