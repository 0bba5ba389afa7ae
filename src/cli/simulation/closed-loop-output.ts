import { existsSync, writeFileSync } from "node:fs";
import type { Command } from "commander";
import {
  type AgentxPoint,
  agentxJson,
  agentxNotes,
  formatAgentxTable,
  renderAgentxReportHtml,
} from "../../analysis/agentx-report.js";
import { formatTextTable } from "../../analysis/text-table.js";
import { loadPolicyModules } from "../../policies/index.js";
import type { ClosedLoopResult } from "../../sim/closed-loop/closed-loop.js";
import { type ClosedLoopJob, loadAgentWorkload } from "../../sim/closed-loop/closed-loop-job.js";
import { validateHardwareInputs } from "../../sim/point-job.js";
import { runClosedLoopSettled } from "../../sim/sweep.js";
import { isAgentTraceSource } from "../../workload/agent-traces/agent-trace-files.js";
import {
  CLOSED_LOOP_POLICIES,
  closedLoopJobFor,
  describeClosedLoop,
  describeSettings,
  engineOf,
  hardwareOf,
  type SimCliOptions,
} from "../sim-options.js";

/** Closed-loop mode's inputs: session traces, one engine; the default policies unless --policies named others. */
function prepare(o: SimCliOptions, command: Command): string[] {
  if (!o.trace)
    throw new Error(
      "--concurrency replays session traces: give --trace <Weka file or directory, or Mooncake JSONL>",
    );
  if (!existsSync(o.trace)) throw new Error(`${o.trace}: no such file or directory`);
  if (!isAgentTraceSource(o.trace))
    throw new Error(
      `${o.trace}: --concurrency replays session traces with block ids (Weka, Mooncake); this is none`,
    );
  if (o.replicas !== 1) throw new Error("--concurrency simulates one engine: --replicas must be 1");
  validateHardwareInputs(hardwareOf(o), engineOf(o));
  const { problems } = loadAgentWorkload(closedLoopJobFor(o, "vllm", 1).workload);
  for (const problem of problems) process.stderr.write(`# skipped ${problem}\n`);
  return command.getOptionValueSource("policies") === "default" ? CLOSED_LOOP_POLICIES : o.policies;
}

/** An open-loop command given session traces: say how to replay them. */
export function refuseSessionTraceWithoutConcurrency(o: SimCliOptions): void {
  if (o.concurrency === undefined && o.trace && existsSync(o.trace) && isAgentTraceSource(o.trace)) {
    throw new Error(
      `${o.trace} holds session traces with block ids (Weka, Mooncake): they replay in a closed loop, as AgentX does; give --concurrency N`,
    );
  }
}

async function runJobs(
  o: SimCliOptions,
  jobs: readonly ClosedLoopJob[],
): Promise<(ClosedLoopResult | undefined)[]> {
  const outcome = await runClosedLoopSettled(jobs, {
    threads: o.threads,
    onProgress: (done, total, last) => {
      if (total > 1)
        process.stderr.write(`# ${done}/${total} ${last.policy} at concurrency ${last.concurrency} done\n`);
    },
  });
  for (const f of outcome.failures) {
    process.stderr.write(
      `# FAILED ${f.job.policy} at concurrency ${f.job.concurrency}: ${f.error.split("\n", 1)[0]}\n`,
    );
  }
  if (outcome.failures.length > 0) process.exitCode = 1;
  return [...outcome.results];
}

const pointOf = (r: ClosedLoopResult): AgentxPoint => ({ policy: r.policy, metrics: r });

/** `simulate --concurrency N`: one closed-loop run per policy, AgentX's metrics side by side. */
export async function simulateClosedLoopAndPrint(o: SimCliOptions, command: Command): Promise<void> {
  const policies = prepare(o, command);
  await loadPolicyModules(policies);
  const concurrency = o.concurrency as number;
  const settings = [...describeSettings({ ...o, policies }), ...describeClosedLoop(o)];
  for (const s of settings) process.stderr.write(`# ${s}\n`);
  process.stderr.write(`# policies ${policies.join(", ")}\n`);
  const startMs = performance.now();
  const results = (
    await runJobs(
      o,
      policies.map((p) => closedLoopJobFor(o, p, concurrency)),
    )
  ).filter((r): r is ClosedLoopResult => r !== undefined);
  const steps = results.reduce((sum, r) => sum + r.steps, 0);
  process.stderr.write(
    `# ${steps} simulated engine steps in ${((performance.now() - startMs) / 1000).toFixed(1)} s\n`,
  );
  const points = results.map(pointOf);
  if (o.json) process.stdout.write(`${JSON.stringify({ results: points.map(agentxJson) }, null, 2)}\n`);
  else process.stdout.write(`${[formatAgentxTable(points), ...agentxNotes(points)].join("\n")}\n`);
  if (o.report !== false) {
    writeFileSync(
      o.report,
      await renderAgentxReportHtml({ title: `continuum simulate: ${concurrency} lanes`, settings, points }),
    );
    process.stderr.write(`# report written to ${o.report}\n`);
  }
}

interface Search {
  readonly policy: string;
  /** the largest concurrency known to meet the floor, and the smallest known to miss it */
  pass: ClosedLoopResult | null;
  failAt: number | null;
  readonly tried: ClosedLoopResult[];
}

/** The next concurrency to try: doubling from 1 until the floor is missed (or the cap), then bisection. */
function nextConcurrency(search: Search, cap: number): number | null {
  const passed = search.pass?.concurrency ?? 0;
  const upper = search.failAt ?? cap + 1;
  if (upper - passed <= 1) return null;
  if (search.failAt === null) return Math.min(cap, passed === 0 ? 1 : passed * 2);
  return Math.floor((passed + upper) / 2);
}

/**
 * `capacity --concurrency MAX`: per policy, the largest concurrency (at most MAX) whose P90 interactivity
 * meets the floor, and its TPGS there: AgentX's "throughput at an interactivity floor". Assumes
 * interactivity falls as lanes are added (doubling, then bisection).
 */
export async function closedLoopCapacity(o: SimCliOptions, command: Command): Promise<void> {
  const policies = prepare(o, command);
  await loadPolicyModules(policies);
  const cap = o.concurrency as number;
  const settings = [
    ...describeSettings({ ...o, policies }),
    ...describeClosedLoop(o),
    `capacity: the largest concurrency up to ${cap} meeting the floor (doubling, then bisection)`,
  ];
  for (const s of settings) process.stderr.write(`# ${s}\n`);
  const searches: Search[] = policies.map((policy) => ({ policy, pass: null, failAt: null, tried: [] }));
  for (let round = 1; ; round++) {
    const due = searches.flatMap((s) => {
      const c = nextConcurrency(s, cap);
      return c === null ? [] : [{ search: s, job: closedLoopJobFor(o, s.policy, c) }];
    });
    if (due.length === 0) break;
    process.stderr.write(
      `# round ${round}: ${due.map((d) => `${d.search.policy}@${d.job.concurrency}`).join(", ")}\n`,
    );
    const results = await runJobs(
      o,
      due.map((d) => d.job),
    );
    due.forEach(({ search, job }, i) => {
      const r = results[i];
      if (!r) {
        search.failAt = job.concurrency;
        return;
      }
      search.tried.push(r);
      if (r.meets_floor) search.pass = r;
      else search.failAt = job.concurrency;
    });
  }
  // AgentX reads throughput at the floor off the curve: the most TPGS of any point that meets it (a policy
  // that holds sessions back can meet it at many lanes with less TPGS than at fewer).
  const best = (s: Search) =>
    s.tried
      .filter((r) => r.meets_floor)
      .reduce<ClosedLoopResult | null>((a, r) => (a === null || r.tpgs > a.tpgs ? r : a), null);
  const rows = searches.map((s) => {
    const r = best(s);
    return {
      policy: s.policy,
      max_concurrency_meeting_floor: s.pass?.concurrency ?? 0,
      concurrency: r?.concurrency ?? 0,
      tpgs: r?.tpgs ?? 0,
      p90_interactivity: r?.interactivity.p90 ?? 0,
      ttft_p90_s: r?.ttft_s.p90 ?? 0,
      prefix_hit: r?.prefix_hit ?? 0,
      theoretical_prefix_hit: r?.theoretical_prefix_hit ?? 0,
      context_overflow_rate: r?.context_overflow.request_rate ?? 0,
    };
  });
  const summary = rows.map((r) =>
    r.concurrency === 0
      ? `${r.policy}: no concurrency meets the floor of ${o.interactivityFloor} tok/s per user`
      : `${r.policy}: ${r.tpgs.toFixed(0)} TPGS at ${r.concurrency} lanes (P90 interactivity ${r.p90_interactivity.toFixed(1)}); the floor met up to ${r.max_concurrency_meeting_floor} lanes`,
  );
  if (o.json) {
    process.stdout.write(
      `${JSON.stringify({ interactivity_floor: o.interactivityFloor, max_concurrency: cap, results: rows, points: searches.flatMap((s) => s.tried.map((r) => agentxJson(pointOf(r)))) }, null, 2)}\n`,
    );
  } else {
    process.stdout.write(
      `${formatTextTable(
        [
          "policy",
          "lanes",
          "TPGS",
          "interact p90",
          "TTFT p90 s",
          "hit achieved",
          "theoretical",
          "overflow",
          "floor met to",
        ],
        rows.map((r) => [
          r.policy,
          String(r.concurrency),
          r.tpgs.toFixed(0),
          r.p90_interactivity.toFixed(1),
          r.ttft_p90_s.toFixed(2),
          `${(r.prefix_hit * 100).toFixed(1)}%`,
          `${(r.theoretical_prefix_hit * 100).toFixed(1)}%`,
          `${(r.context_overflow_rate * 100).toFixed(1)}%`,
          String(r.max_concurrency_meeting_floor),
        ]),
      )}\nTPGS at the floor: the most TPGS of the concurrencies tried whose P90 interactivity meets ${o.interactivityFloor} tok/s per user (searched up to the largest that does, of 1..${cap})\n`,
    );
  }
  if (o.report !== false) {
    const path = o.report === "continuum-report.html" ? "continuum-capacity.html" : o.report;
    writeFileSync(
      path,
      await renderAgentxReportHtml({
        title: "continuum capacity: TPGS at the interactivity floor",
        settings,
        points: searches.flatMap((s) =>
          [...s.tried].sort((a, b) => a.concurrency - b.concurrency).map(pointOf),
        ),
        summary,
      }),
    );
    process.stderr.write(`# report written to ${path}\n`);
  }
}
