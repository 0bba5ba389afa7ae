import fc from "./fast-check.js";

/**
 * Uniform over [min, max], on a grid of 10^6 steps. fc.double spreads its draws over the floats' bit
 * patterns, so most of them lie within a hair of 0 and a value typical of the range is rarely drawn.
 */
export function uniformDouble(min: number, max: number): fc.Arbitrary<number> {
  return fc.integer({ min: 0, max: 1_000_000 }).map((n) => min + ((max - min) * n) / 1_000_000);
}

/** Half fc.double's draws (edge cases: 0, tiny, the bounds), half uniform ones (typical values). */
export function anyDouble(min: number, max: number): fc.Arbitrary<number> {
  return fc.oneof(fc.double({ min, max, noNaN: true }), uniformDouble(min, max));
}
