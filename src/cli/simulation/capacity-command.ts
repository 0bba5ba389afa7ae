import { writeFileSync } from "node:fs";
import { Command } from "commander";
import { bestBaseline, fmtRatio, ratiosTo, renderCapacityHtml } from "../../analysis/capacity-report.js";
import { formatTextTable } from "../../analysis/text-table.js";
import { loadPolicyModules } from "../../policies/index.js";
import { type CapacityResult, measureCapacity, REFERENCE_POLICY } from "../../sim/capacity.js";
import type { HardwareProfile } from "../../sim/hardware/profiles.js";
import { resolveHardware, validateJobInputs } from "../../sim/point-job.js";
import { kvPoolTokensOf } from "../../sim/simulate.js";
import { runSweep } from "../../sim/sweep.js";
import {
  addClosedLoopOptions,
  addSimOptions,
  describeSettings,
  engineOf,
  hardwareOf,
  positiveInt,
  positiveNumber,
  type SimCliOptions,
  workloadOf,
} from "../sim-options.js";
import { closedLoopCapacity, refuseSessionTraceWithoutConcurrency } from "./closed-loop-output.js";

interface CapacityCliOptions extends SimCliOptions {
  seeds: number;
  sloFactor: number;
  tolerance: number;
}

/** Baselines a policy of ours is compared with, with and without a CPU tier (issue #13's "same memory"). */
const BASELINES = [
  "vllm",
  "program-fcfs",
  "static-ttl",
  "continuum-heuristic",
  "autellix",
  "cachettl",
  "vllm-offload",
  "infercept",
  "cachettl-offload",
  // the peers of issue #32: program pause/resume, and agent admission as congestion control
  "thunderagent",
  "thunderagent:dynamo",
  "concur",
];

/**
 * Past the KV-limited ceiling a policy cannot run in steady state: a finite run meets the SLO there only
 * because it ends before the backlog shows in the mean JCT.
 */
export function shortRunWarning(r: CapacityResult, programs: number): string | null {
  const past = r.results.filter((p) => p.sustainable_jps > r.kv_bound_jps).map((p) => p.policy);
  if (past.length === 0) return null;
  return `past the KV-limited ceiling (${r.kv_bound_jps.toFixed(4)} jobs/s): ${past.join(", ")}. ${programs} programs end before such a load's backlog shows in the mean JCT; more --programs give the steady-state figure`;
}

/** The KV cache a run had: its element type (a --profile's is the one it was measured with) and its pool. */
export function kvCacheOf(o: SimCliOptions, profile: HardwareProfile) {
  return {
    dtype: o.profile ? "as profiled" : o.kvCacheDtype,
    bytes_per_token: profile.kvBytesPerToken,
    pool_tokens: kvPoolTokensOf(profile, engineOf(o)),
  };
}

/** Each policy's sustainable load beside its ratios to vllm's and to the best measured baseline's. */
export function capacityTable(r: CapacityResult, kv: ReturnType<typeof kvCacheOf>): string {
  const reference = r.results.find((p) => p.policy === REFERENCE_POLICY);
  const best = bestBaseline(r.results, BASELINES);
  const vsReference = ratiosTo(r.results, reference?.sustainable_jps ?? 0);
  const vsBest = ratiosTo(r.results, best?.sustainable_jps ?? 0);
  const rows = r.results.map((p, i) => [
    p.policy,
    p.sustainable_jps.toFixed(4),
    fmtRatio(vsReference[i] as number, "x"),
    fmtRatio(vsBest[i] as number, "x"),
    (p.sustainable_jps / r.bound_jps).toFixed(2),
    p.sustainable_by_seed.map((x) => x.toFixed(4)).join(" "),
    p.light_jct_s.toFixed(1),
    p.jct_at_ref_s.toFixed(1),
    p.p99_jct_at_ref_s.toFixed(1),
    p.p99_first_turn_ttft_at_ref_s.toFixed(1),
    p.max_first_turn_ttft_at_ref_s.toFixed(1),
    p.max_program_wait_at_ref_s.toFixed(1),
  ]);
  return [
    formatTextTable(
      [
        "policy",
        "sustainable",
        `/${REFERENCE_POLICY}`,
        "/best",
        "/ceiling",
        "per seed",
        "light JCT s",
        "JCT@ref s",
        "p99@ref s",
        "p99 1st-turn wait@ref s",
        "longest 1st-turn wait@ref s",
        "longest program wait@ref s",
      ],
      rows,
    ),
    `best baseline: ${best ? `${best.policy} ${best.sustainable_jps.toFixed(4)} jobs/s` : "none measured"}; physical ceiling ${r.bound_jps.toFixed(4)} jobs/s (${r.kv_bound_jps.toFixed(4)} with decode batches the KV pool holds); reference load ${r.ref_jps.toFixed(4)} jobs/s (0.8 x vllm's sustainable); SLO mean JCT <= ${r.slo_jct_s.toFixed(1)} s`,
    `KV cache ${kv.dtype}: ${kv.bytes_per_token} bytes per token, a pool of ${kv.pool_tokens} tokens per replica`,
  ].join("\n");
}

export function capacityCommand(): Command {
  const command = new Command("capacity")
    .description(
      "sustainable load per policy: the largest arrival rate whose mean JCT stays within slo-factor x the light-load mean JCT (bisection, median over seeds), beside the physical ceiling",
    )
    .option("--seeds <k>", "seeds per policy (seed, seed+1, ...); the median decides", positiveInt, 3)
    .option(
      "--slo-factor <f>",
      "mean JCT bound as a multiple of vllm's light-load mean JCT",
      positiveNumber,
      3,
    )
    .option("--tolerance <f>", "relative precision of the bisection", positiveNumber, 0.02);
  addSimOptions(command, { policies: "vllm,program-fcfs,cachettl", programs: 500 });
  addClosedLoopOptions(
    command,
    "closed-loop replay of --trace's session trees (AgentX): the largest concurrency tried; capacity is then the largest concurrency whose P90 interactivity meets --interactivity-floor, per policy",
  );
  return command.action(async (o: CapacityCliOptions) => {
    if (o.concurrency !== undefined) return closedLoopCapacity(o, command);
    refuseSessionTraceWithoutConcurrency(o);
    await loadPolicyModules(o.policies);
    validateJobInputs(workloadOf(o), hardwareOf(o), engineOf(o));
    const profile = resolveHardware(hardwareOf(o));
    const kvCache = kvCacheOf(o, profile);
    const settings = [
      ...describeSettings(o),
      `SLO: mean JCT <= ${o.sloFactor} x vllm's light-load mean JCT; ${o.seeds} seeds; bisection to ${o.tolerance * 100}%`,
    ];
    for (const s of settings) process.stderr.write(`# ${s}\n`);
    const startMs = performance.now();
    const result = await measureCapacity({
      template: { workload: workloadOf(o), hardware: hardwareOf(o), engine: engineOf(o) },
      policies: o.policies,
      seeds: Array.from({ length: o.seeds }, (_, i) => o.seed + i),
      sloFactor: o.sloFactor,
      tolerance: o.tolerance,
      profile,
      run: (jobs) => runSweep(jobs, { threads: o.threads }),
      onProgress: (line) =>
        process.stderr.write(`# [${((performance.now() - startMs) / 1000).toFixed(0)} s] ${line}\n`),
    });
    process.stderr.write(
      `# ${result.points} simulation points in ${((performance.now() - startMs) / 1000).toFixed(1)} s\n`,
    );
    const warning = shortRunWarning(result, o.programs);
    if (warning) process.stderr.write(`# warning: ${warning}\n`);
    if (o.json) {
      const { results, ref_jps, bound_jps, kv_bound_jps, light_jps, reference_light_jct_s, slo_jct_s } =
        result;
      process.stdout.write(
        `${JSON.stringify({ results, ref_jps, bound_jps, kv_bound_jps, light_jps, reference_light_jct_s, slo_jct_s, kv_cache: kvCache }, null, 2)}\n`,
      );
    } else process.stdout.write(`${capacityTable(result, kvCache)}\n`);
    if (o.report !== false) {
      const path = o.report === "continuum-report.html" ? "continuum-capacity.html" : o.report;
      writeFileSync(
        path,
        renderCapacityHtml({
          title: "continuum capacity",
          settings,
          rows: result.results,
          boundJps: result.bound_jps,
          kvBoundJps: result.kv_bound_jps,
          refJps: result.ref_jps,
          baselines: BASELINES,
        }),
      );
      process.stderr.write(`# report written to ${path}\n`);
    }
  });
}
