/**
 * The paper's T: mean queueing delay (seconds) over the last `windowSize` requests whose program had been
 * evicted. 0 before any observation, as the paper initialises it. O(1) per call.
 */
export class QueueingDelayWindow {
  readonly windowSize: number;
  private readonly delaysS: Float64Array;
  private next = 0;
  private count = 0;
  private sumS = 0;

  constructor(windowSize = 256) {
    if (!Number.isInteger(windowSize) || windowSize < 1) {
      throw new RangeError(`windowSize must be a positive integer, got ${windowSize}`);
    }
    this.windowSize = windowSize;
    this.delaysS = new Float64Array(windowSize);
  }

  get size(): number {
    return this.count;
  }

  observe(delayS: number): void {
    if (!Number.isFinite(delayS) || delayS < 0) {
      throw new RangeError(`queueing delay must be a finite number of seconds >= 0, got ${delayS}`);
    }
    this.sumS += delayS - this.delaysS[this.next]!;
    this.delaysS[this.next] = delayS;
    this.next++;
    if (this.count < this.windowSize) this.count++;
    if (this.next === this.windowSize) {
      this.next = 0;
      // Re-add once per lap so rounding from the running add/subtract cannot build up; amortised O(1).
      let sumS = 0;
      for (const d of this.delaysS) sumS += d;
      this.sumS = sumS;
    }
  }

  meanS(): number {
    return this.count === 0 ? 0 : this.sumS / this.count;
  }
}
