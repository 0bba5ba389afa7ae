import { mean } from "../analysis/stats.js";

export { mean };

/** Population standard deviation. */
export function std(values: readonly number[]): number {
  if (values.length === 0) return 0;
  const m = mean(values);
  let sum = 0;
  for (const v of values) sum += (v - m) * (v - m);
  return Math.sqrt(sum / values.length);
}

/** Quantile q in [0, 1] of ascending-sorted values, interpolating linearly between order statistics. */
export function quantileSorted(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  const pos = q * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  return a + (b - a) * (pos - lo);
}

export function max(values: readonly number[]): number {
  let best = 0;
  for (const v of values) if (v > best) best = v;
  return best;
}
