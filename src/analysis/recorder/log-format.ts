import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import type { LogFormat } from "./recorder-report.js";

/**
 * Our JSONL log has a complete event object on its first line; the fork's scheduler_timestamps is one
 * JSON object keyed by job id (pretty-printed or not). An empty file counts as an empty JSONL log.
 */
export async function detectLogFormat(path: string): Promise<LogFormat> {
  const lines = createInterface({
    input: createReadStream(path, "utf8"),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  try {
    for await (const line of lines) {
      if (line.trim() === "") continue;
      return isEventLine(line) ? "jsonl" : "fork";
    }
    return "jsonl";
  } finally {
    lines.close();
  }
}

function isEventLine(line: string): boolean {
  try {
    const value: unknown = JSON.parse(line);
    return (
      typeof value === "object" && value !== null && typeof (value as { event?: unknown }).event === "string"
    );
  } catch {
    return false;
  }
}
