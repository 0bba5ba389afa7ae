/**
 * The paper's memoryfulness factor eta = −Corr(k, N − k), over the pairs (k, N − k), k = 0..N−1, of every
 * finished program with N requests (k = requests already served, N − k = requests remaining).
 *
 * A program's N pairs are folded in as one batch with closed-form moments, merged into running
 * (count, means, co-moments) with the pairwise update of Chan et al., which stays accurate after millions
 * of programs where raw power sums would cancel catastrophically. O(1) time and memory per program.
 */
export class MemoryfulnessEstimator {
  private programs = 0;
  private pairs = 0;
  private meanServed = 0;
  private meanRemaining = 0;
  /** Sums of squared deviations of served, of remaining, and of their cross product. */
  private m2Served = 0;
  private m2Remaining = 0;
  private coMoment = 0;

  get programsObserved(): number {
    return this.programs;
  }

  observeFinishedProgram(numRequests: number): void {
    if (!Number.isInteger(numRequests) || numRequests < 0) {
      throw new RangeError(`a program's request count must be an integer >= 0, got ${numRequests}`);
    }
    if (numRequests === 0) return;
    const n = numRequests;
    // Within one program k runs over 0..N−1 and N − k over N..1: both have variance (N²−1)/12 and
    // are perfectly anti-correlated.
    const batchMeanServed = (n - 1) / 2;
    const batchMeanRemaining = (n + 1) / 2;
    const batchM2 = (n * (n * n - 1)) / 12;

    const total = this.pairs + n;
    const dServed = batchMeanServed - this.meanServed;
    const dRemaining = batchMeanRemaining - this.meanRemaining;
    const weight = (this.pairs * n) / total;
    this.meanServed += (dServed * n) / total;
    this.meanRemaining += (dRemaining * n) / total;
    this.m2Served += batchM2 + dServed * dServed * weight;
    this.m2Remaining += batchM2 + dRemaining * dRemaining * weight;
    this.coMoment += -batchM2 + dServed * dRemaining * weight;
    this.pairs = total;
    this.programs++;
  }

  /** 1 (the paper's fully memoryful cold-start assumption) until it is defined over ≥ 2 programs. */
  eta(): number {
    if (this.programs < 2 || this.m2Served <= 0 || this.m2Remaining <= 0) return 1;
    const corr = this.coMoment / Math.sqrt(this.m2Served * this.m2Remaining);
    // Rounding can push |corr| a hair past 1.
    return Math.max(-1, Math.min(1, -corr));
  }
}
