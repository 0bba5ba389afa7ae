import { SortedDurations } from "./sorted-durations.js";

/**
 * The most recent `capacity` tool-call durations (seconds) of one tool, as an empirical distribution,
 * and the paper's eq. 2 over it.
 *
 * A ring buffer in arrival order says which sample to evict; a SortedDurations holds the same multiset
 * sorted for the CDF and eq. 2. add is O(log n + block size); cdf and bestTtlS are as in SortedDurations,
 * and bestTtlS is O(1) when asked again for the same benefit before the next add.
 * Memory: the ring grows by doubling up to `capacity`, so a rarely used tool stays small.
 */
const INITIAL_ALLOCATION = 64;

export class EmpiricalDurations {
  readonly capacity: number;
  private order: Float64Array;
  /** Index in `order` of the oldest sample once the window is full. */
  private head = 0;
  private readonly sorted = new SortedDurations();
  // NaN never equals a benefit, so NaN marks the cache as empty.
  private cachedBenefitS = Number.NaN;
  private cachedTtlS = 0;

  constructor(capacity = 4096) {
    if (!Number.isInteger(capacity) || capacity < 1) {
      throw new RangeError(`EmpiricalDurations capacity must be a positive integer, got ${capacity}`);
    }
    this.capacity = capacity;
    this.order = new Float64Array(Math.min(capacity, INITIAL_ALLOCATION));
  }

  get size(): number {
    return this.sorted.size;
  }

  add(durationS: number): void {
    if (!Number.isFinite(durationS) || durationS < 0) {
      throw new RangeError(`tool duration must be a finite number of seconds >= 0, got ${durationS}`);
    }
    this.cachedBenefitS = Number.NaN;
    const count = this.sorted.size;
    if (count === this.capacity) {
      this.sorted.remove(this.order[this.head]!);
      this.order[this.head] = durationS;
      this.head = (this.head + 1) % this.capacity;
    } else {
      if (count === this.order.length) {
        const grown = new Float64Array(Math.min(this.capacity, count * 2));
        grown.set(this.order);
        this.order = grown;
      }
      this.order[count] = durationS;
    }
    this.sorted.insert(durationS);
  }

  /** The q-quantile of the held samples (nearest rank); undefined when there are none. */
  quantile(q: number): number | undefined {
    const n = this.sorted.size;
    if (n === 0) return undefined;
    return this.sorted.at(Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1)));
  }

  /**
   * Eq. 2 for a call that has run `elapsedS` already: over the samples longer than that, the remaining time
   * tau maximising P(D <= elapsed + tau | D > elapsed) x benefitS - tau (ties to the smaller). A call
   * running longer than every sample tells nothing more: bestTtlS, as if it had just started.
   */
  bestRemainingTtlS(elapsedS: number, benefitS: number): number {
    const n = this.sorted.size;
    const done = this.sorted.countAtMost(elapsedS);
    if (done === n) return this.bestTtlS(benefitS);
    let best = 0;
    let bestValue = 0;
    for (let i = done; i < n; i++) {
      const tauS = (this.sorted.at(i) as number) - elapsedS;
      const value = ((i - done + 1) / (n - done)) * benefitS - tauS;
      if (value > bestValue) {
        best = tauS;
        bestValue = value;
      }
    }
    return best;
  }

  /** Fraction of held samples ≤ tauS (0 when there are none). */
  cdf(tauS: number): number {
    const n = this.sorted.size;
    return n === 0 ? 0 : this.sorted.countAtMost(tauS) / n;
  }

  /**
   * Eq. 2: argmax over tau ∈ {0} ∪ samples of cdf(tau)·benefitS − tau; ties go to the smaller tau.
   * With no samples, or benefitS ≤ 0, that is 0.
   */
  bestTtlS(benefitS: number): number {
    if (!Number.isFinite(benefitS)) throw new RangeError(`benefit must be finite, got ${benefitS}`);
    if (benefitS !== this.cachedBenefitS) {
      this.cachedTtlS = this.sorted.bestTtlS(benefitS);
      this.cachedBenefitS = benefitS;
    }
    return this.cachedTtlS;
  }
}
