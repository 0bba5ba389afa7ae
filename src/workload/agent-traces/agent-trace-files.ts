import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { AgentTrace } from "./agent-trace.js";
import { looksLikeMooncakeLine, MOONCAKE_BLOCK_SIZE, parseMooncakeJsonl } from "./mooncake-trace.js";
import { looksLikeWekaTrace, parseWekaTrace, wekaTraceJson } from "./weka-trace.js";

/** What a file holds, told by its content (never its name). */
export type AgentTraceFileKind = "weka" | "weka-jsonl" | "mooncake";

export interface AgentTraceLoad {
  readonly traces: AgentTrace[];
  /** `<path>[:line]: [trace <id>: ]<field>: <message>`, one per session left out */
  readonly problems: string[];
  /** files read, and the other files of a directory that held no agent trace (named, not read as traces) */
  readonly files: string[];
  readonly ignored: string[];
}

export interface AgentTraceLoadOptions {
  /** tokens per hash id of Mooncake files (default 512) */
  readonly mooncakeBlockSize?: number;
}

function firstLineJson(text: string): unknown {
  for (const line of text.split("\n")) {
    const trimmed = line.trim();
    if (trimmed === "") continue;
    try {
      return JSON.parse(trimmed);
    } catch {
      return undefined;
    }
  }
  return undefined;
}

/** The agent trace format of a file's text, or null for anything else (a program trace, a session log). */
export function detectAgentTraceText(text: string): AgentTraceFileKind | null {
  const start = text.trimStart();
  if (start.startsWith("{")) {
    try {
      if (looksLikeWekaTrace(JSON.parse(start))) return "weka";
    } catch {
      // not one JSON document: JSON Lines, looked at line by line below
    }
  }
  const first = firstLineJson(text);
  if (looksLikeWekaTrace(first)) return "weka-jsonl";
  if (looksLikeMooncakeLine(first)) return "mooncake";
  return null;
}

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) =>
    a.name.localeCompare(b.name),
  )) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(path));
    else if (entry.isFile() && /\.jsonl?$/.test(entry.name)) out.push(path);
  }
  return out;
}

/** Does this path (a file, or a directory holding one) hold agent traces in a format read here? */
export function isAgentTraceSource(path: string): boolean {
  const files = statSync(path).isDirectory() ? filesUnder(path) : [path];
  return files.some((file) => detectAgentTraceText(readFileSync(file, "utf8")) !== null);
}

/**
 * Agent traces from files and directories (searched for .json and .jsonl, sorted by name). A session
 * with a bad field is left out and named in `problems` with its path and the field; the rest load. In a
 * directory, a file in no agent trace format is listed in `ignored`; one named directly is a problem.
 */
export function loadAgentTraces(
  paths: readonly string[],
  options: AgentTraceLoadOptions = {},
): AgentTraceLoad {
  const traces: AgentTrace[] = [];
  const problems: string[] = [];
  const files: string[] = [];
  const ignored: string[] = [];
  for (const path of paths) {
    const direct = !statSync(path).isDirectory();
    for (const file of direct ? [path] : filesUnder(path)) {
      const text = readFileSync(file, "utf8");
      const kind = detectAgentTraceText(text);
      if (kind === null) {
        if (direct)
          problems.push(
            `${file}: not a Weka trace (id, block_size, requests) nor Mooncake JSONL (input_length)`,
          );
        else ignored.push(file);
        continue;
      }
      files.push(file);
      if (kind === "mooncake") {
        const parsed = parseMooncakeJsonl(text, file, options.mooncakeBlockSize ?? MOONCAKE_BLOCK_SIZE);
        traces.push(...parsed.traces);
        problems.push(...parsed.problems);
        continue;
      }
      const documents = kind === "weka" ? [{ where: file, text }] : jsonLines(file, text);
      for (const { where, text: json } of documents) {
        let value: unknown;
        try {
          value = JSON.parse(json);
        } catch (error) {
          problems.push(`${where}: invalid JSON (${(error as Error).message})`);
          continue;
        }
        const parsed = parseWekaTrace(value);
        if (parsed.ok) traces.push(parsed.trace);
        else problems.push(`${where}: ${parsed.id === null ? "" : `trace ${parsed.id}: `}${parsed.problem}`);
      }
    }
  }
  return { traces, problems, files, ignored };
}

function jsonLines(file: string, text: string): { where: string; text: string }[] {
  return text
    .split("\n")
    .map((line, i) => ({ where: `${file}:${i + 1}`, text: line.trim() }))
    .filter((line) => line.text !== "");
}

/** Traces as Weka JSON Lines, one session tree per line: what `trace import` writes and `--trace` reads. */
export function serializeAgentTracesJsonl(traces: readonly AgentTrace[]): string {
  return traces.map((trace) => `${JSON.stringify(wekaTraceJson(trace))}\n`).join("");
}
