import { writeFileSync } from "node:fs";
import { basename } from "node:path";
import { Command } from "commander";
import {
  analyzeRecorderLog,
  formatRecorderReport,
  type RecorderReport,
  toAnalyzeResults,
} from "../../analysis/recorder/recorder-analysis.js";
import { type ReportRun, renderReportHtml } from "../../analysis/report-html.js";
import { summarize } from "../../analysis/stats.js";

function reportRun(path: string, report: RecorderReport): ReportRun {
  const jcts = Object.values(report.jctByJobS);
  const s = summarize(jcts);
  return {
    label: basename(path),
    jps: 0,
    jct: { mean: s.mean, p50: s.p50, p90: s.p90, p95: s.p95, p99: s.p99 },
    throughputJps: report.jobs.totalDurationS > 0 ? report.jobs.numJobs / report.jobs.totalDurationS : 0,
    hitRatio: report.cache.hitRatio,
    completed: report.jobs.numJobs,
    programs: report.jobs.numJobs,
    jcts,
    extra: { "queue mean (s)": report.queueWaitS.mean.toFixed(2), format: report.format },
  };
}

export function analyzeCommand(): Command {
  return new Command("analyze")
    .description(
      "statistics of recorder exports (ours, JSONL from `serve --record` or `simulate --record`, or the authors' fork scheduler_timestamps), like analyze.py",
    )
    .argument("<logs...>", "one or more recorder logs; several are compared side by side in the report")
    .option("--json", "print analyze.py's results.json keys on stdout (one object per log)", false)
    .option("--out <results.json>", "also write analyze.py's results.json (first log)")
    .option("--report <file.html>", "write an HTML report with every log side by side")
    .action(async (logs: string[], o: { json: boolean; out?: string; report?: string }) => {
      const reports = await Promise.all(logs.map((log) => analyzeRecorderLog(log)));
      const first = reports[0] as RecorderReport;
      if (o.out) writeFileSync(o.out, `${JSON.stringify(toAnalyzeResults(first), null, 2)}\n`);
      if (o.json) {
        const results = reports.map((r) => toAnalyzeResults(r));
        process.stdout.write(`${JSON.stringify(results.length === 1 ? results[0] : results, null, 2)}\n`);
      } else {
        process.stdout.write(
          reports.map((r, i) => `# ${logs[i]}\n${formatRecorderReport(r)}`).join("\n\n") + "\n",
        );
      }
      if (o.report) {
        const runs = reports.map((r, i) => reportRun(logs[i] as string, r));
        writeFileSync(o.report, await renderReportHtml({ title: "continuum analyze", settings: logs, runs }));
        process.stderr.write(`# report written to ${o.report}\n`);
      }
    });
}
