import { readEventLog } from "../../core/recorder/read-event-log.js";
import { readForkLog } from "./fork-log.js";
import { detectLogFormat } from "./log-format.js";
import { type RecorderReport, ReportBuilder } from "./recorder-report.js";

export { formatRecorderReport, toAnalyzeResults } from "./format-recorder-report.js";
export type { RecorderReport } from "./recorder-report.js";

/**
 * Reproduces the authors' analyze.py (JCT statistics) plus the cache metrics derivable from the log.
 * Accepts our JSONL recorder log (streamed) or the fork's scheduler_timestamps JSON.
 */
export async function analyzeRecorderLog(path: string): Promise<RecorderReport> {
  const format = await detectLogFormat(path);
  const builder = new ReportBuilder(format);
  const entries = format === "jsonl" ? readEventLog(path) : await readForkLog(path);
  for await (const entry of entries) builder.add(entry);
  return builder.build();
}
