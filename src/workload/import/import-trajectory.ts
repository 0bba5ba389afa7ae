import { readFile } from "node:fs/promises";
import { basename } from "node:path";
import type { TraceProgram } from "../trace.js";
import type { ImportOptions } from "./conversation.js";
import { importClaudeCodeSession, isClaudeCodeLine } from "./import-claude-code.js";
import { importCodexRollout, isCodexMarkerLine } from "./import-codex.js";
import { importMiniSweAgentTraj } from "./import-mini-swe-agent.js";
import { importQwenCodeSession, isQwenCodeLine } from "./import-qwen-code.js";
import { importSweAgentTraj } from "./import-swe-agent.js";
import { type LogLine, parseJsonLines, requireWholeLines, type SessionImport } from "./session-log.js";

export type TrajectoryFormat = "swe-agent" | "mini-swe-agent";
export type SessionLogFormat = "claude-code" | "codex" | "qwen-code";

/** What `trace import` reads, for its messages. */
export const IMPORTED_FORMATS =
  "a SWE-agent or mini-swe-agent trajectory, nor a Claude Code, Codex or Qwen Code session log or an opencode export";

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
  if (format === null) throw new Error(`${path}: not ${IMPORTED_FORMATS}`);
  try {
    return format === "swe-agent" ? importSweAgentTraj(data, options) : importMiniSweAgentTraj(data, options);
  } catch (err) {
    throw new Error(`${path}: ${(err as Error).message}`);
  }
}

export async function importTrajectoryFile(path: string, options: ImportOptions = {}): Promise<TraceProgram> {
  return importTrajectory(path, await readTrajectoryJson(path), options);
}

/**
 * Told by content: a Codex rollout has `session_meta` or `token_count` lines; Claude Code and Qwen Code
 * user/assistant lines, with Anthropic and Gemini-style messages.
 */
export function detectSessionLogFormat(lines: readonly LogLine[]): SessionLogFormat | null {
  if (lines.some(isCodexMarkerLine)) return "codex";
  if (lines.some(isClaudeCodeLine)) return "claude-code";
  if (lines.some(isQwenCodeLine)) return "qwen-code";
  return null;
}

const SESSION_IMPORTERS: Readonly<
  Record<SessionLogFormat, (path: string, lines: readonly LogLine[], options: ImportOptions) => SessionImport>
> = {
  codex: importCodexRollout,
  "claude-code": importClaudeCodeSession,
  "qwen-code": importQwenCodeSession,
};

/**
 * The programs of a JSON Lines session log's text; null when it is no Claude Code, Codex or Qwen Code log and
 * `named` is false (a file found in a directory), else throws. Errors name the file.
 */
export function importSessionLog(
  path: string,
  text: string,
  named: boolean,
  options: ImportOptions = {},
): SessionImport | null {
  const log = parseJsonLines(text);
  const lines = log.lines.map((l) => l.line);
  const format = detectSessionLogFormat(lines);
  if (format === null) {
    if (!named) return null;
    throw new Error(`${path}: not ${IMPORTED_FORMATS}`);
  }
  try {
    requireWholeLines(log);
    return SESSION_IMPORTERS[format](path, lines, options);
  } catch (err) {
    throw new Error(`${path}: ${(err as Error).message}`);
  }
}
