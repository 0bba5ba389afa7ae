import { statfs } from "node:fs/promises";
import { formatBytes } from "./generation-progress.js";

/** Bytes an unprivileged process may still write on the filesystem holding `dir`. */
export async function freeDiskBytes(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

/** Throws a message the user can act on unless `dir` has room for `bytes` more of `what`. */
export async function assertDiskSpace(dir: string, bytes: number, what: string): Promise<void> {
  const free = await freeDiskBytes(dir);
  if (free >= bytes) return;
  throw new Error(
    `not enough disk space for ${what}: it needs ${formatBytes(bytes)}, but ${dir} has ${formatBytes(free)} free ` +
      "(free some space, or point CONTINUUM_CACHE_DIR at a larger disk)",
  );
}
