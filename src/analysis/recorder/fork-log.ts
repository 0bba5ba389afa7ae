import { readFile } from "node:fs/promises";
import { z } from "zod";
import { type ForkEntry, forkKeys } from "../../core/recorder/fork-format.js";
import type { LogEntry } from "./recorder-report.js";

const forkSchema = z.record(z.string(), z.array(z.record(z.string(), z.number())));

/**
 * Reads the fork's `scheduler_timestamps` JSON into log entries, job by job in recording order.
 * The fork keeps no request ids, so each arrival opens a synthetic request that later entries of the
 * job belong to; this pairs a waiting_to_running with the job's latest preceding arrival.
 * Entries with none of the fork's time keys are skipped.
 */
export async function readForkLog(path: string): Promise<LogEntry[]> {
  const parsed = forkSchema.safeParse(JSON.parse(await readFile(path, "utf8")));
  if (!parsed.success)
    throw new Error(`${path} is not a scheduler_timestamps file: ${z.prettifyError(parsed.error)}`);
  const entries: LogEntry[] = [];
  for (const [programId, history] of Object.entries(parsed.data)) {
    let arrivals = 0;
    for (const raw of history) {
      if (raw[forkKeys.arrival] !== undefined) arrivals++;
      const entry = fromForkEntry(raw, programId, `arrival-${arrivals}`);
      if (entry) entries.push(entry);
    }
  }
  return entries;
}

const admissionKeys = [
  [forkKeys.waitingToRunning, "waiting_to_running"],
  [forkKeys.evictedToRunning, "evicted_to_running"],
] as const;

const timestampKeys = [
  [forkKeys.arrival, "arrival"],
  [forkKeys.preempted, "preempted"],
  [forkKeys.departure, "departure"],
  [forkKeys.pinned, "pinned"],
  [forkKeys.unpinned, "unpinned"],
] as const;

function fromForkEntry(raw: ForkEntry, programId: string, requestId: string): LogEntry | undefined {
  for (const [key, kind] of admissionKeys) {
    const timeS = raw[key];
    if (timeS === undefined) continue;
    const promptTokens = raw[forkKeys.promptLength] ?? 0;
    const hitTokens = raw[forkKeys.hitLength] ?? 0;
    return { kind, programId, requestId, timeS, promptTokens, hitTokens };
  }
  for (const [key, kind] of timestampKeys) {
    const timeS = raw[key];
    if (timeS !== undefined) return { kind, programId, requestId, timeS };
  }
  return undefined;
}
