import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import type { ImportOptions } from "./conversation.js";
import { importMiniSweAgentTraj } from "./import-mini-swe-agent.js";
import { importSweAgentTraj } from "./import-swe-agent.js";
import type { TraceProgram } from "./trace.js";

export type TrajectoryFormat = "swe-agent" | "mini-swe-agent";

/** `.traj.json` is mini-swe-agent, `.traj` SWE-agent; other names are told apart by their keys. */
export function detectTrajectoryFormat(fileName: string, data: unknown): TrajectoryFormat | null {
  const name = basename(fileName);
  if (name.endsWith(".traj.json")) return "mini-swe-agent";
  if (name.endsWith(".traj")) return "swe-agent";
  if (typeof data !== "object" || data === null) return null;
  if (Array.isArray((data as { trajectory?: unknown }).trajectory)) return "swe-agent";
  if (Array.isArray((data as { messages?: unknown }).messages)) return "mini-swe-agent";
  return null;
}

/** The parsed JSON of a trajectory file: its content, or an error naming the file. */
export async function readTrajectoryJson(path: string): Promise<unknown> {
  try {
    return JSON.parse(await readFile(path, "utf8"));
  } catch (err) {
    throw new Error(`${path}: ${(err as Error).message}`);
  }
}

/** The trace program of a trajectory file's parsed content; errors name the file. */
export function importTrajectory(path: string, data: unknown, options: ImportOptions = {}): TraceProgram {
  const format = detectTrajectoryFormat(path, data);
  if (format === null) throw new Error(`${path}: neither a SWE-agent nor a mini-swe-agent trajectory`);
  try {
    return format === "swe-agent" ? importSweAgentTraj(data, options) : importMiniSweAgentTraj(data, options);
  } catch (err) {
    throw new Error(`${path}: ${(err as Error).message}`);
  }
}

export async function importTrajectoryFile(path: string, options: ImportOptions = {}): Promise<TraceProgram> {
  return importTrajectory(path, await readTrajectoryJson(path), options);
}
