/**
 * A sorted multiset of durations (seconds) that answers the paper's eq. 2,
 * argmax over tau ∈ {0} ∪ samples of cdf(tau)·B − tau, without visiting every sample.
 *
 * The samples live in consecutive sorted blocks, split in half on reaching 2·blockSize and merged with a
 * neighbour below blockSize/4. Inside a block the value of its j-th sample is (offset + j + 1)·B/n − tau_j;
 * offset, B and n are the same for the whole block, so only the block's upper convex hull of the points
 * (tau_j, j + 1) can hold its best sample. A hull depends only on its block's contents, so an insert or
 * remove invalidates one hull (two when blocks are rebalanced), rebuilt lazily by the next query.
 *
 * Cost, n samples, b = blockSize: insert/remove O(log n + b); countAtMost O(n/b + log b);
 * bestTtlS O(n/b · h + b) where h is the few hull vertices visited per block (plus rebuilding the blocks
 * changed since the last query), and it stops at the first block whose samples exceed B − best.
 */
interface Block {
  values: Float64Array;
  len: number;
  /** Indices into `values` of the upper hull vertices, ascending. Valid when !dirty. */
  hull: Int32Array;
  hullLen: number;
  dirty: boolean;
}

export class SortedDurations {
  private readonly blockSize: number;
  private readonly blocks: Block[] = [];
  private count = 0;

  constructor(blockSize = 64) {
    if (!Number.isInteger(blockSize) || blockSize < 4) {
      throw new RangeError(`blockSize must be an integer >= 4, got ${blockSize}`);
    }
    this.blockSize = blockSize;
  }

  get size(): number {
    return this.count;
  }

  /** The k-th smallest sample (0-based); undefined when there are not k + 1. O(n / blockSize). */
  at(k: number): number | undefined {
    if (k < 0 || k >= this.count) return undefined;
    let rest = k;
    for (const block of this.blocks) {
      if (rest < block.len) return block.values[rest];
      rest -= block.len;
    }
    return undefined;
  }

  /** x must be a number (not NaN); EmpiricalDurations validates before calling. */
  insert(x: number): void {
    this.count++;
    if (this.blocks.length === 0) {
      const block = this.newBlock();
      block.values[0] = x;
      block.len = 1;
      this.blocks.push(block);
      return;
    }
    // The first block whose largest sample exceeds x, or the last block.
    let lo = 0;
    let hi = this.blocks.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const b = this.blocks[mid]!;
      if (b.values[b.len - 1]! > x) hi = mid;
      else lo = mid + 1;
    }
    const block = this.blocks[lo]!;
    const at = upperBound(block.values, block.len, x);
    block.values.copyWithin(at + 1, at, block.len);
    block.values[at] = x;
    block.len++;
    block.dirty = true;
    if (block.len === 2 * this.blockSize) {
      const upper = this.newBlock();
      upper.values.set(block.values.subarray(this.blockSize, block.len));
      upper.len = block.len - this.blockSize;
      block.len = this.blockSize;
      this.blocks.splice(lo + 1, 0, upper);
    }
  }

  /** Removes one copy of x; false if x is not held. */
  remove(x: number): boolean {
    let lo = 0;
    let hi = this.blocks.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const b = this.blocks[mid]!;
      if (b.values[b.len - 1]! < x) lo = mid + 1;
      else hi = mid;
    }
    const block = this.blocks[lo];
    if (block === undefined) return false;
    const at = lowerBound(block.values, block.len, x);
    if (block.values[at] !== x) return false;
    block.values.copyWithin(at, at + 1, block.len);
    block.len--;
    block.dirty = true;
    this.count--;
    if (block.len === 0) this.blocks.splice(lo, 1);
    else if (block.len < this.blockSize / 4) this.rebalance(lo);
    return true;
  }

  /** Number of samples ≤ x. */
  countAtMost(x: number): number {
    let total = 0;
    for (const b of this.blocks) {
      if (b.values[b.len - 1]! <= x) {
        total += b.len;
        continue;
      }
      return total + upperBound(b.values, b.len, x);
    }
    return total;
  }

  /** Eq. 2 with cdf = countAtMost / size; ties go to the smaller tau; 0 without samples or for B ≤ 0. */
  bestTtlS(benefitS: number): number {
    if (this.count === 0 || !(benefitS > 0)) return 0;
    const perSample = benefitS / this.count;
    let bestValue = 0;
    let bestTauS = 0;
    let offset = 0;
    for (const block of this.blocks) {
      const values = block.values;
      // cdf ≤ 1, so no tau this large (or larger) can beat bestValue: value ≤ benefit − tau.
      if (values[0]! >= benefitS - bestValue) break;
      if (block.dirty) this.rebuildHull(block);
      const hull = block.hull;
      // Along a concave chain a linear objective rises then falls, so stop at the first drop.
      let previous = Number.NEGATIVE_INFINITY;
      for (let h = 0; h < block.hullLen; h++) {
        const i = hull[h]!;
        const tauS = values[i]!;
        const value = (offset + i + 1) * perSample - tauS;
        if (value < previous) break;
        previous = value;
        if (value > bestValue) {
          bestValue = value;
          bestTauS = tauS;
        }
      }
      offset += block.len;
    }
    return bestTauS;
  }

  /**
   * Upper convex hull of (values[i], i + 1) by a monotone chain. Of equal taus the later (higher-rank)
   * point pops the earlier, except for the very first point, which is harmless: it only scores lower.
   */
  private rebuildHull(block: Block): void {
    const { values, hull } = block;
    let h = 0;
    for (let i = 0; i < block.len; i++) {
      const x = values[i]!;
      const y = i + 1;
      while (h >= 2) {
        const o = hull[h - 2]!;
        const a = hull[h - 1]!;
        const ox = values[o]!;
        // Pop a when it lies on or below the segment o → (x, y); collinear points can never win a tie.
        const cross = (values[a]! - ox) * (y - (o + 1)) - (a - o) * (x - ox);
        if (cross < 0) break;
        h--;
      }
      hull[h++] = i;
    }
    block.hullLen = h;
    block.dirty = false;
  }

  /** Merges the under-full block at `index` with a neighbour, splitting the result again if too big. */
  private rebalance(index: number): void {
    if (this.blocks.length < 2) return;
    const left = index + 1 < this.blocks.length ? index : index - 1;
    const a = this.blocks[left]!;
    const b = this.blocks[left + 1]!;
    const total = a.len + b.len;
    if (total < 2 * this.blockSize) {
      a.values.set(b.values.subarray(0, b.len), a.len);
      a.len = total;
      a.dirty = true;
      this.blocks.splice(left + 1, 1);
      return;
    }
    const all = new Float64Array(total);
    all.set(a.values.subarray(0, a.len));
    all.set(b.values.subarray(0, b.len), a.len);
    const half = total >>> 1;
    a.values.set(all.subarray(0, half));
    a.len = half;
    b.values.set(all.subarray(half));
    b.len = total - half;
    a.dirty = true;
    b.dirty = true;
  }

  private newBlock(): Block {
    const capacity = 2 * this.blockSize;
    return {
      values: new Float64Array(capacity),
      len: 0,
      hull: new Int32Array(capacity),
      hullLen: 0,
      dirty: true,
    };
  }
}

/** First index in values[0, len) holding a value ≥ x. */
function lowerBound(values: Float64Array, len: number, x: number): number {
  let lo = 0;
  let hi = len;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (values[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First index in values[0, len) holding a value > x. */
function upperBound(values: Float64Array, len: number, x: number): number {
  let lo = 0;
  let hi = len;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (values[mid]! <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
