import { mean, std } from "./stats.js";

/** Powers tried when matching a sample's spread; the bounds keep tiny samples from being distorted. */
const MIN_POWER = 0.5;
const MAX_POWER = 2;

function coefficientOfVariation(logs: readonly number[], power: number): number {
  // CV is scale-free, so shifting the logs by their max keeps exp() from overflowing.
  let top = Number.NEGATIVE_INFINITY;
  for (const l of logs) top = Math.max(top, power * l);
  const values = logs.map((l) => Math.exp(power * l - top));
  return std(values) / mean(values);
}

/**
 * The positive sample transformed as c·x^p so that its mean and standard deviation equal the targets.
 * Keeps the order of the values, and a lognormal sample stays lognormal. p is limited to [0.5, 2]; a
 * sample too small to reach the target spread within that gets the nearest spread it can.
 */
export function matchMeanStd(sample: readonly number[], targetMean: number, targetStd: number): number[] {
  if (sample.length < 2) return sample.map(() => targetMean);
  const logs = sample.map((x) => Math.log(x));
  const targetCv = targetStd / targetMean;
  let lo = MIN_POWER;
  let hi = MAX_POWER;
  // CV of x^p grows with p (log E[x^t] is convex in t).
  for (let i = 0; i < 60; i++) {
    const mid = (lo + hi) / 2;
    if (coefficientOfVariation(logs, mid) < targetCv) lo = mid;
    else hi = mid;
  }
  const power = (lo + hi) / 2;
  let top = Number.NEGATIVE_INFINITY;
  for (const l of logs) top = Math.max(top, power * l);
  const values = logs.map((l) => Math.exp(power * l - top));
  const scale = targetMean / mean(values);
  return values.map((v) => v * scale);
}
