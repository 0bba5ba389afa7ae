import { type Command, InvalidArgumentError, Option } from "commander";
import { isPolicySpec, POLICY_NAMES } from "../policies/index.js";
import { CLAIRVOYANT_POLICY, isClairvoyantPolicy } from "../sim/clairvoyant.js";
import { ROUTER_NAMES, type RouterName } from "../sim/cluster.js";
import { KV_CACHE_DTYPES, type KvCacheDtype } from "../sim/hardware/roofline-spec.js";
import type { HardwareOptions, PointJob, WorkloadOptions } from "../sim/point-job.js";
import { DEFAULT_ENGINE_OPTIONS, type EngineOptions } from "../sim/simulate.js";
import { WORKLOAD_KINDS, type WorkloadKind } from "../workload/generators.js";

export interface SimCliOptions {
  trace?: string;
  workload: WorkloadKind;
  hardware: string;
  model: string;
  kvCacheDtype: KvCacheDtype;
  profile?: string;
  policies: string[];
  programs: number;
  seed: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  cpuOffloadGb: number;
  diskOffloadGb: number;
  kvCacheTokens: number;
  replicas: number;
  router: RouterName;
  tokenScale: number;
  toolTimeScale: number;
  turnRepeat: number;
  json: boolean;
  report: string | false;
  threads?: number;
  record?: string;
  /** simulate only: every program arrives at 0 */
  batch?: boolean;
}

export function positiveNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0)
    throw new InvalidArgumentError(`expected a positive number, got "${value}"`);
  return n;
}

export function nonNegativeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgumentError(`expected a number >= 0, got "${value}"`);
  return n;
}

export function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0)
    throw new InvalidArgumentError(`expected a positive integer, got "${value}"`);
  return n;
}

export function numberList(value: string): number[] {
  return value.split(",").map((part) => positiveNumber(part.trim()));
}

/** Built-in names and policy module specs (./my-policy.mjs: loaded, and checked, by the command's action). */
function policyList(value: string): string[] {
  const names = value.split(",").map((s) => s.trim());
  for (const name of names) {
    if (!isPolicySpec(name) && !isClairvoyantPolicy(name)) {
      throw new InvalidArgumentError(
        `unknown policy "${name}"; choose from ${POLICY_NAMES.join(", ")} (or, simulator only, ${CLAIRVOYANT_POLICY}), or give a policy module's path (./my-policy.mjs, docs/custom-policies.md)`,
      );
    }
  }
  return names;
}

/** Options shared by simulate, sweep and reproduce. */
export function addSimOptions(command: Command, defaults: { policies: string; programs: number }): Command {
  return command
    .option(
      "--trace <file>",
      "agent trace (JSONL: docs/workloads.md; `continuum trace` makes one); default: a generated workload",
    )
    .addOption(
      new Option("--workload <kind>", "generated workload when no --trace is given (docs/workloads.md)")
        .choices([...WORKLOAD_KINDS])
        .default("swe-bench"),
    )
    .option("--hardware <gpu>", "GPU: a100, h100, h200, b200", "h100")
    .option("--model <model>", "model: llama-3.1-8b, llama-3.1-70b, gemma-3-12b", "llama-3.1-8b")
    .addOption(
      new Option(
        "--kv-cache-dtype <dtype>",
        "KV cache element type of --hardware/--model: fp8 halves KV bytes per token (twice the pool and the offload tiers' tokens, half the attention KV reads)",
      )
        .choices([...KV_CACHE_DTYPES])
        .default("bf16"),
    )
    .option("--profile <file>", "a `continuum profile` output (real engine) instead of --hardware/--model")
    .option(
      "--policies <list>",
      "comma-separated policies (see `continuum policies`), or paths of policy modules (./my-policy.mjs: docs/custom-policies.md)",
      policyList,
      policyList(defaults.policies),
    )
    .option("--programs <n>", "number of agent programs", positiveInt, defaults.programs)
    .option("--seed <n>", "seed for the workload sample and arrivals", (v) => Number.parseInt(v, 10), 1)
    .option("--max-num-seqs <n>", "max running sequences", positiveInt, DEFAULT_ENGINE_OPTIONS.maxNumSeqs)
    .option(
      "--max-num-batched-tokens <n>",
      "token budget per step",
      positiveInt,
      DEFAULT_ENGINE_OPTIONS.maxNumBatchedTokens,
    )
    .option(
      "--cpu-offload-gb <gb>",
      "CPU RAM offload tier in GiB for every policy (0: only policies that need one, 200 GiB)",
      nonNegativeNumber,
      0,
    )
    .option("--disk-offload-gb <gb>", "disk offload tier below the CPU tier (GiB)", nonNegativeNumber, 0)
    .option("--kv-cache-tokens <n>", "cap the KV pool (0: what the GPU memory holds)", nonNegativeNumber, 0)
    .option(
      "--replicas <n>",
      "engine replicas (each with the whole --hardware) behind --router",
      positiveInt,
      1,
    )
    .addOption(
      new Option("--router <name>", "how requests are spread over replicas")
        .choices([...ROUTER_NAMES])
        .default(DEFAULT_ENGINE_OPTIONS.router),
    )
    .option("--token-scale <f>", "scale every token count", positiveNumber, 1)
    .option("--tool-time-scale <f>", "scale every tool time", positiveNumber, 1)
    .option(
      "--turn-repeat <k>",
      "repeat each program's turns k times, tokens scaled by 1/k (paper Fig. 14)",
      positiveInt,
      1,
    )
    .option("--threads <n>", "worker threads (default: one per core)", positiveInt)
    .option(
      "--record <dir>",
      "write each point's scheduler event log (<policy>-jps<rate>.jsonl) for `continuum analyze`",
    )
    .option("--json", "print machine-readable results on stdout", false)
    .option("--report <file.html>", "HTML report path", "continuum-report.html")
    .option("--no-report", "do not write the HTML report");
}

export function workloadOf(o: SimCliOptions): WorkloadOptions {
  return {
    trace: o.trace,
    kind: o.trace ? undefined : o.workload,
    programs: o.programs,
    tokenScale: o.tokenScale,
    toolTimeScale: o.toolTimeScale,
    turnRepeat: o.turnRepeat,
    ...(o.batch ? { batch: true } : {}),
  };
}

export function hardwareOf(o: SimCliOptions): HardwareOptions {
  if (!o.profile) return { gpu: o.hardware, model: o.model, kvCacheDtype: o.kvCacheDtype };
  if (o.kvCacheDtype !== "bf16") {
    throw new Error(
      `--kv-cache-dtype ${o.kvCacheDtype} applies to --hardware/--model: a --profile carries the KV bytes per token of the engine it measured`,
    );
  }
  return { profilePath: o.profile };
}

export function engineOf(o: SimCliOptions): EngineOptions {
  return {
    ...DEFAULT_ENGINE_OPTIONS,
    maxNumSeqs: o.maxNumSeqs,
    maxNumBatchedTokens: o.maxNumBatchedTokens,
    cpuOffloadGb: o.cpuOffloadGb,
    diskOffloadGb: o.diskOffloadGb,
    kvCapacityTokens: o.kvCacheTokens,
    replicas: o.replicas,
    router: o.router,
    defaultOffloadGb: o.hardware === "a100" ? 100 : 200,
  };
}

export function jobsFor(o: SimCliOptions, jpsList: readonly number[]): PointJob[] {
  const workload = workloadOf(o);
  const hardware = hardwareOf(o);
  const engine = engineOf(o);
  return jpsList.flatMap((jps) =>
    o.policies.map((policy) => ({
      policy,
      jps,
      seed: o.seed,
      workload,
      hardware,
      engine,
      recordDir: o.record,
    })),
  );
}

export function describeSettings(o: SimCliOptions): string[] {
  return [
    o.trace ? `trace ${o.trace}` : `generated ${o.workload} workload`,
    `${o.programs} programs${o.batch ? " arriving together at 0 (a batch)" : ""}, seed ${o.seed}, token scale ${o.tokenScale}, tool-time scale ${o.toolTimeScale}, turn repeat ${o.turnRepeat}`,
    o.profile
      ? `engine profile ${o.profile}`
      : `hardware ${o.hardware} / ${o.model}, KV cache ${o.kvCacheDtype}`,
    `max-num-seqs ${o.maxNumSeqs}, max-num-batched-tokens ${o.maxNumBatchedTokens}, cpu offload ${o.cpuOffloadGb} GB, disk offload ${o.diskOffloadGb} GB, kv cap ${o.kvCacheTokens || "GPU memory"}`,
    ...(o.replicas > 1 ? [`${o.replicas} replicas behind the ${o.router} router`] : []),
  ];
}
