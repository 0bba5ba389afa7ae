import type { KvBlockObserver } from "./block-events.js";
import { FreeBlockQueue } from "./free-block-queue.js";
import { HashIndex } from "./hash-index.js";
import type { TokenContent } from "./token-content.js";

/**
 * The paged KV pool (vLLM v1 semantics): fixed-size blocks with reference counts; a block whose count drops
 * to zero joins the LRU free queue but keeps its prefix hash, so a later request with the same prefix can
 * take it back until the block is handed out again. An observer, when given, hears every hash the cache gains
 * and loses.
 */
export class BlockPool {
  readonly numBlocks: number;
  readonly blockSizeTokens: number;
  private readonly refCounts: Int32Array;
  /** prefix hash of each block, 0 when the block holds no complete, hashed content */
  private readonly hashes: Float64Array;
  private readonly cachedBlockByHash: HashIndex;
  private readonly freeQueue: FreeBlockQueue;
  /** hears each free block handed to new content (a sequence map cutting what it backed) */
  private reuseListener: ((blockId: number) => void) | null = null;

  constructor(
    numBlocks: number,
    blockSizeTokens: number,
    private readonly observer: KvBlockObserver | null = null,
  ) {
    if (!Number.isInteger(numBlocks) || numBlocks < 1)
      throw new Error(`numBlocks must be >= 1, got ${numBlocks}`);
    if (!Number.isInteger(blockSizeTokens) || blockSizeTokens < 1) {
      throw new Error(`blockSizeTokens must be >= 1, got ${blockSizeTokens}`);
    }
    this.numBlocks = numBlocks;
    this.blockSizeTokens = blockSizeTokens;
    this.refCounts = new Int32Array(numBlocks);
    this.hashes = new Float64Array(numBlocks);
    this.cachedBlockByHash = new HashIndex(numBlocks);
    this.freeQueue = new FreeBlockQueue(numBlocks);
    for (let b = 0; b < numBlocks; b++) this.freeQueue.pushTail(b);
  }

  setReuseListener(listener: (blockId: number) => void): void {
    this.reuseListener = listener;
  }

  get numFreeBlocks(): number {
    return this.freeQueue.length;
  }

  get numUsedBlocks(): number {
    return this.numBlocks - this.freeQueue.length;
  }

  get numCachedBlocks(): number {
    return this.cachedBlockByHash.size;
  }

  /** Free blocks still holding a registered prefix (a later request may reuse them), by a scan. */
  countFreeCachedBlocks(): number {
    let count = 0;
    for (let b = 0; b < this.numBlocks; b++) {
      if (this.refCounts[b] === 0 && this.hashes[b] !== 0) count++;
    }
    return count;
  }

  usageFraction(): number {
    return this.numUsedBlocks / this.numBlocks;
  }

  refCount(blockId: number): number {
    return this.refCounts[blockId] as number;
  }

  hashOf(blockId: number): number {
    return this.hashes[blockId] as number;
  }

  /** The block caching this prefix hash, in use or free, or -1. */
  lookup(hash: number): number {
    return this.cachedBlockByHash.get(hash);
  }

  /** Takes n blocks from the head of the free queue (dropping their cached content), or null if too few. */
  allocate(n: number): number[] | null {
    const out: number[] = [];
    return this.allocateInto(n, out) ? out : null;
  }

  /** allocate() appending to `out`; false (and nothing taken) if too few blocks are free. */
  allocateInto(n: number, out: number[]): boolean {
    if (n > this.freeQueue.length) return false;
    const removed: number[] | null = this.observer ? [] : null;
    for (let i = 0; i < n; i++) {
      const blockId = this.freeQueue.popHead();
      this.reuseListener?.(blockId);
      const dropped = this.dropCachedContent(blockId);
      if (dropped !== 0) removed?.push(dropped);
      this.refCounts[blockId] = 1;
      out.push(blockId);
    }
    if (removed && removed.length > 0) this.observer?.blocksRemoved(removed);
    return true;
  }

  /** Adds a reference to blocks found by prefix lookup; a free one leaves the free queue. */
  touch(blockIds: readonly number[]): void {
    for (const blockId of blockIds) {
      if (this.refCounts[blockId] === 0) this.freeQueue.remove(blockId);
      this.refCounts[blockId] = (this.refCounts[blockId] as number) + 1;
    }
  }

  /**
   * Drops one reference per block. Blocks reaching zero join the free queue in the order given, so callers
   * pass a request's blocks tail first: its last blocks are then the first to be reused.
   */
  free(blockIds: readonly number[]): void {
    for (const blockId of blockIds) {
      const count = this.refCounts[blockId] as number;
      if (count <= 0) throw new Error(`double free of block ${blockId}`);
      this.refCounts[blockId] = count - 1;
      if (count === 1) this.freeQueue.pushTail(blockId);
    }
  }

  /**
   * Registers a full block's prefix hash so later requests can hit it. First writer wins: true when this
   * block now holds the hash, false when the block already had one or another block holds it.
   */
  cacheFullBlock(blockId: number, hash: number): boolean {
    if (this.hashes[blockId] !== 0) return false;
    if (!this.cachedBlockByHash.setIfAbsent(hash, blockId)) return false;
    this.hashes[blockId] = hash;
    return true;
  }

  /**
   * Registers blocks [from, to) of a sequence, `blockIds[i]` holding its block i, and tells the observer of
   * each run of blocks that became cache (blocks another block already caches break a run).
   */
  cacheSequenceBlocks(blockIds: readonly number[], content: TokenContent, from: number, to: number): void {
    let runStart = -1;
    for (let i = from; i < to; i++) {
      if (this.cacheFullBlock(blockIds[i] as number, content.blockHash(i))) {
        if (runStart < 0) runStart = i;
      } else if (runStart >= 0) {
        this.reportStored(content, runStart, i);
        runStart = -1;
      }
    }
    if (runStart >= 0) this.reportStored(content, runStart, to);
  }

  /** Throws if free queue, reference counts and hash map disagree. O(numBlocks); for tests and debug runs. */
  checkInvariants(): void {
    let free = 0;
    for (let b = 0; b < this.numBlocks; b++) {
      const count = this.refCounts[b] as number;
      if (count < 0) throw new Error(`block ${b} has negative ref count ${count}`);
      if ((count === 0) !== this.freeQueue.has(b)) {
        throw new Error(`block ${b} ref count ${count} disagrees with free queue membership`);
      }
      if (count === 0) free++;
      const hash = this.hashes[b] as number;
      if (hash !== 0 && this.cachedBlockByHash.get(hash) !== b)
        throw new Error(`block ${b} hash not indexed`);
    }
    if (free !== this.freeQueue.length) throw new Error("free queue length mismatch");
    for (const [hash, b] of this.cachedBlockByHash.entries()) {
      if (this.hashes[b] !== hash) throw new Error(`hash index points to block ${b} with another hash`);
    }
  }

  /** Forgets the block's hash, which it returns (0 when it had none). */
  private dropCachedContent(blockId: number): number {
    const hash = this.hashes[blockId] as number;
    if (hash === 0) return 0;
    this.cachedBlockByHash.delete(hash);
    this.hashes[blockId] = 0;
    return hash;
  }

  private reportStored(content: TokenContent, from: number, to: number): void {
    if (!this.observer) return;
    const hashes = new Array<number>(to - from);
    for (let i = from; i < to; i++) hashes[i - from] = content.blockHash(i);
    const parentHash = from === 0 ? null : content.blockHash(from - 1);
    const b = this.blockSizeTokens;
    const tokenIds = this.observer.needsTokenIds ? (content.tokenIds?.(from * b, to * b) ?? []) : [];
    this.observer.blocksStored({ hashes, parentHash, tokenIds, blockSizeTokens: b });
  }
}
