/** A spare buffer is reused only for a state at least 1 / this of its size. */
const MAX_REUSE_OVERSIZE = 2;

/**
 * Buffers for saved sequence states, handed back when the state they held is dropped and reused by later
 * saves. A state is megabytes: a fresh Buffer per save costs page faults on first touch, and V8 counts it
 * as external memory, whose growth forces an old-space collection every few saves.
 */
export class StateBufferPool {
  private readonly free: Buffer[] = [];
  /** the pool's own allocations: only these may be reused (a Buffer from elsewhere may share its memory) */
  private readonly owned = new WeakSet<ArrayBufferLike>();
  reused = 0;
  allocated = 0;

  /** `allocate`: where new buffers come from (page-locked memory when the KV lives on a GPU). */
  constructor(
    private readonly maxFree: number,
    private readonly allocate: (bytes: number) => Buffer = Buffer.allocUnsafeSlow,
  ) {}

  /**
   * A buffer of at least `bytes`: the smallest free one that fits and is at most twice that, else a new one
   * with headroom. The bound matters because a tier is charged a state's whole buffer: a short program's
   * state in a long one's buffer would hold many times its size of the tier for as long as it is kept,
   * while the page faults a fresh buffer saves grow only with the state's own size.
   */
  take(bytes: number): Buffer {
    let best = -1;
    for (let i = 0; i < this.free.length; i++) {
      const length = (this.free[i] as Buffer).length;
      const fits = length >= bytes && length <= MAX_REUSE_OVERSIZE * bytes;
      if (fits && (best < 0 || length < (this.free[best] as Buffer).length)) best = i;
    }
    if (best >= 0) {
      this.reused++;
      return this.free.splice(best, 1)[0] as Buffer;
    }
    this.allocated++;
    const buffer = this.allocate(withHeadroom(bytes));
    this.owned.add(buffer.buffer);
    return buffer;
  }

  /** Bytes of the buffers kept for reuse. */
  get freeBytes(): number {
    let bytes = 0;
    for (const buffer of this.free) bytes += buffer.length;
    return bytes;
  }

  /** The memory behind a state this pool handed out (what holding the state costs); the state's length otherwise. */
  capacityOf(state: Buffer): number {
    return this.owned.has(state.buffer) ? state.buffer.byteLength : state.length;
  }

  /** Takes back the memory of a state no longer needed; the largest few are kept. */
  give(state: Buffer): void {
    if (!this.owned.has(state.buffer)) return;
    this.free.push(Buffer.from(state.buffer, 0, state.buffer.byteLength));
    if (this.free.length > this.maxFree) {
      this.free.sort((a, b) => b.length - a.length);
      this.free.length = this.maxFree;
    }
  }
}

/**
 * Capacities come in steps of sqrt(2): a program's next state, a turn longer than its last, mostly fits the
 * buffer the last one leaves behind, at a quarter more memory on average.
 */
function withHeadroom(bytes: number): number {
  if (bytes <= 1) return 1;
  return Math.ceil(2 ** (Math.ceil(2 * Math.log2(bytes)) / 2));
}
