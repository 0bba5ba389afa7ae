import { writeFileSync } from "node:fs";
import { Command } from "commander";
import { analyzeRecorderLog, formatRecorderReport, toAnalyzeResults } from "../analysis/recorder-analysis.js";

export function analyzeCommand(): Command {
  return new Command("analyze")
    .description(
      "statistics of a recorder export (ours, JSONL, or the authors' fork scheduler_timestamps), like analyze.py",
    )
    .argument("<log>", "recorder log: <path>.jsonl from --record, or a scheduler_timestamps JSON")
    .option("--json", "print analyze.py's results.json keys on stdout", false)
    .option("--out <results.json>", "also write analyze.py's results.json")
    .action(async (log: string, o: { json: boolean; out?: string }) => {
      const report = await analyzeRecorderLog(log);
      const results = toAnalyzeResults(report);
      if (o.out) writeFileSync(o.out, `${JSON.stringify(results, null, 2)}\n`);
      process.stdout.write(
        o.json ? `${JSON.stringify(results, null, 2)}\n` : `${formatRecorderReport(report)}\n`,
      );
    });
}
