import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { readFile, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { crc32 } from "node:zlib";
import { writeFileAtomically } from "../../core/recorder/atomic-file.js";

/**
 * The disk KV tier kept across restarts (`serve --disk-offload-persist`). Its directory holds the saved
 * states' files, an index of them and a lock naming the process using it. The index is rewritten (a temporary
 * file renamed over it) whenever the states on disk change, so a process killed at any point leaves one that
 * names only whole files: a state's file is written before the index names it, and deleted only after an
 * index without it is on disk. Each state's CRC-32 is in the index: a start refuses a file of another size than
 * the index says, a read refuses one whose bytes do not match, each naming the file, and the state is dropped
 * (its program's context is computed again). An index written for another model, llama.cpp build or KV setting
 * (`identity`) is not used: its states would restore into the wrong weights or layout.
 */

/** One saved sequence as the index records it: its tokens, where its hash chain starts, its file. */
export interface PersistedState {
  readonly file: string;
  /** the token ids of positions [0, length), little-endian int32, base64 */
  readonly tokens: string;
  readonly rootHash: number;
  readonly length: number;
  readonly owner: string | null;
  /** bytes the tier is charged for it */
  readonly bytes: number;
  /** the file's size as written */
  readonly fileBytes: number;
  /** CRC-32 of the file's bytes */
  readonly crc32: number;
  readonly lastUse: number;
}

/** What the tier knows of a state it writes: all the index records but the file's size and checksum. */
export type StateRecord = Omit<PersistedState, "file" | "fileBytes" | "crc32" | "lastUse">;

interface TierIndex {
  readonly format: number;
  readonly identity: string;
  readonly states: readonly PersistedState[];
}

const FORMAT = 2;
const INDEX_FILE = "index.json";
const LOCK_FILE = "lock";

/** A state file whose bytes are not the ones saved; its message names the file. */
export class CorruptStateError extends Error {}

/** Bytes checksummed between two yields to the event loop (a large model's state is gigabytes). */
const CRC_CHUNK_BYTES = 16 << 20;

/** CRC-32 of `data`, a chunk at a time so that other work (HTTP, the step loop) goes on meanwhile. */
async function checksum(data: Buffer): Promise<number> {
  let crc = 0;
  for (let at = 0; at < data.length; at += CRC_CHUNK_BYTES) {
    if (at > 0) await new Promise((resolve) => setImmediate(resolve));
    crc = crc32(data.subarray(at, at + CRC_CHUNK_BYTES), crc);
  }
  return crc;
}

export function encodeTokens(ids: readonly number[]): string {
  return Buffer.from(Int32Array.from(ids).buffer).toString("base64");
}

export function decodeTokens(encoded: string): number[] {
  const bytes = Buffer.from(encoded, "base64");
  return Array.from(new Int32Array(bytes.buffer, bytes.byteOffset, Math.floor(bytes.length / 4)));
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Claims the directory for this process; throws when another live process holds it. The lock file is
 * created exclusively, so of two servers starting at once only one gets it; one left by a dead process is
 * taken over.
 */
export function lockTierDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const lock = join(dir, LOCK_FILE);
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(lock, String(process.pid), { flag: "wx" });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 0) throw error;
    }
    const pid = Number.parseInt(readFileSync(lock, "utf8"), 10);
    if (Number.isInteger(pid) && pid !== process.pid && processAlive(pid)) {
      throw new Error(
        `the disk KV tier ${dir} is in use by process ${pid}; give each server its own --disk-offload-dir`,
      );
    }
    rmSync(lock, { force: true });
  }
}

function unlockTierDir(dir: string): void {
  rmSync(join(dir, LOCK_FILE), { force: true });
}

function parseIndex(text: string): TierIndex | null {
  try {
    const index = JSON.parse(text) as Partial<TierIndex>;
    if (index.format !== FORMAT || typeof index.identity !== "string" || !Array.isArray(index.states))
      return null;
    return index as TierIndex;
  } catch {
    return null;
  }
}

/** Why a state file the index names cannot be used, or null when its size is the one written. */
function sizeProblem(path: string, state: PersistedState): string | null {
  let size: number;
  try {
    size = statSync(path).size;
  } catch {
    return `${state.file} is missing`;
  }
  return size === state.fileBytes
    ? null
    : `${state.file} is ${size} bytes, not the ${state.fileBytes} written (truncated or overwritten)`;
}

/** What a start found in the directory. */
export interface OpenedTier {
  /** the states the index names whose files have the size written */
  readonly states: PersistedState[];
  /** why an index found was not used (null: used, or none found) */
  readonly discarded: string | null;
  /** the states of a used index that were not: each naming its file and why */
  readonly rejected: string[];
}

/**
 * A persistent tier's directory, locked for this process: its states' files and their index. The tier asks
 * it to write and read its states' files and tells it when the states on disk change; it keeps the index.
 */
export class PersistentTierDir {
  /** the index's record of each state file it names, by file name */
  private readonly records = new Map<string, Omit<PersistedState, "lastUse">>();
  /** files of states dropped, deleted once an index without them is on disk */
  private retired: string[] = [];
  private writing: Promise<void> = Promise.resolve();
  private queued = false;
  private closed = false;

  private constructor(
    readonly path: string,
    private readonly identity: string,
    /** the states now on disk, by file name, with their last use */
    private readonly onDisk: () => readonly { readonly file: string; readonly lastUse: number }[],
    private readonly report: (message: string) => void,
  ) {}

  /**
   * Locks `path` and reads its index: the states it names whose files have the size written, for `identity`;
   * every other file but the index and the lock is deleted. `onDisk` tells the index's writes which states
   * are on disk; `report` hears each state refused when it is read.
   */
  static open(
    path: string,
    identity: string,
    onDisk: () => readonly { readonly file: string; readonly lastUse: number }[],
    report: (message: string) => void,
  ): { dir: PersistentTierDir; opened: OpenedTier } {
    lockTierDir(path);
    const dir = new PersistentTierDir(path, identity, onDisk, report);
    const indexPath = join(path, INDEX_FILE);
    const states: PersistedState[] = [];
    const rejected: string[] = [];
    let discarded: string | null = null;
    if (existsSync(indexPath)) {
      const index = parseIndex(readFileSync(indexPath, "utf8"));
      if (index === null) discarded = "its index is unreadable";
      else if (index.identity !== identity)
        discarded = "it was written for another model, llama.cpp build or KV setting";
      else {
        for (const state of index.states) {
          const problem = sizeProblem(join(path, state.file), state);
          if (problem === null) {
            states.push(state);
            const { lastUse: _, ...record } = state;
            dir.records.set(state.file, record);
          } else rejected.push(problem);
        }
      }
    }
    const kept = new Set(states.map((s) => s.file));
    for (const name of readdirSync(path)) {
      if (name !== LOCK_FILE && name !== INDEX_FILE && !kept.has(name))
        rmSync(join(path, name), { recursive: true, force: true });
    }
    return { dir, opened: { states, discarded, rejected } };
  }

  /** Writes a state's file; the next index names it with its size and CRC-32. */
  async writeState(file: string, data: Buffer, record: StateRecord): Promise<void> {
    await writeFile(join(this.path, file), data);
    this.records.set(file, { ...record, file, fileBytes: data.length, crc32: await checksum(data) });
  }

  /** A state file's bytes; a CorruptStateError naming it when they are not the ones written. */
  async readState(file: string): Promise<Buffer> {
    const record = this.records.get(file);
    const data = await readFile(join(this.path, file));
    if (record && (data.length !== record.fileBytes || (await checksum(data)) !== record.crc32)) {
      const message = `disk KV tier: ${join(this.path, file)} does not match the checksum it was saved with; its state is not used`;
      this.report(message);
      throw new CorruptStateError(message);
    }
    return data;
  }

  /** A state left the disk: its file goes once an index without it is written. */
  retire(file: string): void {
    this.records.delete(file);
    this.retired.push(file);
    this.changed();
  }

  /**
   * The states on disk changed: the index is written again (one write at a time; changes made meanwhile go
   * in the next one).
   */
  changed(): void {
    if (this.queued || this.closed) return;
    this.queued = true;
    this.writing = this.writing.then(() => this.writeIndex());
  }

  /** Writes the final index (last uses included) and releases the lock. */
  async close(): Promise<void> {
    this.closed = true;
    await this.writing;
    await this.writeIndex();
    unlockTierDir(this.path);
  }

  private async writeIndex(): Promise<void> {
    this.queued = false;
    const retired = this.retired;
    this.retired = [];
    const states: PersistedState[] = [];
    for (const { file, lastUse } of this.onDisk()) {
      const record = this.records.get(file);
      if (record) states.push({ ...record, lastUse });
    }
    const index: TierIndex = { format: FORMAT, identity: this.identity, states };
    try {
      await writeFileAtomically(join(this.path, INDEX_FILE), async (write) => write(JSON.stringify(index)));
    } catch (error) {
      // the index on disk still names the retired files: they stay until a write succeeds
      this.retired.push(...retired);
      this.report(`disk KV tier: its index was not written: ${(error as Error).message}`);
      return;
    }
    await Promise.all(retired.map((file) => unlink(join(this.path, file)).catch(() => {})));
  }
}
