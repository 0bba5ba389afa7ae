import { rmSync } from "node:fs";
import { mkdir, readFile, rm, stat, unlink, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { TokenIdContent } from "../core/kv/token-content.js";
import {
  decodeTokens,
  encodeTokens,
  lockTierDir,
  type PersistedState,
  takeIndex,
  unlockTierDir,
  writeIndex,
} from "./kv-tier-persistence.js";
import { StateBufferPool } from "./state-buffer-pool.js";

export interface KvTierStoreOptions {
  /** bytes of saved sequence states kept in RAM (0: no CPU tier) */
  readonly cpuBytes: number;
  /** bytes of saved sequence states kept on disk (0: no disk tier) */
  readonly diskBytes: number;
  /** directory for the disk tier's files (required when diskBytes > 0) */
  readonly diskDir: string | null;
  readonly blockSizeTokens: number;
  /** memory for saved states (default: ordinary Buffers); the runner's allocateStateBuffer */
  readonly allocateState?: (bytes: number) => Buffer;
  /**
   * Keep the disk tier across restarts (kv-tier-persistence.ts): what the states were saved with (model,
   * llama.cpp build, KV type and layout); a start finding an index of the same identity takes its states.
   */
  readonly persistIdentity?: string;
}

/** The directory a persistent disk tier keeps its states in, under `--disk-offload-dir`. */
export function persistentTierDir(diskDir: string): string {
  return join(diskDir, "continuum-kv");
}

/** What a persistent tier found at start. */
export interface RestoredTier {
  readonly states: number;
  readonly bytes: number;
  /** why the states found were not used, if they were not */
  readonly discarded: string | null;
}

/** One saved sequence: the KV of positions [0, length) of `content`, as a runner state blob. */
export interface TierEntry {
  readonly content: TokenIdContent;
  readonly length: number;
  /** the program whose sequence this is (null: unknown); its next saved state supersedes this one */
  readonly owner: string | null;
  readonly bytes: number;
  tier: "cpu" | "disk";
  data: Buffer | null;
  path: string | null;
  lastUse: number;
}

export interface TierMatch {
  readonly entry: TierEntry;
  /** leading full blocks the entry shares with the asked content */
  readonly blocks: number;
}

/** Leading full blocks two contents share, looking at most at `limitBlocks`. */
export function commonBlocks(
  a: TokenIdContent,
  aLength: number,
  b: TokenIdContent,
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
 * The engine's CPU RAM and disk tiers: whole-sequence KV states (llama_state_seq_get_data) of sequences the
 * engine had to drop from the pool, LRU per tier. A state pushed out of RAM falls to disk, one pushed out
 * of disk is deleted. A state is superseded by a newer one that extends it or that its program saved.
 */
/** Dropped states' buffers kept for reuse (the largest); a few cover the saves between two drops. */
const SPARE_STATE_BUFFERS = 4;

export class KvTierStore {
  private readonly entries: TierEntry[] = [];
  private cpuUsed = 0;
  private diskUsed = 0;
  private useCounter = 0;
  private fileCounter = 0;
  private dirReady = false;
  private readonly dir: string | null;
  /** buffers of dropped states, for the next saves */
  readonly buffers: StateBufferPool;
  /** a persistent tier's states found at start (null: not persistent) */
  readonly restored: RestoredTier | null = null;
  saved = 0;
  reloaded = 0;

  constructor(private readonly options: KvTierStoreOptions) {
    if (options.diskBytes > 0 && !options.diskDir) throw new Error("a disk KV tier needs a directory");
    this.buffers = new StateBufferPool(SPARE_STATE_BUFFERS, options.allocateState);
    const persists = options.persistIdentity !== undefined;
    if (persists && !(options.diskBytes > 0)) throw new Error("a persistent KV tier needs disk space");
    this.dir = options.diskDir
      ? persists
        ? persistentTierDir(options.diskDir)
        : join(options.diskDir, `continuum-kv-${process.pid}`)
      : null;
    if (persists && this.dir) this.restored = this.restore(this.dir, options.persistIdentity as string);
  }

  /** Whether the disk tier is kept across restarts. */
  get persists(): boolean {
    return this.restored !== null;
  }

  get enabled(): boolean {
    return this.options.cpuBytes > 0 || this.options.diskBytes > 0;
  }

  /** the saved states, RAM and disk (read-only: the dashboard's per-program view) */
  get savedStates(): readonly TierEntry[] {
    return this.entries;
  }

  get usage(): { cpuBytes: number; diskBytes: number; entries: number } {
    return { cpuBytes: this.cpuUsed, diskBytes: this.diskUsed, entries: this.entries.length };
  }

  /** The entry sharing the most leading blocks with `content` (at most limitBlocks), if any. */
  best(content: TokenIdContent, contentLength: number, limitBlocks: number): TierMatch | null {
    const b = this.options.blockSizeTokens;
    let best: TierMatch | null = null;
    for (const entry of this.entries) {
      const blocks = commonBlocks(entry.content, entry.length, content, contentLength, limitBlocks, b);
      if (blocks > 0 && (!best || blocks > best.blocks)) best = { entry, blocks };
    }
    return best;
  }

  /** Whether some entry already holds every full block of this sequence prefix. */
  covers(content: TokenIdContent, length: number): boolean {
    const b = this.options.blockSizeTokens;
    const blocks = Math.floor(length / b);
    return this.entries.some((e) => commonBlocks(e.content, e.length, content, length, blocks, b) === blocks);
  }

  /**
   * Saves a sequence through `save`, which writes its state into a buffer of `take` (RAM first, cascading
   * LRU victims to disk); the tier it went to, or null. Entries the new state supersedes are dropped first,
   * so their memory can take it: those it extends, and the owner's older states. An agent's conversation
   * only moves forward, so where an older state of the same program parts from the new one (the client
   * elided an old tool output, or the reply it sent back differs from the tokens generated), its tail will
   * not be asked for again, and its leading blocks are in the new state too. Keeping it would leave memory
   * that no later save can reuse: every save would then write into fresh memory, whose first touch costs
   * ~3 ms per MB on a VM (page faults) against ~0.1 ms per MB into memory already touched.
   */
  async put(
    content: TokenIdContent,
    length: number,
    save: (take: (bytes: number) => Buffer) => Promise<Buffer>,
    owner: string | null = null,
  ): Promise<"cpu" | "disk" | null> {
    const { cpuBytes, diskBytes, blockSizeTokens: b } = this.options;
    for (let i = this.entries.length - 1; i >= 0; i--) {
      const e = this.entries[i] as TierEntry;
      const blocks = Math.floor(e.length / b);
      const extended =
        e.length <= length && commonBlocks(e.content, e.length, content, length, blocks, b) === blocks;
      if (extended || (owner !== null && e.owner === owner)) await this.remove(i);
    }
    const state = await save((bytes) => this.buffers.take(bytes));
    const bytes = this.buffers.capacityOf(state);
    if (bytes > cpuBytes && bytes > diskBytes) {
      this.buffers.give(state);
      return null;
    }
    const entry: TierEntry = {
      content,
      length,
      owner,
      bytes,
      tier: "cpu",
      data: state,
      path: null,
      lastUse: 0,
    };
    entry.lastUse = ++this.useCounter;
    if (bytes <= cpuBytes) {
      this.entries.push(entry);
      this.cpuUsed += bytes;
      while (this.cpuUsed > cpuBytes) {
        const victim = this.lru("cpu", entry);
        if (!victim) break;
        await this.demote(victim);
      }
    } else {
      await this.toDisk(entry);
      this.entries.push(entry);
    }
    const tier = entry.tier;
    await this.trimDisk();
    this.saved++;
    return tier;
  }

  /** The state blob of an entry (read from disk for the disk tier). */
  async load(entry: TierEntry): Promise<Buffer> {
    entry.lastUse = ++this.useCounter;
    this.reloaded++;
    if (entry.data) return entry.data;
    if (!entry.path) throw new Error("tier entry has neither data nor file");
    return readFile(entry.path);
  }

  /**
   * Deletes every entry and the disk tier's files; a persistent tier instead keeps the most recently used
   * states that fit on disk (writing those in RAM there) and their index.
   */
  async close(): Promise<void> {
    if (this.persists && this.dir) {
      await this.persist(this.dir, this.options.persistIdentity as string);
      return;
    }
    while (this.entries.length > 0) await this.remove(this.entries.length - 1);
    if (this.dirReady && this.dir) await rm(this.dir, { recursive: true, force: true });
  }

  private restore(dir: string, identity: string): RestoredTier {
    lockTierDir(dir);
    this.dirReady = true;
    const { states, discarded } = takeIndex(dir, identity);
    // the most recently used first while they fit (the disk may be smaller than when they were saved)
    const kept: PersistedState[] = [];
    let bytes = 0;
    for (const state of states.sort((a, b) => b.lastUse - a.lastUse)) {
      if (bytes + state.bytes > this.options.diskBytes) rmSync(join(dir, state.file), { force: true });
      else {
        kept.push(state);
        bytes += state.bytes;
      }
    }
    for (const state of kept.reverse()) {
      this.entries.push({
        content: new TokenIdContent(decodeTokens(state.tokens), this.options.blockSizeTokens, state.rootHash),
        length: state.length,
        owner: state.owner,
        bytes: state.bytes,
        tier: "disk",
        data: null,
        path: join(dir, state.file),
        lastUse: ++this.useCounter,
      });
      const number = Number.parseInt(state.file.replace(/\D/g, ""), 10);
      if (number > this.fileCounter) this.fileCounter = number;
    }
    this.diskUsed = bytes;
    return { states: kept.length, bytes, discarded };
  }

  private async persist(dir: string, identity: string): Promise<void> {
    const newestFirst = [...this.entries].sort((a, b) => b.lastUse - a.lastUse);
    let room = this.options.diskBytes;
    const states: PersistedState[] = [];
    for (const entry of newestFirst) {
      if (entry.bytes > room) {
        await this.remove(this.entries.indexOf(entry));
        continue;
      }
      if (entry.tier === "cpu") {
        try {
          await this.toDisk(entry);
        } catch {
          // a disk that filled up keeps what was written (a partial file is an orphan the next start deletes)
          await this.remove(this.entries.indexOf(entry));
          continue;
        }
        this.cpuUsed -= entry.bytes;
      }
      room -= entry.bytes;
      const path = entry.path as string;
      states.push({
        file: basename(path),
        tokens: encodeTokens(entry.content.tokenIds(0, entry.length)),
        rootHash: entry.content.rootHash,
        length: entry.length,
        owner: entry.owner,
        bytes: entry.bytes,
        fileBytes: (await stat(path)).size,
        lastUse: entry.lastUse,
      });
    }
    await writeIndex(dir, identity, states);
    unlockTierDir(dir);
  }

  private lru(tier: "cpu" | "disk", except: TierEntry | null): TierEntry | null {
    let victim: TierEntry | null = null;
    for (const e of this.entries) {
      if (e.tier === tier && e !== except && (!victim || e.lastUse < victim.lastUse)) victim = e;
    }
    return victim;
  }

  private async demote(entry: TierEntry): Promise<void> {
    if (this.options.diskBytes >= entry.bytes) {
      this.cpuUsed -= entry.bytes;
      await this.toDisk(entry);
    } else {
      await this.remove(this.entries.indexOf(entry));
    }
  }

  private async toDisk(entry: TierEntry): Promise<void> {
    const dir = this.dir as string;
    if (!this.dirReady) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      this.dirReady = true;
    }
    const path = join(dir, `seq-${++this.fileCounter}.state`);
    await writeFile(path, entry.data as Buffer);
    this.buffers.give(entry.data as Buffer);
    entry.tier = "disk";
    entry.data = null;
    entry.path = path;
    this.diskUsed += entry.bytes;
  }

  private async trimDisk(): Promise<void> {
    while (this.diskUsed > this.options.diskBytes) {
      const victim = this.lru("disk", null);
      if (!victim) return;
      await this.remove(this.entries.indexOf(victim));
    }
  }

  private async remove(index: number): Promise<void> {
    const [entry] = this.entries.splice(index, 1);
    if (!entry) return;
    if (entry.tier === "cpu") {
      this.cpuUsed -= entry.bytes;
      if (entry.data) this.buffers.give(entry.data);
    } else {
      this.diskUsed -= entry.bytes;
      if (entry.path) await unlink(entry.path).catch(() => {});
    }
    entry.data = null;
  }
}
