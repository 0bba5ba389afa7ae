import { HashIndex } from "./hash-index.js";

const NONE = -1;

/**
 * Fixed-capacity LRU set of block hashes (an offload tier's contents). A JS Map used as an LRU degrades
 * badly here: evicting its oldest key walks past every deleted entry still at the front of its table.
 * This keeps entries in typed-array slots linked oldest to newest, with a hash index for lookups.
 */
export class LruHashSet {
  private readonly keys: Float64Array;
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private readonly index: HashIndex;
  private readonly freeSlots: Int32Array;
  private numFree: number;
  private head = NONE;
  private tail = NONE;

  constructor(readonly capacity: number) {
    this.keys = new Float64Array(capacity);
    this.prev = new Int32Array(capacity);
    this.next = new Int32Array(capacity);
    this.index = new HashIndex(capacity);
    this.freeSlots = new Int32Array(capacity);
    for (let i = 0; i < capacity; i++) this.freeSlots[i] = capacity - 1 - i;
    this.numFree = capacity;
  }

  get size(): number {
    return this.capacity - this.numFree;
  }

  has(key: number): boolean {
    return this.index.get(key) >= 0;
  }

  /** Marks a held key as the most recently used. */
  touch(key: number): void {
    const slot = this.index.get(key);
    if (slot < 0 || slot === this.tail) return;
    this.unlink(slot);
    this.linkTail(slot);
  }

  /** Adds a key not held yet; returns the evicted oldest key, or 0 when nothing had to go. */
  add(key: number): number {
    let evicted = 0;
    if (this.numFree === 0) {
      const oldest = this.head;
      evicted = this.keys[oldest] as number;
      this.unlink(oldest);
      this.index.delete(evicted);
      this.freeSlots[this.numFree++] = oldest;
    }
    const slot = this.freeSlots[--this.numFree] as number;
    this.keys[slot] = key;
    this.index.set(key, slot);
    this.linkTail(slot);
    return evicted;
  }

  private unlink(slot: number): void {
    const p = this.prev[slot] as number;
    const n = this.next[slot] as number;
    if (p === NONE) this.head = n;
    else this.next[p] = n;
    if (n === NONE) this.tail = p;
    else this.prev[n] = p;
  }

  private linkTail(slot: number): void {
    this.prev[slot] = this.tail;
    this.next[slot] = NONE;
    if (this.tail === NONE) this.head = slot;
    else this.next[this.tail] = slot;
    this.tail = slot;
  }
}
