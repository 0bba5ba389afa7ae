import type { Request } from "../request.js";
import type { BlockPool } from "./block-pool.js";
import type { OffloadTiers, TierName } from "./offload-tiers.js";

/** Where a waiting request's already-known prefix can come from. */
export interface PrefixMatch {
  /** pool blocks holding the longest cached prefix (in use or free) */
  readonly gpuBlockIds: number[];
  readonly gpuTokens: number;
  /** tokens after the GPU prefix found in an offload tier */
  readonly tierTokens: number;
  readonly tier: TierName | null;
}

const NO_MATCH: PrefixMatch = { gpuBlockIds: [], gpuTokens: 0, tierTokens: 0, tier: null };

/**
 * Per-request view of the block pool: prefix lookup, slot allocation, caching of full blocks, and freeing
 * (write-through to the offload tiers when they exist). The scheduler never touches the pool directly.
 *
 * With `copiesHeldPrefixes`, no two holders share a block: a prefix hit on blocks a running request or a pin
 * holds takes copies of them (fresh blocks the request counts as known, not computed), because the executor
 * behind the pool keeps one copy per sequence (a sliding-window model in llama.cpp's one unified pool, whose
 * prefixes are copied by saved state: docs/engine.md). Free cached blocks are taken back as usual.
 */
export class KvCacheManager {
  readonly blockSizeTokens: number;
  readonly kvBytesPerToken: number;

  constructor(
    readonly pool: BlockPool,
    readonly tiers: OffloadTiers | null,
    kvBytesPerToken: number,
    readonly copiesHeldPrefixes = false,
  ) {
    this.blockSizeTokens = pool.blockSizeTokens;
    this.kvBytesPerToken = kvBytesPerToken;
  }

  blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSizeTokens);
  }

  /**
   * Longest known prefix of the request's sequence, leaving at least its last token to compute (the
   * engine needs that token's logits).
   */
  findPrefix(request: Request): PrefixMatch {
    const maxBlocks = Math.floor((request.numTokens - 1) / this.blockSizeTokens);
    if (maxBlocks <= 0) return NO_MATCH;
    const gpuBlockIds: number[] = [];
    for (let i = 0; i < maxBlocks; i++) {
      const blockId = this.pool.lookup(request.content.blockHash(i));
      if (blockId < 0) break;
      gpuBlockIds.push(blockId);
    }
    const gpuTokens = gpuBlockIds.length * this.blockSizeTokens;
    if (!this.tiers || gpuBlockIds.length === maxBlocks) {
      return gpuBlockIds.length === 0 ? NO_MATCH : { gpuBlockIds, gpuTokens, tierTokens: 0, tier: null };
    }
    const found = this.tiers.findPrefix((i) => request.content.blockHash(i), gpuBlockIds.length, maxBlocks);
    return { gpuBlockIds, gpuTokens, tierTokens: found.numBlocks * this.blockSizeTokens, tier: found.tier };
  }

  /**
   * Blocks admission would take from the free queue: new ones plus free cached hits it revives. With
   * `copiesHeldPrefixes` every hit takes one (revived or copied), less the blocks `ownPin` gives back: the
   * admitted request's program's pin, released before its turn takes the prefix (Scheduler.admit).
   */
  admissionCostBlocks(match: PrefixMatch, tokensAfterStep: number, ownPin: readonly number[] = []): number {
    if (this.copiesHeldPrefixes) {
      let givenBack = 0;
      for (const blockId of ownPin) if (this.pool.refCount(blockId) === 1) givenBack++;
      return this.blocksFor(tokensAfterStep) - givenBack;
    }
    let revived = 0;
    for (const blockId of match.gpuBlockIds) if (this.pool.refCount(blockId) === 0) revived++;
    return revived + this.blocksFor(tokensAfterStep) - match.gpuBlockIds.length;
  }

  /** Takes the matched prefix for the request (hits shared or copied), tier blocks get fresh slots. */
  admit(request: Request, match: PrefixMatch): void {
    request.blockIds = this.takePrefix(match.gpuBlockIds);
    request.numComputedTokens = match.gpuTokens;
    request.numCachedBlocks = match.gpuBlockIds.length;
    request.numStoredBlocks = (match.gpuTokens + match.tierTokens) / this.blockSizeTokens;
    request.hitTokens = match.gpuTokens;
    request.reloadTokens = match.tierTokens;
    request.reloadTier = match.tierTokens > 0 ? match.tier : null;
    if (match.tierTokens > 0 && match.tier !== null) {
      if (!this.allocateSlots(request, match.tierTokens))
        throw new Error("admission was not checked for space");
      const first = match.gpuBlockIds.length;
      const reloaded = new Array<number>(match.tierTokens / this.blockSizeTokens);
      for (let i = 0; i < reloaded.length; i++) reloaded[i] = request.content.blockHash(first + i);
      this.tiers?.touch(reloaded, match.tier);
      request.numComputedTokens += match.tierTokens;
      this.cacheFullBlocks(request);
    }
  }

  /** Ensures blocks for numComputedTokens + newTokens; false (and no change) if the pool is short. */
  allocateSlots(request: Request, newTokens: number): boolean {
    const needed = this.blocksFor(request.numComputedTokens + newTokens) - request.blockIds.length;
    if (needed <= 0) return true;
    return this.pool.allocateInto(needed, request.blockIds);
  }

  /** Registers the request's newly completed full blocks in the prefix cache. */
  cacheFullBlocks(request: Request): void {
    const full = Math.floor(request.numComputedTokens / this.blockSizeTokens);
    if (full <= request.numCachedBlocks) return;
    this.pool.cacheSequenceBlocks(request.blockIds, request.content, request.numCachedBlocks, full);
    request.numCachedBlocks = full;
  }

  /**
   * Writes the request's full blocks computed since admission to the offload tiers (LMCache stores what
   * it has not seen; the prefix the request found was stored by whoever computed it).
   */
  writeThrough(request: Request): void {
    if (!this.tiers || request.numCachedBlocks <= request.numStoredBlocks) return;
    const fresh = new Array<number>(request.numCachedBlocks - request.numStoredBlocks);
    for (let i = 0; i < fresh.length; i++) fresh[i] = request.content.blockHash(request.numStoredBlocks + i);
    this.tiers.store(fresh);
    request.numStoredBlocks = request.numCachedBlocks;
  }

  /** Drops the request's hold on its blocks (tail first, so its last blocks are reused first). */
  freeRequest(request: Request): void {
    this.writeThrough(request);
    this.freeBlocks(request.blockIds);
    request.blockIds = [];
    request.numCachedBlocks = 0;
  }

  /**
   * The request's blocks for a matched prefix: the matched blocks themselves, their counts raised, except,
   * with `copiesHeldPrefixes`, fresh blocks in place of those another holder still holds.
   */
  private takePrefix(matched: readonly number[]): number[] {
    if (!this.copiesHeldPrefixes) {
      this.pool.touch(matched);
      return matched.slice();
    }
    const held = matched.filter((blockId) => this.pool.refCount(blockId) > 0);
    // revived before the copies are allocated, which could otherwise hand out a free block this prefix hits
    this.pool.touch(matched.filter((blockId) => this.pool.refCount(blockId) === 0));
    const copies = this.pool.allocate(held.length);
    if (copies === null) throw new Error("admission was not checked for space");
    const copyOf = new Map(held.map((blockId, i) => [blockId, copies[i] as number]));
    return matched.map((blockId) => copyOf.get(blockId) ?? blockId);
  }

  /** Frees blocks held outside a request (a pin), tail first. */
  freeBlocks(blockIds: readonly number[]): void {
    const reversed = new Array<number>(blockIds.length);
    for (let i = 0; i < blockIds.length; i++) reversed[i] = blockIds[blockIds.length - 1 - i] as number;
    this.pool.free(reversed);
  }
}
