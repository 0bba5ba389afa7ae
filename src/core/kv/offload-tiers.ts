import { LruHashSet } from "./lru-hash-set.js";

export type TierName = "cpu" | "disk";

export interface TierConfig {
  readonly name: TierName;
  readonly capacityBytes: number;
  /** bytes per second moving KV back to the accelerator */
  readonly reloadBandwidthBps: number;
}

/** Bytes in one GiB: tier sizes are given in GiB everywhere (as vLLM's --cpu-offload-gb). */
export const GIB = 1024 ** 3;

export interface TierSizes {
  readonly cpuBytes: number;
  readonly diskBytes: number;
  readonly cpuBandwidthBps: number;
  readonly diskBandwidthBps: number;
}

/** The scheduler's tier list for a RAM and a disk tier (either may be 0 = absent), fastest first. */
export function tierConfigs(sizes: TierSizes): TierConfig[] {
  const tiers: TierConfig[] = [];
  if (sizes.cpuBytes > 0) {
    tiers.push({ name: "cpu", capacityBytes: sizes.cpuBytes, reloadBandwidthBps: sizes.cpuBandwidthBps });
  }
  if (sizes.diskBytes > 0) {
    tiers.push({ name: "disk", capacityBytes: sizes.diskBytes, reloadBandwidthBps: sizes.diskBandwidthBps });
  }
  return tiers;
}

/** One offload tier: an LRU set of block hashes (the blocks' KV lives in CPU RAM or on disk). */
class Tier {
  private readonly lru: LruHashSet;

  constructor(
    readonly config: TierConfig,
    readonly capacityBlocks: number,
  ) {
    this.lru = new LruHashSet(capacityBlocks);
  }

  get size(): number {
    return this.lru.size;
  }

  has(hash: number): boolean {
    return this.lru.has(hash);
  }

  touch(hash: number): void {
    this.lru.touch(hash);
  }

  /**
   * Inserts a hash, pushing the LRU victim into `evicted`. A hash already held keeps its place: a returning
   * turn re-stores its whole prefix, and refreshing thousands of entries per finish would cost more than
   * the slightly staler order (reloads do refresh, see touch).
   */
  put(hash: number, evicted: number[]): void {
    if (this.lru.has(hash)) return;
    const victim = this.lru.add(hash);
    if (victim !== 0) evicted.push(victim);
  }
}

export interface TierPrefix {
  readonly numBlocks: number;
  readonly tier: TierName | null;
}

/**
 * CPU RAM and disk tiers below the accelerator pool, LMCache-style: KV of freed blocks is written to the
 * first tier, blocks pushed out of a tier fall to the next, and a returning prefix found in a tier is
 * reloaded instead of recomputed.
 */
export class OffloadTiers {
  private readonly tiers: Tier[];
  private readonly spill: number[] = [];

  constructor(configs: readonly TierConfig[], kvBytesPerBlock: number) {
    this.tiers = configs.map((config) => {
      if (!(config.capacityBytes > 0)) throw new Error(`${config.name} tier needs a positive capacity`);
      if (!(config.reloadBandwidthBps > 0)) throw new Error(`${config.name} tier needs a positive bandwidth`);
      return new Tier(config, Math.max(1, Math.floor(config.capacityBytes / kvBytesPerBlock)));
    });
  }

  get names(): TierName[] {
    return this.tiers.map((t) => t.config.name);
  }

  reloadBandwidthBps(tier: TierName): number {
    const found = this.tiers.find((t) => t.config.name === tier);
    if (!found) throw new Error(`no ${tier} tier configured`);
    return found.config.reloadBandwidthBps;
  }

  /**
   * Stores these block hashes in the top tier (or `into`, for KV already there: a persistent disk tier's
   * states at start), cascading LRU victims downwards.
   */
  store(hashes: readonly number[], into: TierName | null = null): void {
    const first = into === null ? 0 : this.tiers.findIndex((t) => t.config.name === into);
    if (first < 0) throw new Error(`no ${into} tier configured`);
    let incoming: readonly number[] = hashes;
    for (let t = first; t < this.tiers.length; t++) {
      const tier = this.tiers[t] as Tier;
      this.spill.length = 0;
      for (const hash of incoming) tier.put(hash, this.spill);
      if (this.spill.length === 0) return;
      incoming = this.spill.slice();
    }
  }

  /**
   * Longest run of consecutive blocks [fromBlock, fromBlock + n) held by one tier (the fastest holding the
   * first block); reloading mixes no tiers, which keeps the transfer a single stream.
   */
  findPrefix(blockHash: (index: number) => number, fromBlock: number, maxBlocks: number): TierPrefix {
    if (maxBlocks <= fromBlock) return { numBlocks: 0, tier: null };
    const first = blockHash(fromBlock);
    const tier = this.tiers.find((t) => t.has(first));
    if (!tier) return { numBlocks: 0, tier: null };
    let n = 1;
    while (fromBlock + n < maxBlocks && tier.has(blockHash(fromBlock + n))) n++;
    return { numBlocks: n, tier: tier.config.name };
  }

  /** Marks reloaded blocks as recently used in their tier. */
  touch(hashes: readonly number[], tierName: TierName): void {
    const tier = this.tiers.find((t) => t.config.name === tierName);
    if (tier) for (const hash of hashes) if (tier.has(hash)) tier.touch(hash);
  }

  occupancyBlocks(): Record<string, number> {
    return Object.fromEntries(this.tiers.map((t) => [t.config.name, t.size]));
  }

  /** Each tier's blocks held and blocks it can hold, top tier first. */
  usage(): { name: TierName; usedBlocks: number; capacityBlocks: number }[] {
    return this.tiers.map((t) => ({
      name: t.config.name,
      usedBlocks: t.size,
      capacityBlocks: t.capacityBlocks,
    }));
  }
}
