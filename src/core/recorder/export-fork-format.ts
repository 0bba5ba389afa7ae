import { writeFileAtomically } from "./atomic-file.js";
import { type ForkEntry, toForkEntry } from "./fork-format.js";
import { readEventLog } from "./read-event-log.js";

export interface ForkExportOptions {
  /** Added to every time, e.g. the Unix time at which the recorder's clock read 0. */
  epochOffsetS: number;
}

const chunkChars = 64 * 1024;

/**
 * Converts a JSONL recorder log into the fork's `scheduler_timestamps` JSON so the authors' analyze.py
 * can read it. outPath appears only once complete.
 */
export async function exportForkFormat(
  jsonlPath: string,
  outPath: string,
  { epochOffsetS }: ForkExportOptions,
): Promise<void> {
  // The output is one JSON object keyed by job, so the entries (not the raw lines) are held until written.
  const jobs = new Map<string, ForkEntry[]>();
  for await (const event of readEventLog(jsonlPath)) {
    const entry = toForkEntry(event, epochOffsetS);
    if (!entry) continue;
    let entries = jobs.get(event.programId);
    if (!entries) {
      entries = [];
      jobs.set(event.programId, entries);
    }
    entries.push(entry);
  }

  await writeFileAtomically(outPath, async (write) => {
    let chunk = "{";
    let firstJob = true;
    for (const [jobId, entries] of jobs) {
      chunk += `${firstJob ? "" : ","}\n  ${JSON.stringify(jobId)}: [`;
      firstJob = false;
      entries.forEach((entry, i) => {
        chunk += `${i === 0 ? "" : ","}\n    ${JSON.stringify(entry)}`;
      });
      chunk += "\n  ]";
      if (chunk.length >= chunkChars) {
        await write(chunk);
        chunk = "";
      }
    }
    await write(chunk + (firstJob ? "}\n" : "\n}\n"));
  });
}
