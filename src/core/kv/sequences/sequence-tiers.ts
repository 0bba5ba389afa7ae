import type { TierConfig, TierName } from "../offload-tiers.js";
import type { TokenContent } from "../token-content.js";
import type { SeqOp } from "./seq-ops.js";

/** One saved sequence: the KV of positions [0, length) of `content`, held in RAM or on disk. */
export interface TierEntry {
  readonly id: number;
  readonly content: TokenContent;
  readonly length: number;
  /** the program whose sequence this is (null: unknown); its next saved state supersedes this one */
  readonly owner: string | null;
  /** what the tier charges for it */
  readonly bytes: number;
  tier: TierName;
  lastUse: number;
}

export interface TierMatch {
  readonly entry: TierEntry;
  /** leading full blocks the entry shares with the asked content */
  readonly blocks: number;
}

/** A saved state found at start (a persistent disk tier), adopted as an entry. */
export interface AdoptedState {
  readonly content: TokenContent;
  readonly length: number;
  readonly owner: string | null;
  readonly bytes: number;
}

/** Leading full blocks two contents share, looking at most at `limitBlocks`. */
export function commonBlocks(
  a: TokenContent,
  aLength: number,
  b: TokenContent,
  bLength: number,
  limitBlocks: number,
  blockSizeTokens: number,
): number {
  const limit = Math.min(
    Math.floor(aLength / blockSizeTokens),
    Math.floor(bLength / blockSizeTokens),
    limitBlocks,
  );
  if (a === b) return limit;
  let i = 0;
  while (i < limit && a.blockHash(i) === b.blockHash(i)) i++;
  return i;
}

/**
 * The RAM and disk tiers of the llama-seq spec, as the scheduler decides them: whole-sequence entries (a
 * llama.cpp state is saved and restored whole), LRU per tier; an entry pushed out of RAM falls to disk, one
 * pushed out of disk is deleted. A new entry supersedes the entries it extends and its program's older ones
 * (an agent's conversation only moves forward). The executor keeps the bytes (its store, keyed by entry id)
 * and is told every change as a sequence op.
 */
export class SequenceTiers {
  private readonly entries = new Map<number, TierEntry>();
  private readonly used: Record<TierName, number> = { cpu: 0, disk: 0 };
  private readonly capacity: Record<TierName, number> = { cpu: 0, disk: 0 };
  private nextId = 1;
  private useCounter = 0;

  constructor(
    private readonly configs: readonly TierConfig[],
    private readonly kvBytesPerToken: number,
    private readonly blockSizeTokens: number,
    private readonly emit: (op: SeqOp) => void,
  ) {
    for (const config of configs) this.capacity[config.name] = config.capacityBytes;
  }

  get names(): TierName[] {
    return this.configs.map((c) => c.name);
  }

  get size(): number {
    return this.entries.size;
  }

  /** the entries, least recently used first */
  all(): TierEntry[] {
    return [...this.entries.values()].sort((a, b) => a.lastUse - b.lastUse);
  }

  get(id: number): TierEntry | undefined {
    return this.entries.get(id);
  }

  reloadBandwidthBps(tier: TierName): number {
    const found = this.configs.find((c) => c.name === tier);
    if (!found) throw new Error(`no ${tier} tier configured`);
    return found.reloadBandwidthBps;
  }

  /** What an entry of `tokens` tokens is charged. */
  bytesFor(tokens: number): number {
    return tokens * this.kvBytesPerToken;
  }

  /** The entry sharing the most leading blocks with `content` (at most limitBlocks), if any. */
  best(content: TokenContent, contentTokens: number, limitBlocks: number): TierMatch | null {
    const b = this.blockSizeTokens;
    let best: TierMatch | null = null;
    for (const entry of this.entries.values()) {
      const blocks = commonBlocks(entry.content, entry.length, content, contentTokens, limitBlocks, b);
      if (blocks > 0 && (!best || blocks > best.blocks)) best = { entry, blocks };
    }
    return best;
  }

  /** Whether some entry already holds every full block of this sequence prefix. */
  covers(content: TokenContent, length: number): boolean {
    const b = this.blockSizeTokens;
    const blocks = Math.floor(length / b);
    for (const e of this.entries.values()) {
      if (commonBlocks(e.content, e.length, content, length, blocks, b) === blocks) return true;
    }
    return false;
  }

  /**
   * A new entry for a sequence about to be saved (the caller emits the save), or null when it fits no tier.
   * First the entries it supersedes go, then LRU entries make room in its tier (RAM's falling to disk);
   * never `keep` (an entry an admission is restoring).
   */
  put(
    content: TokenContent,
    length: number,
    owner: string | null,
    keep: TierEntry | null = null,
  ): TierEntry | null {
    const bytes = this.bytesFor(length);
    const tier: TierName | null =
      bytes <= this.capacity.cpu ? "cpu" : bytes <= this.capacity.disk ? "disk" : null;
    if (tier === null) return null;
    const b = this.blockSizeTokens;
    for (const e of [...this.entries.values()]) {
      const blocks = Math.floor(e.length / b);
      const extended =
        e.length <= length && commonBlocks(e.content, e.length, content, length, blocks, b) === blocks;
      if (e !== keep && (extended || (owner !== null && e.owner === owner))) this.forget(e);
    }
    if (tier === "cpu") {
      for (let victim = this.lru("cpu", keep); victim && this.used.cpu + bytes > this.capacity.cpu; ) {
        this.demoteOrForget(victim, keep);
        victim = this.lru("cpu", keep);
      }
    } else {
      this.makeDiskRoom(bytes, keep);
    }
    const entry: TierEntry = {
      id: this.nextId++,
      content,
      length,
      owner,
      bytes,
      tier,
      lastUse: ++this.useCounter,
    };
    this.entries.set(entry.id, entry);
    this.used[tier] += bytes;
    return entry;
  }

  /** An entry restored: most recently used. */
  touch(entry: TierEntry): void {
    entry.lastUse = ++this.useCounter;
  }

  /** An entry goes (superseded, pushed out, or unreadable); the executor deletes its bytes. */
  forget(entry: TierEntry): void {
    if (!this.entries.delete(entry.id)) return;
    this.used[entry.tier] -= entry.bytes;
    this.emit({ op: "forget", entry: entry.id });
  }

  /** States a persistent disk tier kept from an earlier run, least recently used first: disk entries. */
  adopt(states: readonly AdoptedState[]): TierEntry[] {
    return states.map((state) => {
      const entry: TierEntry = {
        id: this.nextId++,
        content: state.content,
        length: state.length,
        owner: state.owner,
        bytes: state.bytes,
        tier: "disk",
        lastUse: ++this.useCounter,
      };
      this.entries.set(entry.id, entry);
      this.used.disk += entry.bytes;
      return entry;
    });
  }

  /**
   * For a restart (a persistent disk tier): the most recently used entries that fit on disk stay, moved
   * there from RAM; the rest are forgotten.
   */
  keepOnDisk(): void {
    let room = this.capacity.disk;
    for (const entry of [...this.entries.values()].sort((a, b) => b.lastUse - a.lastUse)) {
      if (entry.bytes > room) {
        this.forget(entry);
        continue;
      }
      room -= entry.bytes;
      if (entry.tier === "cpu") {
        this.used.cpu -= entry.bytes;
        entry.tier = "disk";
        this.used.disk += entry.bytes;
        this.emit({ op: "demote", entry: entry.id });
      }
    }
  }

  /** Each tier's bytes held and its capacity, in blocks' worth of KV, top tier first (the dashboard's). */
  usage(): { name: TierName; usedBlocks: number; capacityBlocks: number }[] {
    const perBlock = this.kvBytesPerToken * this.blockSizeTokens;
    return this.configs.map((c) => ({
      name: c.name,
      usedBlocks: Math.ceil(this.used[c.name] / perBlock),
      capacityBlocks: Math.max(1, Math.floor(c.capacityBytes / perBlock)),
    }));
  }

  usedBytes(tier: TierName): number {
    return this.used[tier];
  }

  private lru(tier: TierName, keep: TierEntry | null): TierEntry | null {
    let victim: TierEntry | null = null;
    for (const e of this.entries.values()) {
      if (e.tier === tier && e !== keep && (!victim || e.lastUse < victim.lastUse)) victim = e;
    }
    return victim;
  }

  private demoteOrForget(entry: TierEntry, keep: TierEntry | null): void {
    if (this.capacity.disk < entry.bytes) {
      this.forget(entry);
      return;
    }
    this.makeDiskRoom(entry.bytes, keep);
    this.used.cpu -= entry.bytes;
    entry.tier = "disk";
    this.used.disk += entry.bytes;
    this.emit({ op: "demote", entry: entry.id });
  }

  private makeDiskRoom(bytes: number, keep: TierEntry | null): void {
    for (let victim = this.lru("disk", keep); victim && this.used.disk + bytes > this.capacity.disk; ) {
      this.forget(victim);
      victim = this.lru("disk", keep);
    }
  }
}
