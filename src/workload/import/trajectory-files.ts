import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import type { ImportOptions } from "./conversation.js";
import { importOpencodeExport, isOpencodeExport } from "./import-opencode.js";
import {
  detectTrajectoryFormat,
  importSessionLog,
  importTrajectory,
  readTrajectoryJson,
} from "./import-trajectory.js";
import type { SessionImport } from "./session-log.js";

export interface TrajectoryFile {
  path: string;
  /** named itself (imported whatever its name), not found in a directory */
  named: boolean;
}

/**
 * `.traj` is SWE-agent's, `.traj.json` mini-swe-agent's; other JSON is looked into, and so is JSON Lines
 * (Claude Code's and Codex's session logs).
 */
function mayBeTrajectory(name: string): boolean {
  return name.endsWith(".traj") || name.endsWith(".json") || name.endsWith(".jsonl");
}

const isJsonLines = (path: string) => path.endsWith(".jsonl");

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const files: string[] = [];
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...(await filesUnder(path)));
    else if (entry.isFile() && mayBeTrajectory(entry.name)) files.push(path);
  }
  return files;
}

/**
 * The files `paths` name: a file as it is, a directory's files ending `.traj`, `.traj.json`, `.json`
 * or `.jsonl`, recursively, in name order. Throws for a path that does not exist.
 */
export async function findTrajectoryFiles(paths: readonly string[]): Promise<TrajectoryFile[]> {
  const found: TrajectoryFile[] = [];
  for (const path of paths) {
    const info = await stat(path).catch(() => null);
    if (info === null) throw new Error(`${path}: no such file or directory`);
    if (info.isDirectory()) found.push(...(await filesUnder(path)).map((p) => ({ path: p, named: false })));
    else found.push({ path, named: true });
  }
  return found;
}

/**
 * The programs of a trajectory file, an opencode export or a session log (`.jsonl`); null for a file found
 * in a directory that is none of them (a run's `preds.json` beside its trajectories, other JSON Lines logs).
 * Throws, naming the file, when it cannot be imported.
 */
export async function importFoundTrajectory(
  file: TrajectoryFile,
  options: ImportOptions = {},
): Promise<SessionImport | null> {
  if (isJsonLines(file.path)) {
    let text: string;
    try {
      text = await readFile(file.path, "utf8");
    } catch (err) {
      throw new Error(`${file.path}: ${(err as Error).message}`);
    }
    return importSessionLog(file.path, text, file.named, options);
  }
  const data = await readTrajectoryJson(file.path);
  if (isOpencodeExport(data)) {
    try {
      return importOpencodeExport(file.path, data, options);
    } catch (err) {
      throw new Error(`${file.path}: ${(err as Error).message}`);
    }
  }
  if (!file.named && detectTrajectoryFormat(file.path, data) === null) return null;
  const program = importTrajectory(file.path, data, options);
  return { programs: [program], responsesWithoutUsage: 0, sessionsWithoutResponse: 0 };
}
