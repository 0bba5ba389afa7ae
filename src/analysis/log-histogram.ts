/**
 * Percentiles of many positive samples (per-token gaps: millions in a run) without keeping them: buckets
 * whose bounds grow by 1%, so a percentile is within 1% of the sample it stands for. Zero and negative
 * samples land in a bucket of their own below every other.
 */
const GROWTH = 1.01;
const LOG_GROWTH = Math.log(GROWTH);
/** the smallest bucketed value: 1 ns (samples are seconds) */
const FLOOR = 1e-9;

export class LogHistogram {
  private readonly counts = new Map<number, number>();
  private total = 0;
  private sum = 0;

  add(value: number): void {
    const bucket = value <= FLOOR ? -1 : Math.floor(Math.log(value / FLOOR) / LOG_GROWTH);
    this.counts.set(bucket, (this.counts.get(bucket) ?? 0) + 1);
    this.total++;
    this.sum += value;
  }

  get count(): number {
    return this.total;
  }

  mean(): number {
    return this.total === 0 ? 0 : this.sum / this.total;
  }

  /** The p-th percentile (p in [0, 100]): the upper bound of the bucket holding it; 0 when empty. */
  percentile(p: number): number {
    if (this.total === 0) return 0;
    const rank = Math.max(1, Math.ceil((p / 100) * this.total));
    let seen = 0;
    for (const bucket of [...this.counts.keys()].sort((a, b) => a - b)) {
      seen += this.counts.get(bucket) as number;
      if (seen >= rank) return bucket < 0 ? 0 : FLOOR * GROWTH ** (bucket + 1);
    }
    return 0;
  }
}
