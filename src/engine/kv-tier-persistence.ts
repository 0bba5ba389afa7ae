import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomically } from "../core/recorder/atomic-file.js";

/**
 * The disk KV tier kept across restarts (`serve --disk-offload-persist`). Its directory holds the saved
 * states' files, an index of them written at a clean shutdown, and a lock naming the process using it. The
 * index is taken (read, then deleted) at start, so after a crash the next start finds none and deletes the
 * files as orphans rather than trusting an index older than them; a state file the index names that is
 * missing or of another size is skipped. An index written for another model, llama.cpp build or KV setting
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
  readonly lastUse: number;
}

interface TierIndex {
  readonly format: number;
  readonly identity: string;
  readonly states: readonly PersistedState[];
}

const FORMAT = 1;
const INDEX_FILE = "index.json";
const LOCK_FILE = "lock";

/** What a start found in the directory. */
export interface TakenIndex {
  readonly states: PersistedState[];
  /** why an index found was not used (null: used, or none found) */
  readonly discarded: string | null;
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

export function unlockTierDir(dir: string): void {
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

/**
 * Reads and deletes the directory's index: the states it names whose files are whole when `identity` is
 * the one it was written for. Every other file but the lock is deleted.
 */
export function takeIndex(dir: string, identity: string): TakenIndex {
  const indexPath = join(dir, INDEX_FILE);
  let states: PersistedState[] = [];
  let discarded: string | null = null;
  if (existsSync(indexPath)) {
    const index = parseIndex(readFileSync(indexPath, "utf8"));
    if (index === null) discarded = "its index is unreadable";
    else if (index.identity !== identity)
      discarded = "it was written for another model, llama.cpp build or KV setting";
    else states = index.states.filter((s) => fileIsWhole(join(dir, s.file), s.fileBytes));
    rmSync(indexPath);
  }
  const kept = new Set(states.map((s) => s.file));
  for (const name of readdirSync(dir)) {
    if (name !== LOCK_FILE && !kept.has(name)) rmSync(join(dir, name), { recursive: true, force: true });
  }
  return { states, discarded };
}

function fileIsWhole(path: string, bytes: number): boolean {
  try {
    return statSync(path).size === bytes;
  } catch {
    return false;
  }
}

/** Writes the index of the states kept (their files already in the directory). */
export async function writeIndex(
  dir: string,
  identity: string,
  states: readonly PersistedState[],
): Promise<void> {
  const index: TierIndex = { format: FORMAT, identity, states };
  await writeFileAtomically(join(dir, INDEX_FILE), async (write) => write(JSON.stringify(index)));
}
