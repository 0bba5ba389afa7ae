import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import { eventFromLine, type RecorderEvent } from "./events.js";

/** Streams a JSONL recorder log line by line; memory use does not grow with the file. */
export async function* readEventLog(path: string): AsyncGenerator<RecorderEvent> {
  const lines = createInterface({
    input: createReadStream(path, "utf8"),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  let lineNumber = 0;
  try {
    for await (const line of lines) {
      lineNumber++;
      if (line.trim() === "") continue;
      try {
        yield eventFromLine(line);
      } catch (error) {
        throw new Error(`${path}:${lineNumber}: ${(error as Error).message}`);
      }
    }
  } finally {
    lines.close();
  }
}
