/**
 * Doubly linked list of free block ids threaded through typed arrays: O(1) pop from the head (least
 * recently freed, evicted first), push to the tail, and removal from the middle when a cached free block is
 * hit again. A deque cannot remove from the middle in O(1), which a prefix hit needs.
 */
const NONE = -1;

export class FreeBlockQueue {
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private readonly inQueue: Uint8Array;
  private head = NONE;
  private tail = NONE;
  private count = 0;

  constructor(capacity: number) {
    this.prev = new Int32Array(capacity).fill(NONE);
    this.next = new Int32Array(capacity).fill(NONE);
    this.inQueue = new Uint8Array(capacity);
  }

  get length(): number {
    return this.count;
  }

  has(blockId: number): boolean {
    return this.inQueue[blockId] === 1;
  }

  pushTail(blockId: number): void {
    if (this.inQueue[blockId] === 1) throw new Error(`block ${blockId} is already free`);
    this.inQueue[blockId] = 1;
    this.prev[blockId] = this.tail;
    this.next[blockId] = NONE;
    if (this.tail === NONE) this.head = blockId;
    else this.next[this.tail] = blockId;
    this.tail = blockId;
    this.count++;
  }

  popHead(): number {
    const blockId = this.head;
    if (blockId === NONE) throw new Error("no free block");
    this.remove(blockId);
    return blockId;
  }

  remove(blockId: number): void {
    if (this.inQueue[blockId] !== 1) throw new Error(`block ${blockId} is not free`);
    const p = this.prev[blockId] as number;
    const n = this.next[blockId] as number;
    if (p === NONE) this.head = n;
    else this.next[p] = n;
    if (n === NONE) this.tail = p;
    else this.prev[n] = p;
    this.prev[blockId] = NONE;
    this.next[blockId] = NONE;
    this.inQueue[blockId] = 0;
    this.count--;
  }

  /** Free block ids from head (next to be reused) to tail. For tests and invariant checks. */
  toArray(): number[] {
    const out: number[] = [];
    for (let b = this.head; b !== NONE; b = this.next[b] as number) out.push(b);
    return out;
  }
}
