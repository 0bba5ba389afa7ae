import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Command, InvalidArgumentError } from "commander";
import { formatTextTable } from "../../analysis/text-table.js";
import { isPolicySpec, loadPolicyModules } from "../../policies/index.js";
import {
  type CapacityResult,
  measureCapacity,
  type PolicyCapacity,
  REFERENCE_POLICY,
} from "../../sim/capacity.js";
import { resolveHardware, validateJobInputs } from "../../sim/point-job.js";
import { type CaseResult, type HeldOutRow, leaveOneOut } from "../../sim/policy-checks/leave-one-out.js";
import { DEFAULT_ENGINE_OPTIONS } from "../../sim/simulate.js";
import { runSweep } from "../../sim/sweep.js";
import { WORKLOAD_KINDS, type WorkloadKind } from "../../workload/generators.js";
import {
  CLOSED_LOOP_DEFAULTS,
  engineOf,
  hardwareOf,
  nonNegativeNumber,
  positiveInt,
  positiveNumber,
  type SimCliOptions,
  workloadOf,
} from "../sim-options.js";

/** A workload family: a generator, or a trace file under a name. */
interface Family {
  readonly name: string;
  readonly workload: WorkloadKind | null;
  readonly trace: string | null;
}

function familyList(value: string): Family[] {
  return value.split(",").map((part) => {
    const spec = part.trim();
    const eq = spec.indexOf("=");
    if (eq > 0) return { name: spec.slice(0, eq), workload: null, trace: spec.slice(eq + 1) };
    if ((WORKLOAD_KINDS as readonly string[]).includes(spec))
      return { name: spec, workload: spec as WorkloadKind, trace: null };
    throw new InvalidArgumentError(
      `family "${spec}" is neither a generator (${WORKLOAD_KINDS.join(", ")}) nor name=<trace.jsonl>`,
    );
  });
}

function nameList(value: string): string[] {
  const names = value.split(",").map((s) => s.trim());
  for (const name of names)
    if (!isPolicySpec(name)) throw new InvalidArgumentError(`unknown policy "${name}"`);
  return names;
}

function tierList(value: string): number[] {
  return value.split(",").map((s) => nonNegativeNumber(s.trim()));
}

interface LooCliOptions {
  families: Family[];
  tiers: number[];
  candidates: string[];
  peers: string[];
  programs: number;
  seeds: number;
  seed: number;
  hardware: string;
  model: string;
  sloFactor: number;
  tolerance: number;
  threads?: number;
  saveDir?: string;
  json: boolean;
}

const settingOf = (tierGb: number) => (tierGb > 0 ? `${tierGb} GiB tier` : "no tier");

function simOptionsOf(o: LooCliOptions, family: Family, tierGb: number): SimCliOptions {
  return {
    ...(family.trace === null ? {} : { trace: family.trace }),
    workload: family.workload ?? "swe-bench",
    hardware: o.hardware,
    model: o.model,
    kvCacheDtype: "bf16",
    policies: [...new Set([REFERENCE_POLICY, ...o.candidates, ...o.peers])],
    programs: o.programs,
    seed: o.seed,
    maxNumSeqs: DEFAULT_ENGINE_OPTIONS.maxNumSeqs,
    maxNumBatchedTokens: DEFAULT_ENGINE_OPTIONS.maxNumBatchedTokens,
    cpuOffloadGb: tierGb,
    diskOffloadGb: 0,
    kvCacheTokens: 0,
    replicas: 1,
    router: DEFAULT_ENGINE_OPTIONS.router,
    tokenScale: 1,
    toolTimeScale: 1,
    turnRepeat: 1,
    json: false,
    report: false,
    gateway: false,
    ...CLOSED_LOOP_DEFAULTS,
  };
}

/** What a saved case was measured with: a saved file is reused only for the same settings. */
function caseKey(o: LooCliOptions, family: Family, tierGb: number) {
  return {
    family: family.name,
    workload: family.workload,
    trace: family.trace,
    tier_gb: tierGb,
    programs: o.programs,
    seeds: o.seeds,
    seed: o.seed,
    hardware: o.hardware,
    model: o.model,
    slo_factor: o.sloFactor,
    tolerance: o.tolerance,
  };
}

/**
 * A case as saved: each policy's capacity, and what every policy's is measured against. Each policy's
 * bisection is its own (the same seeds, the same reference: vllm's light-load JCT and sustainable load), so
 * a policy measured in another run with the same settings is the same measurement and is kept.
 */
interface SavedCase {
  readonly key: ReturnType<typeof caseKey>;
  readonly reference: Omit<CapacityResult, "results" | "points">;
  readonly results: Readonly<Record<string, PolicyCapacity>>;
}

function referenceOf(r: CapacityResult): SavedCase["reference"] {
  const { ref_jps, bound_jps, kv_bound_jps, light_jps, reference_light_jct_s, slo_jct_s } = r;
  return { ref_jps, bound_jps, kv_bound_jps, light_jps, reference_light_jct_s, slo_jct_s };
}

function readSaved(path: string | null, key: SavedCase["key"]): SavedCase | null {
  if (path === null || !existsSync(path)) return null;
  const saved = JSON.parse(readFileSync(path, "utf8")) as SavedCase;
  if (JSON.stringify(saved.key) === JSON.stringify(key)) return saved;
  process.stderr.write(`# ${path} was measured with other settings: measuring again\n`);
  return null;
}

async function measureCase(o: LooCliOptions, family: Family, tierGb: number): Promise<CaseResult> {
  const sim = simOptionsOf(o, family, tierGb);
  const key = caseKey(o, family, tierGb);
  const path = o.saveDir ? join(o.saveDir, `${family.name}-${tierGb}gb.json`) : null;
  const saved = readSaved(path, key);
  const missing = sim.policies.filter((p) => saved?.results[p] === undefined);
  const label = `${family.name}, ${settingOf(tierGb)}`;
  let reference = saved?.reference ?? null;
  const results: Record<string, PolicyCapacity> = { ...saved?.results };
  if (missing.length === 0) process.stderr.write(`# ${label}: measured before, read from ${path}\n`);
  else {
    if (saved)
      process.stderr.write(
        `# ${label}: ${sim.policies.length - missing.length} policies read from ${path}\n`,
      );
    validateJobInputs(workloadOf(sim), hardwareOf(sim), engineOf(sim));
    const startMs = performance.now();
    const measured = await measureCapacity({
      template: { workload: workloadOf(sim), hardware: hardwareOf(sim), engine: engineOf(sim) },
      policies: [...new Set([REFERENCE_POLICY, ...missing])],
      seeds: Array.from({ length: o.seeds }, (_, i) => o.seed + i),
      sloFactor: o.sloFactor,
      tolerance: o.tolerance,
      profile: resolveHardware(hardwareOf(sim)),
      run: (jobs) => runSweep(jobs, { threads: o.threads }),
      onProgress: (line) =>
        process.stderr.write(`# ${label} [${((performance.now() - startMs) / 1000).toFixed(0)} s] ${line}\n`),
    });
    if (reference && JSON.stringify(referenceOf(measured)) !== JSON.stringify(reference)) {
      throw new Error(
        `${label}: the reference measured now differs from the one in ${path}; remove the file`,
      );
    }
    reference = referenceOf(measured);
    for (const r of measured.results) results[r.policy] = r;
    if (path) {
      mkdirSync(o.saveDir as string, { recursive: true });
      writeFileSync(path, `${JSON.stringify({ key, reference, results } satisfies SavedCase, null, 2)}\n`);
    }
  }
  return {
    family: family.name,
    setting: settingOf(tierGb),
    sustainable: Object.fromEntries(
      sim.policies.map((p) => [p, (results[p] as PolicyCapacity).sustainable_jps]),
    ),
    kvBoundJps: (reference as SavedCase["reference"]).kv_bound_jps,
  };
}

/** The held-out table: losses marked, each candidate's in-sample ratio beside the held-out choice's. */
export function heldOutTable(rows: readonly HeldOutRow[], candidates: readonly string[]): string {
  const verdict = (r: HeldOutRow) =>
    r.ratio >= r.target ? "holds" : r.ratio >= 1 ? `below ${r.target.toFixed(2)}x` : "LOSS";
  return formatTextTable(
    [
      "family",
      "memory",
      "best peer",
      "chosen without it",
      "held-out ratio",
      "target",
      "verdict",
      ...candidates,
    ],
    rows.map((r) => [
      r.family,
      r.setting,
      `${r.bestPeer} ${r.bestPeerJps.toFixed(4)}`,
      r.chosen,
      `${r.ratio.toFixed(3)}x`,
      `${r.target.toFixed(2)}x`,
      verdict(r),
      ...candidates.map((c) => `${(r.ratios[c] as number).toFixed(3)}x`),
    ]),
  );
}

export function leaveOneOutCommand(): Command {
  return new Command("leave-one-out")
    .description(
      "leave-one-workload-out: for each workload family, the candidate policy chosen on the other families' capacity runs (highest worst ratio to the best peer), and its ratio to the best peer on the family left out, with and without a RAM tier",
    )
    .option(
      "--families <list>",
      `workload families: generators (${WORKLOAD_KINDS.join(", ")}) or name=<trace.jsonl>`,
      familyList,
      familyList(WORKLOAD_KINDS.join(",")),
    )
    .option("--tiers <list>", "CPU RAM tier per case, GiB (0: none)", tierList, [0, 200])
    .option("--candidates <list>", "the policies a choice is made among", nameList, ["cachettl-adaptive"])
    .option("--peers <list>", "the policies to lead", nameList, ["thunderagent", "concur", "mori"])
    .option("--programs <n>", "programs per run", positiveInt, 500)
    .option("--seeds <k>", "seeds per run (seed, seed+1, ...)", positiveInt, 3)
    .option("--seed <n>", "first seed", (v) => Number.parseInt(v, 10), 1)
    .option("--hardware <gpu>", "GPU: a100, h100, h200, b200", "h100")
    .option("--model <model>", "model: llama-3.1-8b, llama-3.1-70b, gemma-3-12b", "llama-3.1-8b")
    .option(
      "--slo-factor <f>",
      "mean JCT bound as a multiple of vllm's light-load mean JCT",
      positiveNumber,
      3,
    )
    .option("--tolerance <f>", "relative precision of the bisection", positiveNumber, 0.02)
    .option("--threads <n>", "worker threads (default: one per core)", positiveInt)
    .option(
      "--save-dir <dir>",
      "keep each case's capacity results there, and reuse each policy's measured with the same settings (a policy added later is measured alone)",
    )
    .option("--json", "print the rows as JSON", false)
    .action(async (o: LooCliOptions) => {
      await loadPolicyModules([...o.candidates, ...o.peers]);
      const cases: CaseResult[] = [];
      for (const family of o.families) {
        for (const tierGb of o.tiers) cases.push(await measureCase(o, family, tierGb));
      }
      const rows = leaveOneOut(cases, o.candidates, o.peers);
      if (o.json) process.stdout.write(`${JSON.stringify({ cases, rows }, null, 2)}\n`);
      else process.stdout.write(`${heldOutTable(rows, o.candidates)}\n`);
    });
}
