import type { Pin } from "../program.js";
import type { Request } from "../request.js";
import type { BlockPool } from "./block-pool.js";
import type { OffloadTiers, TierName } from "./offload-tiers.js";
import { NO_MATCH, type PrefixMatch } from "./sequences/prefix-match.js";
import type { SequenceMap } from "./sequences/sequence-map.js";

export { NO_MATCH, type PrefixMatch } from "./sequences/prefix-match.js";

/** What the dashboard shows of the tiers, whichever index keeps them. */
export interface TierIndex {
  readonly names: TierName[];
  usage(): { name: TierName; usedBlocks: number; capacityBlocks: number }[];
}

/**
 * Per-request view of the block pool: prefix lookup, slot allocation, caching of full blocks, and freeing
 * (write-through to the offload tiers of the paged spec). The scheduler never touches the pool directly.
 * With a sequence map (the llama-seq spec) the map finds prefixes (what a sequence or a saved state can
 * really give) and hears every holder come and go; its tiers are the map's.
 */
export class KvCacheManager {
  readonly blockSizeTokens: number;
  readonly kvBytesPerToken: number;

  constructor(
    readonly pool: BlockPool,
    /** the paged spec's block tiers (null with a sequence map, whose tiers are its own) */
    readonly tiers: OffloadTiers | null,
    kvBytesPerToken: number,
    readonly sequences: SequenceMap | null = null,
  ) {
    this.blockSizeTokens = pool.blockSizeTokens;
    this.kvBytesPerToken = kvBytesPerToken;
  }

  /** The tiers below the pool, whichever index keeps them (null: none). */
  get tierIndex(): TierIndex | null {
    return this.tiers ?? this.sequences?.tiers ?? null;
  }

  blocksFor(tokens: number): number {
    return Math.ceil(tokens / this.blockSizeTokens);
  }

  /**
   * Longest known prefix of the request's sequence, leaving at least its last token to compute (the
   * engine needs that token's logits).
   */
  findPrefix(request: Request): PrefixMatch {
    if (this.sequences) return this.sequences.findPrefix(request);
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
   * Blocks admission would take from the free queue: new ones plus free cached hits it revives. A match
   * copied into fresh blocks takes one per block. With a sequence map, less the blocks `ownPin` gives back:
   * the admitted request's program's pin, released before its turn takes the prefix (Scheduler.admit), whose
   * blocks the match does not take (a saved state restored in their place, a copy, a turn that parts).
   */
  admissionCostBlocks(match: PrefixMatch, tokensAfterStep: number, ownPin: readonly number[] = []): number {
    let givenBack = 0;
    if (this.sequences) {
      const taken = new Set(match.gpuBlockIds);
      for (const blockId of ownPin) if (this.pool.refCount(blockId) === 1 && !taken.has(blockId)) givenBack++;
    }
    if (match.copied) return this.blocksFor(tokensAfterStep) - givenBack;
    let revived = 0;
    for (const blockId of match.gpuBlockIds) if (this.pool.refCount(blockId) === 0) revived++;
    return revived + this.blocksFor(tokensAfterStep) - match.gpuBlockIds.length - givenBack;
  }

  /** Whether the executor can place the match now (always, without a sequence map): SequenceMap.placeable. */
  placeable(request: Request, match: PrefixMatch): boolean {
    return this.sequences?.placeable(request, match) ?? true;
  }

  /** The most tokens a running request's next chunk may take (a sliding-window checkpoint ends it). */
  chunkLimit(request: Request): number {
    return this.sequences?.chunkLimit(request) ?? Number.POSITIVE_INFINITY;
  }

  /** Takes the matched prefix for the request (hits shared or copied), tier blocks get fresh slots. */
  admit(request: Request, match: PrefixMatch): void {
    if (this.sequences) {
      this.sequences.admit(request, match, () => this.takeBlocks(request, match));
      return;
    }
    this.takeBlocks(request, match);
  }

  private takeBlocks(request: Request, match: PrefixMatch): void {
    if (match.copied) {
      const copies = this.pool.allocate(this.blocksFor(match.gpuTokens));
      if (copies === null) throw new Error("admission was not checked for space");
      request.blockIds = copies;
    } else {
      this.pool.touch(match.gpuBlockIds);
      request.blockIds = match.gpuBlockIds.slice();
    }
    request.numComputedTokens = match.gpuTokens;
    // with a sequence map, the blocks it gives register their hashes where nothing holds them yet
    request.numCachedBlocks = this.sequences || match.copied ? 0 : match.gpuBlockIds.length;
    request.numStoredBlocks = Math.floor((match.gpuTokens + match.tierTokens) / this.blockSizeTokens);
    request.hitTokens = match.gpuTokens;
    request.reloadTokens = match.tierTokens;
    request.reloadTier = match.tierTokens > 0 ? match.tier : null;
    if (match.tierTokens > 0 && match.tier !== null) {
      if (!this.allocateSlots(request, match.tierTokens))
        throw new Error("admission was not checked for space");
      if (this.tiers) {
        const first = match.gpuBlockIds.length;
        const reloaded = new Array<number>(match.tierTokens / this.blockSizeTokens);
        for (let i = 0; i < reloaded.length; i++) reloaded[i] = request.content.blockHash(first + i);
        this.tiers.touch(reloaded, match.tier);
      }
      request.numComputedTokens += match.tierTokens;
    }
    this.cacheFullBlocks(request);
  }

  /** Ensures blocks for numComputedTokens + newTokens; false (and no change) if the pool is short. */
  allocateSlots(request: Request, newTokens: number): boolean {
    const needed = this.blocksFor(request.numComputedTokens + newTokens) - request.blockIds.length;
    if (needed <= 0) return true;
    return this.pool.allocateInto(needed, request.blockIds);
  }

  /** Registers the request's newly completed full blocks in the prefix cache. */
  cacheFullBlocks(request: Request): void {
    this.sequences?.grew(request);
    const full = Math.floor(request.numComputedTokens / this.blockSizeTokens);
    if (full <= request.numCachedBlocks) return;
    this.pool.cacheSequenceBlocks(request.blockIds, request.content, request.numCachedBlocks, full);
    request.numCachedBlocks = full;
  }

  /**
   * Writes the request's full blocks computed since admission to the offload tiers (LMCache stores what
   * it has not seen; the prefix the request found was stored by whoever computed it). Paged spec only: a
   * sequence map saves whole sequences when it drops them.
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
    this.sequences?.releasedRequest(request);
    this.freeBlocks(request.blockIds);
    request.blockIds = [];
    request.numCachedBlocks = 0;
  }

  /** A finished request's blocks and sequence are held by its program's pin. */
  pin(request: Request, pin: Pin): void {
    this.writeThrough(request);
    this.sequences?.pinned(request, pin);
  }

  /** A pin's blocks go back to the pool (as reusable prefix cache), its sequence with them. */
  releasePin(pin: Pin): void {
    this.sequences?.releasedPin(pin);
    this.freeBlocks(pin.blockIds);
  }

  /** Frees blocks held outside a request (a pin), tail first. */
  freeBlocks(blockIds: readonly number[]): void {
    const reversed = new Array<number>(blockIds.length);
    for (let i = 0; i < blockIds.length; i++) reversed[i] = blockIds[blockIds.length - 1 - i] as number;
    this.pool.free(reversed);
  }
}
