import { Command } from "commander";
import { createPolicy, isPolicySpec, loadPolicyModules, POLICY_NAMES } from "../../policies/index.js";
import { checkPolicy, describeWorkload, type WorkloadVerdict } from "../../sim/policy-checks/policy-check.js";

/** One line per conformance workload: pass with what the run did, or the rule it broke. */
export function formatPolicyCheck(verdicts: readonly WorkloadVerdict[]): string[] {
  return verdicts.map((v) => {
    const where = `  workload ${describeWorkload(v.workload)}`;
    if (!v.ok) return `${where}\n    FAIL (${v.kind}): ${v.message}`;
    const { scheduler, arrivals, steps } = v.report;
    const s = scheduler.stats;
    return (
      `${where}\n    pass: ${v.report.result.programs.length} programs, ${arrivals} turns in ${steps} steps; ` +
      `${s.preemptions} preemptions, ${s.pinsCreated} pins (${s.pinsReused} reused, ${s.pinsExpired} expired, ${s.pinsSacrificed} sacrificed)`
    );
  });
}

/**
 * `continuum policies --check <spec>`: the conformance workloads (src/sim/policy-checks/policy-check.ts, the suite every
 * built-in passes) on one policy; exit code 1 when any fails.
 */
export async function runPolicyCheck(spec: string, write: (text: string) => void): Promise<boolean> {
  if (!isPolicySpec(spec)) {
    throw new Error(
      `unknown policy "${spec}"; choose one of: ${POLICY_NAMES.join(", ")}, or give a policy module's path (./my-policy.mjs)`,
    );
  }
  await loadPolicyModules([spec]);
  const sample = createPolicy(spec);
  write(`policy ${spec}: ${sample.name}, ${sample.description}\n`);
  const verdicts = checkPolicy(() => createPolicy(spec));
  for (const line of formatPolicyCheck(verdicts)) write(`${line}\n`);
  const failed = verdicts.filter((v) => !v.ok).length;
  write(
    failed === 0
      ? `conformance: passed all ${verdicts.length} workloads (every program completed, no stall, scheduler invariants held, no block leaked)\n`
      : `conformance: FAILED ${failed} of ${verdicts.length} workloads\n`,
  );
  return failed === 0;
}

export function policiesCommand(): Command {
  return new Command("policies")
    .description("list the scheduling policies, or check one (a policy module's too) for conformance")
    .option(
      "--check <policy>",
      "run the conformance workloads on a policy, a built-in name or a module's path (./my-policy.mjs: docs/custom-policies.md); exit 1 on failure",
    )
    .action(async (o: { check?: string }) => {
      if (o.check !== undefined) {
        const passed = await runPolicyCheck(o.check, (text) => process.stdout.write(text));
        if (!passed) process.exitCode = 1;
        return;
      }
      const width = Math.max(...POLICY_NAMES.map((n) => n.length));
      for (const name of POLICY_NAMES) {
        const policy = createPolicy(name);
        process.stdout.write(`${name.padEnd(width)}  ${policy.description}\n`);
      }
    });
}
