/**
 * The GPU check's verdict: each acceptance figure of a serving GPU (plugin built, every layer on the GPU,
 * llama.cpp's steps beside a reference, later turns from cache, the RAM tier against pinned copies,
 * cachettl-adaptive against vllm under load) from what the check measured. A figure that was not measured
 * is `null`, never estimated.
 */
import type { StepComparison } from "../../profiler/step-shapes.js";

export interface DeviceInfoLabels {
  readonly backend: string;
  readonly device: string;
  readonly layersOffloaded: number;
  readonly layersTotal: number;
  readonly kvCache: string;
}

export interface BenchFigures {
  readonly completed: number;
  readonly programs: number;
  readonly meanJctS: number;
  readonly p95JctS: number;
  readonly throughputJps: number;
  readonly cachedRatio: number;
  readonly laterTurnsCachedRatio: number;
  readonly errors: Record<string, number>;
}

export interface TierFigures {
  readonly stateBytes: number;
  readonly restoreBps: number;
  readonly saveBps: number;
  readonly pinnedHostToDeviceBps: number;
  readonly pinnedDeviceToHostBps: number;
  readonly pageableHostToDeviceBps: number;
  readonly pageableDeviceToHostBps: number;
}

/** A program's next turn after a restart with `--disk-offload-persist`, beside the same turn computed. */
export interface RestartFigures {
  /** the restarted server's banner line naming the states it restored, or null when it restored none */
  readonly restoredLine: string | null;
  readonly firstTurnPromptTokens: number;
  readonly promptTokens: number;
  /** the next turn's prompt tokens from the reloaded KV */
  readonly cachedTokens: number;
  /** the same turn on a server with an empty tier (0 unless something else cached it) */
  readonly computedCachedTokens: number;
  readonly restoredS: number;
  readonly computedS: number;
  readonly sameText: boolean;
  readonly comparedTokens: number;
  readonly maxLogprobDiff: number;
}

export interface CheckFigures {
  readonly pluginBuilt: boolean | null;
  readonly device: DeviceInfoLabels | null;
  readonly steps: readonly StepComparison[] | null;
  /** reference shapes that were not run (too much KV for this GPU, or longer than the model's context) */
  readonly stepsNotRun: number;
  /** bench results by load ("light", "heavy") and policy */
  readonly bench: Readonly<Record<string, Readonly<Record<string, BenchFigures>>>>;
  readonly tier: TierFigures | null;
  readonly restart: RestartFigures | null;
}

export interface Criterion {
  readonly name: string;
  /** null: not measured */
  readonly pass: boolean | null;
  readonly detail: string;
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** Each acceptance figure, passed, failed, or not measured, with the numbers behind it. */
export function judge(f: CheckFigures, opts: { stepTolerance: number; cachedTarget: number }): Criterion[] {
  const out: Criterion[] = [];
  out.push({
    name: "plugin built for this GPU",
    pass: f.pluginBuilt,
    detail: f.pluginBuilt === null ? "not run" : f.pluginBuilt ? "built" : "build failed",
  });
  const d = f.device;
  out.push({
    name: "all layers on the GPU",
    pass: d === null ? null : d.backend !== "cpu" && d.layersOffloaded === d.layersTotal && d.layersTotal > 0,
    detail:
      d === null
        ? "no device_info"
        : `${d.backend} ${d.device}: ${d.layersOffloaded}/${d.layersTotal} layers, KV cache on ${d.kvCache}`,
  });
  if (f.steps === null || f.steps.length === 0) {
    out.push({
      name: `steps within ${pct(opts.stepTolerance)} of the reference`,
      pass: null,
      detail: "not measured",
    });
  } else {
    const within = f.steps.filter((s) => s.within).length;
    const range = (xs: number[]) => `${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)}`;
    const basis = f.steps.every((s) => s.basis === "compute") ? "model compute" : "llama_decode wall time";
    const notRun = f.stepsNotRun > 0 ? `, ${f.stepsNotRun} reference shapes not run` : "";
    out.push({
      name: `steps within ${pct(opts.stepTolerance)} of the reference`,
      pass: within === f.steps.length && f.stepsNotRun === 0,
      detail:
        `${within}/${f.steps.length} shapes within${notRun}; ${basis} to reference ${range(f.steps.map((s) => s.ratio))}` +
        `, whole llama_decode ${range(f.steps.map((s) => s.wallRatio))}`,
    });
  }
  const light = f.bench["light"] ?? {};
  const cachedRows = Object.entries(light);
  out.push({
    name: `turns 2+ at least ${pct(opts.cachedTarget)} from cache (light load)`,
    pass:
      cachedRows.length === 0
        ? null
        : cachedRows.every(([, b]) => b.laterTurnsCachedRatio >= opts.cachedTarget),
    detail:
      cachedRows.length === 0
        ? "not measured"
        : cachedRows.map(([p, b]) => `${p} ${pct(b.laterTurnsCachedRatio)}`).join(", "),
  });
  const t = f.tier;
  out.push({
    name: "RAM tier at >= 50% of pinned copy bandwidth",
    pass:
      t === null
        ? null
        : t.restoreBps >= 0.5 * t.pinnedHostToDeviceBps && t.saveBps >= 0.5 * t.pinnedDeviceToHostBps,
    detail:
      t === null
        ? "not measured"
        : `${(t.stateBytes / 2 ** 20).toFixed(0)} MiB states: restore ${pct(t.restoreBps / t.pinnedHostToDeviceBps)} ` +
          `of pinned, save ${pct(t.saveBps / t.pinnedDeviceToHostBps)} of pinned`,
  });
  const heavy = f.bench["heavy"] ?? {};
  const ours = heavy["cachettl-adaptive"];
  const vllm = heavy["vllm"];
  out.push({
    name: "cachettl-adaptive's mean JCT below vllm's (heavy load)",
    pass: ours && vllm ? ours.completed === vllm.completed && ours.meanJctS < vllm.meanJctS : null,
    detail:
      ours && vllm
        ? `${ours.meanJctS.toFixed(2)} s vs ${vllm.meanJctS.toFixed(2)} s (${(ours.meanJctS / vllm.meanJctS).toFixed(2)}x), ` +
          `${ours.completed}/${ours.programs} and ${vllm.completed}/${vllm.programs} programs done`
        : "not measured",
  });
  out.push(restartCriterion(f.restart));
  return out;
}

/** A KV block's worth of the first turn may be recomputed (the block the next turn's new tokens start in). */
const PARTIAL_BLOCK_TOKENS = 16;

function restartCriterion(r: RestartFigures | null): Criterion {
  const name = "a program's KV reloaded after a restart (--disk-offload-persist)";
  if (r === null) return { name, pass: null, detail: "not measured" };
  const reloaded =
    r.restoredLine !== null && r.cachedTokens >= r.firstTurnPromptTokens - PARTIAL_BLOCK_TOKENS;
  return {
    name,
    pass: reloaded && r.computedCachedTokens === 0 && r.sameText,
    detail:
      `${r.cachedTokens}/${r.promptTokens} prompt tokens from disk (first turn ${r.firstTurnPromptTokens}), ` +
      `${r.restoredS.toFixed(2)} s vs ${r.computedS.toFixed(2)} s computed; ` +
      `${r.sameText ? "same" : "different"} text, logprobs within ${r.maxLogprobDiff.toFixed(4)} over ` +
      `${r.comparedTokens} tokens; ${r.restoredLine ?? "no restored line in the banner"}`,
  };
}

/** `continuum:device_info{...} 1` from a /metrics text, or null. */
export function parseDeviceInfoMetric(metrics: string): DeviceInfoLabels | null {
  const line = metrics.split("\n").find((l) => l.startsWith("continuum:device_info{"));
  if (!line) return null;
  const labels = new Map<string, string>();
  for (const m of line.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels.set(m[1] as string, m[2] as string);
  return {
    backend: labels.get("backend") ?? "",
    device: labels.get("device") ?? "",
    layersOffloaded: Number(labels.get("layers_offloaded") ?? Number.NaN),
    layersTotal: Number(labels.get("layers_total") ?? Number.NaN),
    kvCache: labels.get("kv_cache") ?? "",
  };
}

export function formatVerdict(criteria: readonly Criterion[]): string {
  const mark = (p: boolean | null) => (p === null ? "n/a " : p ? "PASS" : "FAIL");
  return criteria.map((c) => `${mark(c.pass)}  ${c.name}: ${c.detail}`).join("\n");
}
