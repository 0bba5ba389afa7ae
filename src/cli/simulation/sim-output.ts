import { writeFileSync } from "node:fs";
import { SingleBar } from "cli-progress";
import { JCT_HEAD, jctCells, loadLabel } from "../../analysis/jct-columns.js";
import { type LoadCeiling, type ReportRun, renderReportHtml } from "../../analysis/report-html.js";
import { ceilingWarning } from "../../analysis/report-run.js";
import { formatTextTable } from "../../analysis/text-table.js";
import { loadPolicyModules } from "../../policies/index.js";
import { ceilingOf } from "../../sim/capacity.js";
import { type PointJob, resolveHardware, validateJobInputs } from "../../sim/point-job.js";
import type { PointResult } from "../../sim/simulate.js";
import { type PointFailure, runSweepSettled, type SweepProgress } from "../../sim/sweep.js";
import { describeSettings, engineOf, hardwareOf, type SimCliOptions, workloadOf } from "../sim-options.js";

/** The stable JSON shape of simulate/sweep (times in seconds). */
export function toJsonResult(r: PointResult) {
  return {
    policy: r.policy,
    jps: r.jps,
    programs: r.programs,
    completed: r.completed,
    jct: r.jct,
    throughput_jps: r.throughput_jps,
    makespan_s: r.makespan_s,
    hit_ratio: r.hit_ratio,
    reusable_share: r.reusable_share,
    preemptions: r.preemptions,
    queue_delay: r.queue_delay,
    ttft: r.ttft,
    first_turn_ttft: r.first_turn_ttft,
    prefill_tokens_saved: r.prefill_tokens_saved,
    reload_tokens: r.reload_tokens,
    pins: r.pins,
    ttl: r.ttl,
    steps: r.steps,
    gpu: r.gpu,
    ...(r.gateway ? { gateway: r.gateway } : {}),
  };
}

const fmt = (x: number, digits = 1) => x.toFixed(digits);

export function formatTable(results: readonly PointResult[]): string {
  const head = ["policy", ...JCT_HEAD, "hit", "queue(s)", "preempt", "pins", "busy", "seqs/step"];
  const rows = results.map((r) => [
    r.policy,
    ...jctCells(r, 1),
    fmt(r.hit_ratio, 3),
    fmt(r.queue_delay.mean, 2),
    String(r.preemptions),
    String(r.pins.created),
    fmt(r.gpu.busy_fraction, 2),
    fmt(r.gpu.sequences_per_step, 1),
  ]);
  return formatTextTable(head, rows);
}

/** A simulation point as a run of the HTML report. */
export function reportRunOf(label: string, jps: number, r: PointResult): ReportRun {
  return {
    label,
    jps,
    jct: r.jct,
    throughputJps: r.throughput_jps,
    hitRatio: r.hit_ratio,
    completed: r.completed,
    programs: r.programs,
    jcts: r.jcts,
  };
}

/** Runs the jobs with a progress bar (stderr), then prints the table or JSON and writes the report. */
export async function runAndPrint(
  o: SimCliOptions,
  jobs: readonly PointJob[],
  title: string,
): Promise<PointResult[]> {
  await loadPolicyModules(o.policies);
  validateJobInputs(workloadOf(o), hardwareOf(o), engineOf(o));
  const { kvBoundJps, boundJps } = ceilingOf(
    { workload: workloadOf(o), engine: engineOf(o) },
    o.seed,
    resolveHardware(hardwareOf(o)),
  );
  const ceiling: LoadCeiling = { jps: kvBoundJps, fullBatchJps: boundJps };
  const settings = [
    ...describeSettings(o),
    `simulator's ceiling for this setup: ${kvBoundJps.toPrecision(3)} jobs/s (${boundJps.toPrecision(3)} with full decode batches)`,
  ];
  for (const s of settings) process.stderr.write(`# ${s}\n`);
  const past = [...new Set(jobs.map((j) => j.jps))].filter((jps) => jps > ceiling.jps).sort((a, b) => a - b);
  if (past.length > 0) process.stderr.write(`# warning: ${ceilingWarning(ceiling, past)}\n`);
  process.stderr.write(`# policies ${o.policies.join(", ")}; ${jobs.length} simulation points\n`);
  const bar =
    jobs.length > 1 && process.stderr.isTTY
      ? new SingleBar({ format: "simulating [{bar}] {value}/{total} points  {last}", stream: process.stderr })
      : null;
  bar?.start(jobs.length, 0, { last: "" });
  const onProgress: SweepProgress = (done, total, last) => {
    if (bar) bar.update(done, { last: `${last.policy} @ ${loadLabel(last.jps)}` });
    else if (total > 1)
      process.stderr.write(`# ${done}/${total} ${last.policy} @ ${loadLabel(last.jps)} done\n`);
  };
  const startMs = performance.now();
  const outcome = await runSweepSettled(jobs, { threads: o.threads, onProgress });
  bar?.stop();
  const results = outcome.results.filter((r): r is PointResult => r !== undefined);
  reportFailures(outcome.failures);
  const wallS = (performance.now() - startMs) / 1000;
  const steps = results.reduce((sum, r) => sum + r.steps, 0);
  process.stderr.write(
    `# ${steps} simulated engine steps in ${wallS.toFixed(1)} s (${Math.round(steps / wallS)} steps/s)\n`,
  );
  if (o.json) {
    const failures = outcome.failures.map(failureJson);
    const json = { results: results.map(toJsonResult), ...(failures.length > 0 ? { failures } : {}) };
    process.stdout.write(`${JSON.stringify(json, null, 2)}\n`);
  } else process.stdout.write(`${formatTable(results)}\n`);
  if (o.report !== false) {
    const html = await renderReportHtml({
      title,
      settings,
      ceiling,
      runs: results.map((r) => ({
        ...reportRunOf(r.policy, r.jps, r),
        kvUsage: r.kv_usage,
        extra: {
          preemptions: r.preemptions,
          "queue mean (s)": fmt(r.queue_delay.mean, 2),
          pins: r.pins.created,
        },
      })),
    });
    writeFileSync(o.report, html);
    process.stderr.write(`# report written to ${o.report}\n`);
  }
  return results;
}

/** `policy@jps: first line of the error` on stderr for each failed point, and a failing exit code. */
export function reportFailures(failures: readonly PointFailure[]): void {
  for (const f of failures) {
    process.stderr.write(`# FAILED ${f.job.policy} @ ${f.job.jps} jobs/s: ${firstLine(f.error)}\n`);
  }
  if (failures.length > 0) {
    process.stderr.write(`# ${failures.length} point(s) failed; the others' results follow\n`);
    process.exitCode = 1;
  }
}

function failureJson(f: PointFailure) {
  return { policy: f.job.policy, jps: f.job.jps, error: firstLine(f.error) };
}

function firstLine(text: string): string {
  return text.split("\n", 1)[0] ?? text;
}
