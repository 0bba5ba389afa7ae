import { type Command, InvalidArgumentError, Option } from "commander";
import { DEFAULT_INTERACTIVITY_FLOOR } from "../analysis/agentx-metrics.js";
import { isPolicySpec, POLICY_NAMES } from "../policies/index.js";
import { CLAIRVOYANT_POLICY, isClairvoyantPolicy } from "../sim/clairvoyant.js";
import type { ClosedLoopJob } from "../sim/closed-loop/closed-loop-job.js";
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
  gateway: boolean;
  tokenScale: number;
  toolTimeScale: number;
  turnRepeat: number;
  json: boolean;
  report: string | false;
  threads?: number;
  record?: string;
  /** simulate only: every program arrives at 0 */
  batch?: boolean;
  /** closed-loop replay of session traces (simulate, capacity): lanes; the largest tried in capacity */
  concurrency?: number;
  duration: number;
  warmStart: boolean;
  idleGapCap: number;
  interactivityFloor: number;
  blockSize?: number;
}

/** `--idle-gap-cap`: seconds, or `none`. */
function gapCap(value: string): number {
  if (value === "none") return Number.POSITIVE_INFINITY;
  return nonNegativeNumber(value);
}

/** AgentX's closed loop over session traces (docs/simulator.md, "Closed-loop replay"). */
/** The closed loop's settings where no flag gives them (AgentX's: a 30-minute run, recorded gaps capped at 10 s). */
export const CLOSED_LOOP_DEFAULTS = {
  duration: 1800,
  warmStart: false,
  idleGapCap: 10,
  interactivityFloor: DEFAULT_INTERACTIVITY_FLOOR,
} as const;

export function addClosedLoopOptions(command: Command, concurrencyHelp: string): Command {
  return command
    .option("--concurrency <n>", concurrencyHelp, positiveInt)
    .option(
      "--duration <s>",
      "closed loop: seconds measured (after the warm-up with --warm-start)",
      positiveNumber,
      CLOSED_LOOP_DEFAULTS.duration,
    )
    .option(
      "--warm-start",
      "closed loop: each lane's first session starts at a random point t* (its call before t* primes the cache, unmeasured)",
      false,
    )
    .option(
      "--idle-gap-cap <s>",
      "closed loop: cap on every recorded gap a session tree waits (think times, subagent offsets; AgentX locks 10), or none",
      gapCap,
      CLOSED_LOOP_DEFAULTS.idleGapCap,
    )
    .option(
      "--interactivity-floor <tok/s>",
      "closed loop: P90 output tokens/s per user a run must reach",
      positiveNumber,
      CLOSED_LOOP_DEFAULTS.interactivityFloor,
    )
    .option("--block-size <tokens>", "tokens per hash id of Mooncake JSONL (default 512)", positiveInt);
}

/** Policies a closed loop compares unless --policies names others: ours and the peers AgentX-era papers use. */
export const CLOSED_LOOP_POLICIES = [
  "vllm",
  "vllm-offload",
  "cachettl-adaptive",
  "thunderagent",
  "concur",
  "mori",
];

export function closedLoopJobFor(
  o: SimCliOptions,
  policy: string,
  concurrency: number,
  seed = o.seed,
): ClosedLoopJob {
  return {
    policy,
    concurrency,
    durationS: o.duration,
    warmStart: o.warmStart,
    idleGapCapS: o.idleGapCap,
    interactivityFloor: o.interactivityFloor,
    seed,
    workload: {
      paths: [o.trace as string],
      ...(o.blockSize === undefined ? {} : { mooncakeBlockSize: o.blockSize }),
      tokenScale: o.tokenScale,
      toolTimeScale: o.toolTimeScale,
    },
    hardware: hardwareOf(o),
    engine: engineOf(o),
  };
}

/** The closed loop's own settings, for the report and stderr. */
export function describeClosedLoop(o: SimCliOptions): string[] {
  return [
    `closed loop: ${o.duration} s measured${o.warmStart ? " after a warm start (each lane's first session from a random point)" : ""}, recorded gaps capped at ${Number.isFinite(o.idleGapCap) ? `${o.idleGapCap} s` : "nothing"}, interactivity floor ${o.interactivityFloor} tok/s per user`,
  ];
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
      "--trace <path>",
      "agent trace (JSONL: docs/workloads.md; `continuum trace` makes one), or session traces with block ids for --concurrency (a Weka file or directory, Mooncake JSONL); default: a generated workload",
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
    .option(
      "--gateway",
      "run each policy in a gateway in front of an engine it does not own (vLLM's FCFS, LRU prefix cache, no pins): admission in the gateway, pins kept by keep-alives",
      false,
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
    gateway: o.gateway ?? false,
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
    o.concurrency === undefined
      ? `${o.programs} programs${o.batch ? " arriving together at 0 (a batch)" : ""}, seed ${o.seed}, token scale ${o.tokenScale}, tool-time scale ${o.toolTimeScale}, turn repeat ${o.turnRepeat}`
      : `${o.concurrency} lanes, seed ${o.seed}, token scale ${o.tokenScale}, time scale ${o.toolTimeScale}`,
    o.profile
      ? `engine profile ${o.profile}`
      : `hardware ${o.hardware} / ${o.model}, KV cache ${o.kvCacheDtype}`,
    `max-num-seqs ${o.maxNumSeqs}, max-num-batched-tokens ${o.maxNumBatchedTokens}, cpu offload ${o.cpuOffloadGb} GB, disk offload ${o.diskOffloadGb} GB, kv cap ${o.kvCacheTokens || "GPU memory"}`,
    ...(o.replicas > 1 ? [`${o.replicas} replicas behind the ${o.router} router`] : []),
    ...(o.gateway
      ? ["each policy in a gateway in front of an engine with vLLM's FCFS, an LRU prefix cache and no pins"]
      : []),
  ];
}
