import { mkdir, readFile, rm, unlink, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import type { TierName } from "../../core/kv/offload-tiers.js";
import type { TierEntry } from "../../core/kv/sequences/sequence-tiers.js";
import type { TokenIdContent } from "../../core/kv/token-content.js";
import {
  CorruptStateError,
  decodeTokens,
  encodeTokens,
  type PersistedState,
  PersistentTierDir,
  type StateRecord,
} from "./kv-tier-persistence.js";
import { StateBufferPool } from "./state-buffer-pool.js";

export interface KvTierStoreOptions {
  /** bytes of saved sequence states kept in RAM (0: no CPU tier) */
  readonly cpuBytes: number;
  /** bytes of saved sequence states kept on disk (0: no disk tier) */
  readonly diskBytes: number;
  /** directory for the disk tier's files (required when diskBytes > 0) */
  readonly diskDir: string | null;
  /** memory for saved states (default: ordinary Buffers); the runner's allocateStateBuffer */
  readonly allocateState?: (bytes: number) => Buffer;
  /**
   * Keep the disk tier across restarts (kv-tier-persistence.ts): what the states were saved with (model,
   * llama.cpp build, KV type and layout); a start finding an index of the same identity takes its states.
   */
  readonly persistIdentity?: string;
  /** where a persistent tier reports a state it refuses when reading it (default stderr) */
  readonly report?: (message: string) => void;
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
  /** states of the index found that were not used, each naming its file and why */
  readonly rejected: readonly string[];
}

/** A saved state a persistent tier found at start, for the scheduler's tiers to adopt. */
export interface FoundState {
  readonly tokens: number[];
  readonly rootHash: number;
  readonly length: number;
  readonly owner: string | null;
  readonly path: string;
  readonly fileBytes: number;
  readonly lastUse: number;
}

/** The bytes of one tier entry: a state blob in RAM, or its file. */
interface StoredState {
  tier: TierName;
  data: Buffer | null;
  path: string | null;
  /** the memory or file behind it */
  bytes: number;
  /** when it was last saved or read, for a persistent tier's index (most recently used restored first) */
  lastUse: number;
}

/** Dropped states' buffers kept for reuse (the largest); a few cover the saves between two drops. */
const SPARE_STATE_BUFFERS = 4;

/**
 * The bytes of the scheduler's RAM and disk tiers (core/kv/sequences/sequence-tiers.ts decides every entry's place):
 * whole-sequence states (llama_state_seq_get_data) by entry id, written, read, moved to disk and deleted as
 * the plan's sequence ops say. Saves write into reused buffers (StateBufferPool).
 */
export class KvTierStore {
  private readonly states = new Map<number, StoredState>();
  private fileCounter = 0;
  private dirReady = false;
  private readonly dir: string | null;
  /** a persistent tier's directory and index (null: not persistent) */
  private readonly persistent: PersistentTierDir | null = null;
  /** the scheduler's tier entry of an id: what a persistent tier's index records of its state on disk */
  private entryOf: ((id: number) => TierEntry | undefined) | null = null;
  private useCounter = 0;
  /** buffers of dropped states, for the next saves */
  readonly buffers: StateBufferPool;
  /** a persistent tier's states found at start (null: not persistent) */
  readonly restored: RestoredTier | null = null;
  /** the states found at start, least recently used first, until the scheduler's tiers adopt them */
  found: readonly FoundState[] = [];
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
    if (persists && this.dir) {
      const { dir, opened } = PersistentTierDir.open(
        this.dir,
        options.persistIdentity as string,
        () => this.diskStates(),
        options.report ?? ((message) => process.stderr.write(`${message}\n`)),
      );
      this.persistent = dir;
      this.dirReady = true;
      this.restored = this.restore(dir, opened.states, opened.discarded, opened.rejected);
    }
  }

  /** Whether the disk tier is kept across restarts. */
  get persists(): boolean {
    return this.restored !== null;
  }

  /** Bytes held in RAM and on disk (the memory and files behind the states), and how many states. */
  get usage(): { cpuBytes: number; diskBytes: number; entries: number } {
    let cpuBytes = 0;
    let diskBytes = 0;
    for (const state of this.states.values()) {
      if (state.tier === "cpu") cpuBytes += state.bytes;
      else diskBytes += state.bytes;
    }
    return { cpuBytes, diskBytes, entries: this.states.size };
  }

  /** The found states are the scheduler's entries of these ids, in the same order. */
  bind(ids: readonly number[]): void {
    this.found.forEach((state, i) => {
      const id = ids[i];
      if (id !== undefined)
        this.states.set(id, {
          tier: "disk",
          data: null,
          path: state.path,
          bytes: state.fileBytes,
          lastUse: state.lastUse,
        });
    });
    this.found = [];
  }

  /** Where a persistent tier's index learns what an entry written to disk holds: the scheduler's tiers. */
  describeEntries(entryOf: (id: number) => TierEntry | undefined): void {
    this.entryOf = entryOf;
  }

  private recordOf(id: number): StateRecord | null {
    const entry = this.entryOf?.(id);
    if (!entry) return null;
    const content = entry.content as TokenIdContent;
    return {
      tokens: encodeTokens(content.tokenIds(0, entry.length)),
      rootHash: content.rootHash,
      length: entry.length,
      owner: entry.owner,
      bytes: entry.bytes,
    };
  }

  /** Writes entry `id`'s state, which `save` puts into a buffer of `take`, into RAM or straight to disk. */
  async save(
    id: number,
    tier: TierName,
    save: (take: (bytes: number) => Buffer) => Promise<Buffer>,
  ): Promise<void> {
    const data = await save((bytes) => this.buffers.take(bytes));
    const state: StoredState = {
      tier: "cpu",
      data,
      path: null,
      bytes: this.buffers.capacityOf(data),
      lastUse: ++this.useCounter,
    };
    this.states.set(id, state);
    if (tier === "disk") await this.toDisk(id, state);
    this.saved++;
  }

  /** Where entry `id`'s bytes are (null: nowhere). */
  tierOf(id: number): TierName | null {
    return this.states.get(id)?.tier ?? null;
  }

  /** Entry `id`'s state blob (read from disk for the disk tier). */
  async load(id: number): Promise<Buffer> {
    const state = this.states.get(id);
    if (!state) throw new Error(`no saved state ${id}`);
    this.reloaded++;
    state.lastUse = ++this.useCounter;
    if (state.data) return state.data;
    if (!state.path) throw new Error(`saved state ${id} has neither data nor file`);
    if (!this.persistent) return readFile(state.path);
    try {
      return await this.persistent.readState(basename(state.path));
    } catch (error) {
      // a file that does not match its checksum is not used again (the scheduler forgets the entry)
      if (error instanceof CorruptStateError) await this.forget(id);
      throw error;
    }
  }

  /** Entry `id` moves from RAM to disk. */
  async demote(id: number): Promise<void> {
    const state = this.states.get(id);
    if (state && state.tier === "cpu") await this.toDisk(id, state);
  }

  /** Entry `id`'s bytes go (its buffer kept for later saves, its file deleted). */
  async forget(id: number): Promise<void> {
    const state = this.states.get(id);
    if (!state) return;
    this.states.delete(id);
    if (state.data) this.buffers.give(state.data);
    state.data = null;
    if (state.path && this.persistent) this.persistent.retire(basename(state.path));
    else if (state.path) await unlink(state.path).catch(() => {});
  }

  /**
   * Shutdown. A persistent tier keeps the states of `keep` (the scheduler's entries, all on disk by now) and
   * writes its final index, else every state and the disk tier's files go.
   */
  async close(keep: readonly TierEntry[] | null): Promise<void> {
    if (this.persistent) {
      const kept = new Set((keep ?? []).map((entry) => entry.id));
      for (const id of [...this.states.keys()]) if (!kept.has(id)) await this.forget(id);
      await this.persistent.close();
      return;
    }
    for (const id of [...this.states.keys()]) await this.forget(id);
    if (this.dirReady && this.dir) await rm(this.dir, { recursive: true, force: true });
  }

  /** The states on disk, as a persistent tier's index names them. */
  private diskStates(): { file: string; lastUse: number }[] {
    const found = this.found.map((state) => ({ file: basename(state.path), lastUse: state.lastUse }));
    return [
      ...found,
      ...[...this.states.values()].flatMap((state) =>
        state.tier === "disk" && state.path ? [{ file: basename(state.path), lastUse: state.lastUse }] : [],
      ),
    ];
  }

  /**
   * Takes the states a persistent tier's directory held: the most recently used first while they fit (the
   * disk may be smaller than when they were saved); the index is written again with those kept.
   */
  private restore(
    dir: PersistentTierDir,
    states: readonly PersistedState[],
    discarded: string | null,
    rejected: readonly string[],
  ): RestoredTier {
    const kept: PersistedState[] = [];
    let bytes = 0;
    for (const state of [...states].sort((a, b) => b.lastUse - a.lastUse)) {
      if (bytes + state.bytes > this.options.diskBytes) dir.retire(state.file);
      else {
        kept.push(state);
        bytes += state.bytes;
      }
    }
    // uses go on from the last life's, so that states saved from now on count as more recent
    this.useCounter = Math.max(0, ...kept.map((state) => state.lastUse));
    this.found = kept.reverse().map((state) => {
      const number = Number.parseInt(state.file.replace(/\D/g, ""), 10);
      if (number > this.fileCounter) this.fileCounter = number;
      return {
        tokens: decodeTokens(state.tokens),
        rootHash: state.rootHash,
        length: state.length,
        owner: state.owner,
        path: join(dir.path, state.file),
        fileBytes: state.fileBytes,
        lastUse: state.lastUse,
      };
    });
    dir.changed();
    return { states: kept.length, bytes, discarded, rejected };
  }

  private async toDisk(id: number, state: StoredState): Promise<void> {
    const dir = this.dir;
    if (!dir) throw new Error("no disk tier directory");
    if (!this.dirReady) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      this.dirReady = true;
    }
    const file = `seq-${++this.fileCounter}.state`;
    const data = state.data as Buffer;
    const record = this.persistent ? this.recordOf(id) : null;
    try {
      // a persistent tier's index names the file with what it holds (one it cannot describe is not kept)
      if (this.persistent && record) await this.persistent.writeState(file, data, record);
      else await writeFile(join(dir, file), data);
    } catch (error) {
      // a disk that filled up keeps nothing of it (a partial file is an orphan the next start deletes)
      await this.forget(id);
      throw error;
    }
    this.buffers.give(data);
    state.bytes = data.length;
    state.tier = "disk";
    state.data = null;
    state.path = join(dir, file);
    this.persistent?.changed();
  }
}
