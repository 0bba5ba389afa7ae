/**
 * Open-addressing map from prefix hash (a 52-bit integer, never 0) to block id, in typed arrays.
 * A JS Map keyed by non-small-integer numbers boxes every key and dominated the scheduler's profile.
 * Linear probing with backward-shift deletion, so no tombstones accumulate.
 */
export class HashIndex {
  private readonly keys: Float64Array;
  private readonly values: Int32Array;
  private readonly mask: number;
  private count = 0;

  constructor(maxEntries: number) {
    let capacity = 16;
    while (capacity < maxEntries * 2) capacity *= 2;
    this.keys = new Float64Array(capacity);
    this.values = new Int32Array(capacity);
    this.mask = capacity - 1;
  }

  get size(): number {
    return this.count;
  }

  get(key: number): number {
    for (let i = this.slot(key); ; i = (i + 1) & this.mask) {
      const k = this.keys[i] as number;
      if (k === key) return this.values[i] as number;
      if (k === 0) return -1;
    }
  }

  has(key: number): boolean {
    return this.get(key) >= 0;
  }

  /** Inserts a new key; the caller guarantees it is absent and the table is not full. */
  set(key: number, value: number): void {
    let i = this.slot(key);
    while (this.keys[i] !== 0) i = (i + 1) & this.mask;
    this.keys[i] = key;
    this.values[i] = value;
    this.count++;
  }

  /** Inserts the key unless present (one probe run for both); true when inserted. */
  setIfAbsent(key: number, value: number): boolean {
    let i = this.slot(key);
    for (;;) {
      const k = this.keys[i] as number;
      if (k === key) return false;
      if (k === 0) break;
      i = (i + 1) & this.mask;
    }
    this.keys[i] = key;
    this.values[i] = value;
    this.count++;
    return true;
  }

  delete(key: number): void {
    let i = this.slot(key);
    for (;;) {
      const k = this.keys[i] as number;
      if (k === 0) return;
      if (k === key) break;
      i = (i + 1) & this.mask;
    }
    // Backward-shift: pull later entries of the probe run into the hole so lookups never stop early.
    let hole = i;
    for (let j = (hole + 1) & this.mask; this.keys[j] !== 0; j = (j + 1) & this.mask) {
      const home = this.slot(this.keys[j] as number);
      const distanceToJ = (j - home) & this.mask;
      const distanceToHole = (hole - home) & this.mask;
      if (distanceToHole < distanceToJ) {
        this.keys[hole] = this.keys[j] as number;
        this.values[hole] = this.values[j] as number;
        hole = j;
      }
    }
    this.keys[hole] = 0;
    this.count--;
  }

  *entries(): Generator<[number, number]> {
    for (let i = 0; i <= this.mask; i++) {
      if (this.keys[i] !== 0) yield [this.keys[i] as number, this.values[i] as number];
    }
  }

  /** Keys are prefix hashes whose low 32 bits are already well mixed, so they index directly. */
  private slot(key: number): number {
    return (key >>> 0) & this.mask;
  }
}
