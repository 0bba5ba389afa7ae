import { writeFileSync } from "node:fs";
import { Command } from "commander";
import { renderReportHtml } from "../../analysis/report-html.js";
import {
  buildFigure,
  FIGURE_IDS,
  type Figure,
  panelComparisons,
  panelRatios,
  TIE_TOLERANCE,
} from "../../sim/figures.js";
import type { PointResult } from "../../sim/simulate.js";
import { runSweepSettled } from "../../sim/sweep.js";
import { positiveInt } from "../sim-options.js";
import { reportFailures, reportRunOf } from "./sim-output.js";

function range(xs: readonly number[]): string {
  const finite = xs.filter(Number.isFinite);
  if (finite.length === 0) return "n/a";
  return `${Math.min(...finite).toFixed(2)}-${Math.max(...finite).toFixed(2)}x`;
}

function listOrNone(xs: readonly number[]): string {
  return xs.length === 0 ? "none" : xs.join(", ");
}

function printFigure(figure: Figure, results: readonly (PointResult | undefined)[]): string[] {
  const lines = [`== ${figure.title}`, `paper: ${figure.paperClaim}`];
  let offset = 0;
  const allJct: number[] = [];
  const allThroughput: number[] = [];
  let losses = 0;
  const losers = new Set<string>();
  for (const panel of figure.panels) {
    const slice = results.slice(offset, offset + panel.jobs.length);
    offset += panel.jobs.length;
    const policies = [...new Set(panel.jobs.map((j) => j.job.policy))];
    const xs = [...new Set(panel.jobs.map((j) => j.x))];
    lines.push(`-- ${panel.title}  (${figure.metric} JCT in s; rows: ${panel.xLabel})`);
    lines.push([panel.xLabel.padEnd(12), ...policies.map((p) => p.padStart(17))].join(" "));
    for (const x of xs) {
      const cells = policies.map((policy) => {
        const r = slice[panel.jobs.findIndex((j) => j.x === x && j.job.policy === policy)];
        if (!r) return "failed".padStart(17);
        const value = figure.metric === "mean" ? r.jct.mean : r.jct[figure.metric];
        const incomplete = r.completed < r.programs ? "*" : "";
        return `${value.toFixed(1)}${incomplete}`.padStart(17);
      });
      lines.push([String(x).padEnd(12), ...cells].join(" "));
    }
    const ratios = panelRatios(panel, slice, figure.metric);
    allJct.push(...ratios.map((r) => r.jctRatio));
    allThroughput.push(...ratios.map((r) => r.throughputRatio));
    lines.push(
      `   ${panel.baseline}/${panel.ours} ${figure.metric} JCT ratio ${range(ratios.map((r) => r.jctRatio))}` +
        ` (lightest ${ratios[0]?.jctRatio.toFixed(2)}x, heaviest ${ratios[ratios.length - 1]?.jctRatio.toFixed(2)}x),` +
        ` throughput ratio ${range(ratios.map((r) => r.throughputRatio))}`,
    );
    const { comparisons, tiedXs } = panelComparisons(panel, slice, figure.metric);
    for (const c of comparisons) {
      lines.push(
        `   ${c.policy}/${panel.ours}: ${range(c.ratios.map((r) => r.ratio))}; ${panel.ours} wins at ${listOrNone(c.wins)}, loses at ${listOrNone(c.losses)}`,
      );
      losses += c.losses.length;
      if (c.losses.length > 0) losers.add(c.policy);
    }
    if (tiedXs.length > 0)
      lines.push(
        `   every policy within ${TIE_TOLERANCE * 100}% of every other at ${panel.xLabel} ${tiedXs.join(", ")}: a tie, the figure shows nothing there`,
      );
  }
  lines.push(
    `ours overall: ${figure.metric} JCT ${range(allJct)} lower than the baseline, throughput ${range(allThroughput)}`,
  );
  lines.push(
    losses === 0
      ? "ours loses to no policy at any point"
      : `ours LOSES at ${losses} point(s), to ${[...losers].join(", ")}`,
  );
  lines.push("(* = some programs unfinished at the end of the run)");
  return lines;
}

export function reproduceCommand(): Command {
  return new Command("reproduce")
    .description(`re-run one of the paper's evaluation figures in the simulator: ${FIGURE_IDS.join(", ")}`)
    .argument("<figure>", `one of ${FIGURE_IDS.join(", ")}`)
    .option("--programs <n>", "agent programs per point", positiveInt, 200)
    .option("--seed <n>", "seed", (v) => Number.parseInt(v, 10), 1)
    .option("--trace <file>", "use this SWE-bench-like trace instead of the generated SWE-bench workload")
    .option("--threads <n>", "worker threads (default: one per core)", positiveInt)
    .option("--report <file.html>", "HTML report path", "continuum-reproduce.html")
    .option("--no-report", "do not write the HTML report")
    .action(
      async (
        id: string,
        o: { programs: number; seed: number; trace?: string; threads?: number; report: string | false },
      ) => {
        const figure = buildFigure(id, o);
        const jobs = figure.panels.flatMap((p) => p.jobs.map((j) => j.job));
        process.stderr.write(
          `# ${figure.title}: ${jobs.length} simulation points, ${o.programs} programs each, seed ${o.seed}\n`,
        );
        const startMs = performance.now();
        const { results, failures } = await runSweepSettled(jobs, {
          threads: o.threads,
          onProgress: (done, total) => {
            if (done % Math.max(1, Math.floor(total / 10)) === 0 || done === total) {
              process.stderr.write(
                `# ${done}/${total} points (${((performance.now() - startMs) / 1000).toFixed(0)} s)\n`,
              );
            }
          },
        });
        reportFailures(failures);
        process.stdout.write(`${printFigure(figure, results).join("\n")}\n`);
        if (o.report !== false) {
          let offset = 0;
          const runs = figure.panels.flatMap((panel) =>
            panel.jobs.flatMap((j) => {
              const r = results[offset++];
              return r ? [{ ...reportRunOf(r.policy, j.x, r), group: panel.title }] : [];
            }),
          );
          const panels = new Map(
            figure.panels.map((p) => [p.title, { baseline: p.baseline, xTitle: p.xLabel }] as const),
          );
          const settings = [
            figure.paperClaim,
            `${o.programs} programs per point, seed ${o.seed}, ${o.trace ? `trace ${o.trace}` : "generated workloads"}`,
          ];
          writeFileSync(
            o.report,
            await renderReportHtml({ title: figure.title, settings, runs, panels, metric: figure.metric }),
          );
          process.stderr.write(`# report written to ${o.report}\n`);
        }
      },
    );
}
