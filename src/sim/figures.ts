import type { PointJob, WorkloadOptions } from "./point-job.js";
import { DEFAULT_ENGINE_OPTIONS, type EngineOptions, type PointResult } from "./simulate.js";

/**
 * The paper's evaluation figures as simulation plans: which workloads, hardware, policies and x-axis, and
 * what the paper reports, so `continuum reproduce` can print both side by side.
 */
export interface Panel {
  readonly title: string;
  /** x-axis label and values; each value yields one job per policy */
  readonly xLabel: string;
  readonly jobs: readonly { readonly x: number; readonly job: PointJob }[];
  /** the policy compared against the baseline (ours) and the baseline */
  readonly ours: string;
  readonly baseline: string;
}

export interface Figure {
  readonly id: string;
  readonly title: string;
  readonly paperClaim: string;
  /** which JCT statistic the figure plots */
  readonly metric: "mean" | "p90" | "p95";
  readonly panels: readonly Panel[];
}

export interface FigureOptions {
  readonly programs: number;
  readonly seed: number;
  readonly trace?: string;
}

/** the paper's baselines, then the later peers (ThunderAgent, CONCUR: no tier of their own), ours last */
const NO_OFFLOAD = ["vllm", "autellix", "thunderagent", "concur", "cachettl"];
const WITH_OFFLOAD = ["vllm-offload", "autellix-offload", "infercept", "cachettl-offload"];
const ABLATION = ["vllm", "program-fcfs", "static-ttl", "cachettl"];

/** Hardware panels of Figures 8 and 10 and the loads that take each from light to saturated. */
const MAIN_CONFIGS = [
  { gpu: "b200", model: "llama-3.1-70b", label: "Llama 70B (4xB200)", jps: [0.04, 0.08, 0.12, 0.16, 0.2] },
  { gpu: "b200", model: "llama-3.1-8b", label: "Llama 8B (1xB200)", jps: [0.05, 0.1, 0.15, 0.2, 0.25] },
  { gpu: "a100", model: "llama-3.1-8b", label: "Llama 8B (1xA100)", jps: [0.02, 0.04, 0.06, 0.08, 0.1] },
  { gpu: "a100", model: "gemma-3-12b", label: "Gemma 12B (1xA100)", jps: [0.01, 0.02, 0.03, 0.04, 0.05] },
] as const;

const WORKLOADS = ["swe-bench", "bfcl"] as const;

function workload(
  o: FigureOptions,
  kind: "swe-bench" | "bfcl",
  extra: Partial<WorkloadOptions> = {},
): WorkloadOptions {
  return {
    trace: kind === "swe-bench" ? o.trace : undefined,
    kind: kind === "swe-bench" && o.trace ? undefined : kind,
    programs: o.programs,
    tokenScale: 1,
    toolTimeScale: 1,
    turnRepeat: 1,
    ...extra,
  };
}

function engine(gpu: string, extra: Partial<EngineOptions> = {}): EngineOptions {
  return { ...DEFAULT_ENGINE_OPTIONS, defaultOffloadGb: gpu === "a100" ? 100 : 200, ...extra };
}

function loadPanel(
  o: FigureOptions,
  title: string,
  policies: readonly string[],
  kind: "swe-bench" | "bfcl",
  gpu: string,
  model: string,
  jpsList: readonly number[],
  engineExtra: Partial<EngineOptions> = {},
): Panel {
  return {
    title,
    xLabel: "jobs/s",
    ours: policies[policies.length - 1] as string,
    baseline: policies[0] as string,
    jobs: jpsList.flatMap((jps) =>
      policies.map((policy) => ({
        x: jps,
        job: {
          policy,
          jps,
          seed: o.seed,
          workload: workload(o, kind),
          hardware: { gpu, model },
          engine: engine(gpu, engineExtra),
        },
      })),
    ),
  };
}

function mainFigure(o: FigureOptions, policies: readonly string[]): Panel[] {
  return WORKLOADS.flatMap((kind) =>
    MAIN_CONFIGS.map((c) => loadPanel(o, `${kind} / ${c.label}`, policies, kind, c.gpu, c.model, c.jps)),
  );
}

function sweepPanel(
  title: string,
  xLabel: string,
  xs: readonly number[],
  policies: readonly string[],
  make: (x: number, policy: string) => PointJob,
): Panel {
  return {
    title,
    xLabel,
    ours: policies[policies.length - 1] as string,
    baseline: policies[0] as string,
    jobs: xs.flatMap((x) => policies.map((policy) => ({ x, job: make(x, policy) }))),
  };
}

const PAPER_JPS = 0.13;
const FIG12_JPS = [0.4, 0.7, 0.9, 1.05];
const FIG12_POLICIES = ["vllm", "cachettl"];

export function buildFigure(id: string, o: FigureOptions): Figure {
  const b200 = { gpu: "b200", model: "llama-3.1-8b" };
  switch (id) {
    case "fig8":
      return {
        id,
        title: "Figure 8: mean JCT vs load, no offload (CacheTTL vs vLLM vs Autellix)",
        paperClaim:
          "CacheTTL vs vLLM: 1.12-3.66x lower mean delay and 1.10-3.22x throughput across Fig. 8/10; up to 2x with Llama-8B",
        metric: "mean",
        panels: mainFigure(o, NO_OFFLOAD),
      };
    case "fig10":
      return {
        id,
        title: "Figure 10: mean JCT vs load with CPU offload (LMCache-style tier)",
        paperClaim:
          "CacheTTL consistently beats vLLM+LMCache, Autellix+ and InferCept with DRAM offload (within the 1.12-3.66x range)",
        metric: "mean",
        panels: mainFigure(o, WITH_OFFLOAD),
      };
    case "fig11":
      return {
        id,
        title: "Figure 11: p90 / p95 JCT, SWE-bench, Llama-8B on B200 with 200 GB CPU offload",
        paperClaim: "CacheTTL has the lowest p90 and p95 JCT at every load",
        metric: "p95",
        panels: [
          loadPanel(
            o,
            "swe-bench / Llama 8B (1xB200) + CPU",
            WITH_OFFLOAD,
            "swe-bench",
            "b200",
            "llama-3.1-8b",
            [0.05, 0.1, 0.15, 0.2, 0.25],
          ),
        ],
      };
    case "fig12": {
      // The paper's testbed size is not published: 4 replicas of H100 / Llama-3.1-8B, our assumption.
      const replicas = 4;
      const routerPanel = (router: "round-robin" | "sticky-least-loaded") =>
        sweepPanel(
          `${replicas} x H100 / Llama 8B, ${router} routing`,
          "jobs/s",
          FIG12_JPS,
          FIG12_POLICIES,
          (jps, policy) => ({
            policy,
            jps,
            seed: o.seed,
            workload: workload(o, "swe-bench"),
            hardware: { gpu: "h100", model: "llama-3.1-8b" },
            engine: engine("h100", { replicas, router }),
          }),
        );
      return {
        id,
        title: `Figure 12: SWE-agent programs on ${replicas} replicas behind a router (distributed setting)`,
        paperClaim:
          "CacheTTL with session-aware routing has lower average delay than distributed inference baselines (SGLang, Dynamo) on real SWE-agents",
        metric: "mean",
        panels: [routerPanel("round-robin"), routerPanel("sticky-least-loaded")],
      };
    }
    case "fig13":
      return {
        id,
        title: `Figure 13: sensitivity to max batch size and chunk size at ${PAPER_JPS} jobs/s`,
        paperClaim: "improvement stays stable across batch sizes and chunk sizes 256-4096",
        metric: "mean",
        panels: [
          sweepPanel("max-num-seqs", "max-num-seqs", [16, 32, 64, 128, 256], NO_OFFLOAD, (x, policy) => ({
            policy,
            jps: PAPER_JPS,
            seed: o.seed,
            workload: workload(o, "swe-bench"),
            hardware: b200,
            engine: engine("b200", { maxNumSeqs: x }),
          })),
          sweepPanel(
            "max-num-batched-tokens",
            "chunk tokens",
            [256, 512, 1024, 2048, 4096],
            NO_OFFLOAD,
            (x, policy) => ({
              policy,
              jps: PAPER_JPS,
              seed: o.seed,
              workload: workload(o, "swe-bench"),
              hardware: b200,
              engine: engine("b200", { maxNumBatchedTokens: x }),
            }),
          ),
        ],
      };
    case "fig14":
      return {
        id,
        title: `Figure 14: turn scaling (trace repeated 1-5x, tokens scaled 1/k) at ${PAPER_JPS} jobs/s, 200 GB DRAM`,
        paperClaim:
          "baselines degrade as turns grow; CacheTTL's delay stays stable, so its gain grows with turns",
        metric: "mean",
        panels: [
          sweepPanel("turn repeat", "turn repeat", [1, 2, 3, 4, 5], WITH_OFFLOAD, (x, policy) => ({
            policy,
            jps: PAPER_JPS,
            seed: o.seed,
            workload: workload(o, "swe-bench", { turnRepeat: x }),
            hardware: b200,
            engine: engine("b200", { cpuOffloadGb: 200 }),
          })),
        ],
      };
    case "fig15":
      return {
        id,
        title: "Figure 15: SSD offload tier (400 GB and 800 GB) below 200 GB DRAM, Llama-8B on B200",
        paperClaim: "CacheTTL reduces delay vs the baselines with SSD offload too",
        metric: "mean",
        panels: [400, 800].map((diskGb) =>
          loadPanel(
            o,
            `SSD ${diskGb} GB`,
            WITH_OFFLOAD,
            "swe-bench",
            "b200",
            "llama-3.1-8b",
            [0.05, 0.1, 0.15, 0.2, 0.25],
            {
              cpuOffloadGb: 200,
              diskOffloadGb: diskGb,
            },
          ),
        ),
      };
    case "fig16":
      return {
        id,
        title: "Figure 16: ablation (vLLM, program-level FCFS, static TTL, CacheTTL), Llama-8B on B200",
        paperClaim: "each idea adds: program-FCFS < vLLM, static TTL < program-FCFS, CacheTTL best",
        metric: "mean",
        panels: WORKLOADS.map((kind) =>
          loadPanel(o, kind, ABLATION, kind, "b200", "llama-3.1-8b", [0.05, 0.1, 0.15, 0.2, 0.25]),
        ),
      };
    default:
      throw new Error(`unknown figure "${id}"; choose one of ${FIGURE_IDS.join(", ")}`);
  }
}

export const FIGURE_IDS = ["fig8", "fig10", "fig11", "fig12", "fig13", "fig14", "fig15", "fig16"];

function metricOf(r: PointResult, metric: Figure["metric"]): number {
  return metric === "mean" ? r.jct.mean : r.jct[metric];
}

/** The result of `policy` at `x` in a panel's slice of results; undefined where that point failed. */
function pointAt(
  panel: Panel,
  results: readonly (PointResult | undefined)[],
  x: number,
  policy: string,
): PointResult | undefined {
  return results[panel.jobs.findIndex((j) => j.x === x && j.job.policy === policy)];
}

/**
 * Per x value: baseline JCT / ours JCT (> 1 means ours is faster) and the throughput ratio; x values where
 * either point failed are left out.
 */
export function panelRatios(
  panel: Panel,
  results: readonly (PointResult | undefined)[],
  metric: Figure["metric"],
): { x: number; jctRatio: number; throughputRatio: number }[] {
  const xs = [...new Set(panel.jobs.map((j) => j.x))];
  return xs.flatMap((x) => {
    const ours = pointAt(panel, results, x, panel.ours);
    const base = pointAt(panel, results, x, panel.baseline);
    if (!ours || !base) return [];
    return [
      {
        x,
        jctRatio: metricOf(base, metric) / metricOf(ours, metric),
        throughputRatio: ours.throughput_jps / base.throughput_jps,
      },
    ];
  });
}

/** Relative spread under which two JCTs count as a tie (the noise of one seed at light load). */
export const TIE_TOLERANCE = 0.02;

export interface Comparison {
  readonly policy: string;
  /** per x value: this policy's JCT / ours (> 1: ours is faster) */
  readonly ratios: readonly { readonly x: number; readonly ratio: number }[];
  readonly wins: readonly number[];
  readonly losses: readonly number[];
}

/**
 * Ours against every other policy of the panel, point by point, with the loads where ours wins and where it
 * loses, so a summary cannot read as a win while some baseline beats ours; and the loads where every
 * policy is within TIE_TOLERANCE of every other (the figure shows nothing there).
 */
export function panelComparisons(
  panel: Panel,
  results: readonly (PointResult | undefined)[],
  metric: Figure["metric"],
): { comparisons: Comparison[]; tiedXs: number[] } {
  const xs = [...new Set(panel.jobs.map((j) => j.x))];
  const policies = [...new Set(panel.jobs.map((j) => j.job.policy))];
  const at = (x: number, policy: string) => {
    const r = pointAt(panel, results, x, policy);
    return r ? metricOf(r, metric) : undefined;
  };
  const comparisons = policies
    .filter((p) => p !== panel.ours)
    .map((policy) => {
      const ratios = xs.flatMap((x) => {
        const theirs = at(x, policy);
        const ours = at(x, panel.ours);
        return theirs === undefined || ours === undefined ? [] : [{ x, ratio: theirs / ours }];
      });
      return {
        policy,
        ratios,
        wins: ratios.filter((r) => r.ratio > 1 + TIE_TOLERANCE).map((r) => r.x),
        losses: ratios.filter((r) => r.ratio < 1 - TIE_TOLERANCE).map((r) => r.x),
      };
    });
  const tiedXs = xs.filter((x) => {
    const values = policies.map((p) => at(x, p));
    if (values.some((v) => v === undefined)) return false;
    const known = values as number[];
    return Math.max(...known) <= (1 + TIE_TOLERANCE) * Math.min(...known);
  });
  return { comparisons, tiedXs };
}
