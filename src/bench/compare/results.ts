/** The comparison's result shapes, results.json, and the generated block of docs/benchmarks.md. */
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { summarize } from "../../analysis/stats.js";
import type { StepKindTotals } from "../step-log-analysis.js";

// result shapes (the parts of `continuum bench --json` and `continuum simulate --json` used here)

export interface Dist {
  mean: number;
  p95: number;
}

export interface BenchResult {
  completed: number;
  scheduled: number;
  failed: number;
  jct: Dist;
  throughput_jps: number;
  makespan_s: number;
  cached_token_ratio: number;
  ttft: Dist;
  errors: Record<string, number>;
  wall_s: number;
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_bias: number | null;
}

export interface SimResult {
  policy: string;
  jps: number;
  completed: number;
  jct: Dist;
  throughput_jps: number;
  hit_ratio: number;
}

export interface LlamaConfig {
  readonly name: string;
  readonly np: number;
  readonly unified: boolean;
}

export interface RunRecord {
  load: string;
  jps: number;
  programs: number;
  server: string;
  /** which of the interleaved rounds (0-based): each round runs llama-server, then every policy */
  round: number;
  result: BenchResult;
}

export interface RawRow {
  pp: number;
  tg: number;
  pl: number;
  /** the peer at its best: prefill and decode each from its faster KV layout */
  llama: { speedPp: number; speedTg: number; kvUnified: boolean };
  /** llama-batched-bench with one unified KV buffer (-kvu), the layout our engine uses by default */
  llamaUnified: { speedPp: number; speedTg: number } | null;
  /** our engine at its best: prefill and decode each from its faster KV layout (unified, streams) */
  ours: { speedPp: number; speedTg: number };
  /** our engine's unified pool (serve's default layout) */
  oursUnified: { speedPp: number; speedTg: number } | null;
}
export function pick(r: BenchResult) {
  return {
    completed: r.completed,
    scheduled: r.scheduled,
    failed: r.failed,
    jct: { mean: r.jct.mean, p95: r.jct.p95 },
    throughput_jps: r.throughput_jps,
    makespan_s: r.makespan_s,
    ttft: { mean: r.ttft.mean, p95: r.ttft.p95 },
    cached_token_ratio: r.cached_token_ratio,
    prompt_tokens: r.prompt_tokens,
    completion_tokens: r.completion_tokens,
    prompt_tokens_bias: r.prompt_tokens_bias,
    errors: r.errors,
  };
}

/** What one comparison run measured (written as results.json, rendered into docs/benchmarks.md). */
export interface CompareResults {
  createdAt: string;
  totalSeconds: number;
  settings: {
    threads: number;
    kvTokens: number;
    maxNumSeqs: number;
    model: string;
    trace: string;
    programsInTrace: number;
    maxTurns: number;
    tokenScale: number;
    maxToolS: number;
    seed: number;
    rawRounds: number;
    serveRounds: number;
    loads: readonly { name: string; jps: number; programs: number }[];
    llamaCpp: { tag: string; commit: string; buildSeconds: number };
    /** our engine's CPU kernels, in words (loadedBackends().cpu) */
    cpuBackend?: string;
  };
  llamaServer: {
    chosen: LlamaConfig;
    chosenArgs: string;
    trial: { config: LlamaConfig; args: string; result: PickedResult }[];
  };
  continuum: { maxNumSeqs: number; args: string; trial: { maxNumSeqs: number; result: PickedResult }[] };
  raw: RawRow[];
  runs: (Omit<RunRecord, "result"> & { result: PickedResult })[];
  sims: { load: string; results: SimResult[] }[];
  stepSplits: { load: string; policy: string; totals: StepKindTotals[] }[];
}

export type PickedResult = ReturnType<typeof pick>;

/** The middle of a sample (the mean of the two middle values for an even count), and its extremes. */
export interface Spread {
  readonly median: number;
  readonly min: number;
  readonly max: number;
}

export function spread(xs: readonly number[]): Spread {
  const { p50, min, max } = summarize(xs);
  return { median: p50, min, max };
}

type RunOf = Omit<RunRecord, "result"> & { result: PickedResult };

/**
 * One server's runs at one load over the interleaved rounds: medians of its figures, and its ratios to
 * llama-server taken round by round (each against the llama-server run of the same round, minutes apart on
 * this drifting machine, rather than medians against medians).
 */
export interface ServerSummary {
  readonly server: string;
  readonly rounds: number;
  readonly completed: number;
  readonly scheduled: number;
  readonly jctMean: Spread;
  readonly jctP95: Spread;
  readonly throughput: Spread;
  readonly cachedRatio: Spread;
  readonly meanVsLlama: Spread | null;
  readonly p95VsLlama: Spread | null;
  readonly throughputVsLlama: Spread | null;
}

export function summarizeLoad(runs: readonly RunOf[], load: string): ServerSummary[] {
  const atLoad = runs.filter((x) => x.load === load);
  const servers = [...new Set(atLoad.map((x) => x.server))];
  const llamaByRound = new Map(
    atLoad.filter((x) => x.server === "llama-server").map((x) => [x.round, x.result]),
  );
  return servers.map((server) => {
    const own = atLoad.filter((x) => x.server === server);
    const vsLlama = (figure: (r: PickedResult) => number) => {
      const ratios = own.flatMap((x) => {
        const base = llamaByRound.get(x.round);
        return base && figure(base) > 0 ? [figure(x.result) / figure(base)] : [];
      });
      return ratios.length > 0 ? spread(ratios) : null;
    };
    return {
      server,
      rounds: own.length,
      completed: own.reduce((a, x) => a + x.result.completed, 0),
      scheduled: own.reduce((a, x) => a + x.result.scheduled, 0),
      jctMean: spread(own.map((x) => x.result.jct.mean)),
      jctP95: spread(own.map((x) => x.result.jct.p95)),
      throughput: spread(own.map((x) => x.result.throughput_jps)),
      cachedRatio: spread(own.map((x) => x.result.cached_token_ratio)),
      meanVsLlama: vsLlama((r) => r.jct.mean),
      p95VsLlama: vsLlama((r) => r.jct.p95),
      throughputVsLlama: vsLlama((r) => r.throughput_jps),
    };
  });
}

/** `0.70` for one round, `0.70 (0.64-0.74)` for several: the median and the range over the rounds. */
export function formatSpread(x: Spread | null, digits = 2): string {
  if (x === null) return "n/a";
  const f = (v: number) => v.toFixed(digits);
  return x.min === x.max ? f(x.median) : `${f(x.median)} (${f(x.min)}–${f(x.max)})`;
}

const BEGIN = "<!-- compare-llama-server:begin (generated by src/bench/compare/compare-llama-server.ts) -->";
const END = "<!-- compare-llama-server:end -->";

/** The generated block of docs/benchmarks.md. */
export function renderResults(r: CompareResults): string {
  const f = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : "n/a");
  const lines: string[] = [];
  const s = r.settings;
  lines.push(
    `Run of ${r.createdAt.slice(0, 16).replace("T", " ")} UTC, ${f(r.totalSeconds / 60, 1)} min end to end ` +
      `(llama.cpp ${s.llamaCpp.tag}, ${s.llamaCpp.commit.slice(0, 12)}, already built; the build itself took ` +
      `${f(s.llamaCpp.buildSeconds / 60, 1)} min). Model \`${s.model}\`, ${s.threads} thread(s), ${s.kvTokens} KV ` +
      `tokens for every server, Continuum max-num-seqs ${s.maxNumSeqs}. Trace: ${s.trace}, ${s.programsInTrace} ` +
      `programs cut to <= ${s.maxTurns} turns, tokens x${s.tokenScale}, tool times capped at ${s.maxToolS} s, seed ${s.seed}.` +
      (s.cpuBackend ? ` Our CPU kernels: ${s.cpuBackend}; llama.cpp's: its own build, GGML_NATIVE.` : ""),
  );
  lines.push("");
  lines.push("### Serving: mean and p95 JCT against llama-server");
  lines.push("");
  const rounds = s.serveRounds;
  if (rounds > 1) {
    lines.push(
      `${rounds} interleaved rounds per load (llama-server, then each policy, then again): each figure is the ` +
        "median over the rounds, each ratio the median of the per-round ratios (against llama-server's run of " +
        "the same round) with their range in brackets.",
    );
    lines.push("");
  }
  lines.push(
    "| load | server | done | mean JCT s | p95 JCT s | throughput jobs/s | mean / llama | p95 / llama | throughput / llama | cached prompt |",
  );
  lines.push("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const load of s.loads) {
    for (const x of summarizeLoad(r.runs, load.name)) {
      lines.push(
        `| ${load.name} (${load.jps} jobs/s, ${load.programs} programs) | ${x.server} | ${x.completed}/${x.scheduled} | ` +
          `${f(x.jctMean.median)} | ${f(x.jctP95.median)} | ${f(x.throughput.median, 3)} | ${formatSpread(x.meanVsLlama)} | ` +
          `${formatSpread(x.p95VsLlama)} | ${formatSpread(x.throughputVsLlama)} | ${f(x.cachedRatio.median * 100, 0)}% |`,
      );
    }
  }
  lines.push("");
  lines.push(`llama-server configuration: \`${r.llamaServer.chosenArgs}\` (best mean JCT of the trial).`);
  lines.push(`Continuum: \`${r.continuum.args}\` (best mean JCT of its trial, cachettl).`);
  if (r.runs.some((x) => x.server.startsWith("gateway "))) {
    lines.push(
      "`gateway <policy>`: `continuum gateway --engine llama-server --scheduling-policy <policy>` in front of the " +
        "same llama-server configuration (a fresh one each run), the bench sent to the gateway.",
    );
  }
  if (r.llamaServer.trial.length > 0 || r.continuum.trial.length > 0) {
    lines.push("");
    lines.push("| trial (heavy load, fewer programs) | done | mean JCT s | p95 JCT s | cached prompt |");
    lines.push("|---|---:|---:|---:|---:|");
    for (const t of r.llamaServer.trial) {
      lines.push(
        `| llama-server \`${t.args}\` | ${t.result.completed}/${t.result.scheduled} | ${f(t.result.jct.mean)} | ` +
          `${f(t.result.jct.p95)} | ${f(t.result.cached_token_ratio * 100, 0)}% |`,
      );
    }
    for (const t of r.continuum.trial) {
      lines.push(
        `| continuum cachettl \`--max-num-seqs ${t.maxNumSeqs}\` | ${t.result.completed}/${t.result.scheduled} | ` +
          `${f(t.result.jct.mean)} | ${f(t.result.jct.p95)} | ${f(t.result.cached_token_ratio * 100, 0)}% |`,
      );
    }
  }
  if (r.raw.length > 0) {
    lines.push("");
    lines.push("### Raw engine speed: our engine's batched bench against llama-batched-bench");
    lines.push("");
    lines.push(
      "| pp | tg | sequences | prefill t/s ours best | llama best | ratio | ours unified | llama -kvu | ratio | decode t/s ours best | llama best | ratio | ours unified | llama -kvu | ratio |",
    );
    lines.push("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    const ratio = (a: number | undefined, b: number | undefined) =>
      a === undefined || b === undefined ? "n/a" : f(a / b);
    const speed = (v: number | undefined, digits: number) => (v === undefined ? "n/a" : f(v, digits));
    for (const x of r.raw) {
      const u = x.llamaUnified ?? undefined;
      const o = x.oursUnified ?? undefined;
      lines.push(
        `| ${x.pp} | ${x.tg} | ${x.pl} | ${f(x.ours.speedPp, 0)} | ${f(x.llama.speedPp, 0)} | ${f(x.ours.speedPp / x.llama.speedPp)} | ` +
          `${speed(o?.speedPp, 0)} | ${speed(u?.speedPp, 0)} | ${ratio(o?.speedPp, u?.speedPp)} | ` +
          `${f(x.ours.speedTg, 1)} | ${f(x.llama.speedTg, 1)} | ${f(x.ours.speedTg / x.llama.speedTg)} | ` +
          `${speed(o?.speedTg, 1)} | ${speed(u?.speedTg, 1)} | ${ratio(o?.speedTg, u?.speedTg)} |`,
      );
    }
    lines.push("");
    lines.push(
      "\"best\" takes, per row, the faster of each engine's two KV layouts: per-sequence streams (llama-batched-bench's " +
        "default, our `--kv-layout streams`) and one unified pool (its `-kvu`, our default). Every figure is " +
        `the best of ${r.settings.rawRounds} interleaved rounds (ours, then llama's, alternately).`,
    );
  }
  if (r.sims.length > 0) {
    lines.push("");
    lines.push("### Simulator with the measured profile against the real engine");
    lines.push("");
    lines.push(
      "| load | policy | real mean JCT s | simulated mean JCT s | error | real p95 s | simulated p95 s |",
    );
    lines.push("|---|---|---:|---:|---:|---:|---:|");
    for (const sim of r.sims) {
      for (const p of sim.results) {
        const real = realRuns(r, sim.load, p.policy);
        if (!real) continue;
        const err = (p.jct.mean - real.jctMean.median) / real.jctMean.median;
        lines.push(
          `| ${sim.load} | ${p.policy} | ${f(real.jctMean.median)} | ${f(p.jct.mean)} | ${f(err * 100, 1)}% | ` +
            `${f(real.jctP95.median)} | ${f(p.jct.p95)} |`,
        );
      }
    }
  }
  if (r.stepSplits.length > 0) {
    const x = (a: number, b: number) => (b > 0 ? `${f(a / b)}x` : "n/a");
    lines.push("");
    lines.push("### Where the simulator and the engine part, step by step");
    lines.push("");
    lines.push(
      `Every engine step of the runs above${rounds > 1 ? " (first round)" : ""}, priced by the profile ` +
        "(`continuum analyze-steps`): as the plan " +
        'the simulator sees ("plan") and as the rows the engine ran ("ran", recomputes included). ' +
        "wall/compute is the loop outside the model, compute/ran the latency model's error on the work done, " +
        "ran/plan the work the simulator does not see, wall/plan all of it.",
    );
    lines.push("");
    lines.push(
      "| load | policy | step kind | steps | wall s | wall/compute | compute/ran | ran/plan | wall/plan |",
    );
    lines.push("|---|---|---|---:|---:|---:|---:|---:|---:|");
    for (const split of r.stepSplits) {
      for (const t of split.totals) {
        lines.push(
          `| ${split.load} | ${split.policy} | ${t.kind} | ${t.steps} | ${f(t.wallS)} | ${x(t.wallS, t.computeS)} | ` +
            `${x(t.computeS, t.pricedRanS)} | ${x(t.pricedRanS, t.pricedPlannedS)} | ${x(t.wallS, t.pricedPlannedS)} |`,
        );
      }
    }
  }
  lines.push("");
  lines.push("### Targets");
  lines.push("");
  lines.push("| target | measured | verdict |");
  lines.push("|---|---|---|");
  for (const load of s.loads) {
    // Continuum's default policy, or the paper's where a run served only that
    const summaries = summarizeLoad(r.runs, load.name);
    const ours =
      summaries.find((x) => x.server === "continuum cachettl-adaptive") ??
      summaries.find((x) => x.server === "continuum cachettl");
    const ratio = ours?.meanVsLlama;
    if (!ours || !ratio) continue;
    const name = ours.server.replace("continuum ", "");
    // heavy: issue #57's 0.55x while carrying at least llama-server's throughput
    const goal = load.name === "heavy" ? 0.55 : 1.02;
    lines.push(
      `| ${load.name} load: Continuum (${name}) mean JCT <= ${goal}x llama-server | ${formatSpread(ratio)}x | ` +
        `${ratio.median <= goal ? "met" : `missed by ${f(((ratio.median - goal) / goal) * 100, 0)}%`} |`,
    );
    const throughput = ours.throughputVsLlama;
    if (load.name === "heavy" && throughput) {
      lines.push(
        `| heavy load: Continuum (${name}) throughput >= 1.0x llama-server | ${formatSpread(throughput)}x | ` +
          `${throughput.median >= 1 ? "met" : `missed by ${f((1 - throughput.median) * 100, 0)}%`} |`,
      );
    }
  }
  const heavy = s.loads.find((load) => load.name === "heavy");
  const gateway = heavy
    ? summarizeLoad(r.runs, heavy.name).find((x) => x.server === "gateway cachettl-adaptive")
    : undefined;
  if (gateway?.meanVsLlama && gateway.throughputVsLlama) {
    // issue #54: the gateway over llama-server against llama-server alone (goal 0.65x)
    const mean = gateway.meanVsLlama;
    const throughput = gateway.throughputVsLlama;
    lines.push(
      `| heavy load: gateway (cachettl-adaptive) mean JCT <= 0.8x llama-server (goal 0.65x) | ${formatSpread(mean)}x | ` +
        `${mean.median <= 0.8 ? "met" : `missed by ${f(((mean.median - 0.8) / 0.8) * 100, 0)}%`} |`,
    );
    lines.push(
      `| heavy load: gateway (cachettl-adaptive) throughput >= 1.0x llama-server | ${formatSpread(throughput)}x | ` +
        `${throughput.median >= 1 ? "met" : `missed by ${f((1 - throughput.median) * 100, 0)}%`} |`,
    );
  }
  if (r.raw.length > 0) {
    // issue #57: at every batch size, one sequence included
    for (const what of ["prefill", "decode"] as const) {
      const ratios = r.raw.map((x) => ({
        pl: x.pl,
        v: what === "prefill" ? x.ours.speedPp / x.llama.speedPp : x.ours.speedTg / x.llama.speedTg,
      }));
      const lowest = ratios.reduce((a, b) => (b.v < a.v ? b : a));
      const all = ratios.map((x) => `${f(x.v)} (${x.pl})`).join(", ");
      lines.push(
        `| engine ${what} tokens/s >= 1.0x llama-batched-bench at every row (sequences) | ${all} | ` +
          `${lowest.v >= 1 ? "met" : `missed by ${f((1 - lowest.v) * 100, 0)}% at ${lowest.pl} sequence(s)`} |`,
      );
    }
  }
  for (const sim of r.sims) {
    for (const p of sim.results) {
      const real = realRuns(r, sim.load, p.policy);
      if (!real) continue;
      const err = Math.abs(p.jct.mean - real.jctMean.median) / real.jctMean.median;
      // queueing amplifies a step's error under load: the target allows more there
      const goal = sim.load === "heavy" ? 0.15 : 0.1;
      lines.push(
        `| sim-vs-real mean JCT error <= ${f(goal * 100, 0)}% (${sim.load}, ${p.policy}) | ${f(err * 100, 1)}% | ` +
          `${err <= goal ? "met" : `missed by ${f((err - goal) * 100, 1)} points`} |`,
      );
    }
  }
  return lines.join("\n");
}

/** A policy's real runs at a load, summarized over the rounds. */
function realRuns(r: CompareResults, load: string, policy: string): ServerSummary | undefined {
  return summarizeLoad(r.runs, load).find((x) => x.server === `continuum ${policy}`);
}

/** Replaces the generated block of `path` (or appends it under a Results heading). */
export async function writeDocBlock(path: string, block: string): Promise<void> {
  const generated = `${BEGIN}\n${block}\n${END}`;
  let text = existsSync(path) ? await readFile(path, "utf8") : "";
  const a = text.indexOf(BEGIN);
  const b = text.indexOf(END);
  if (a >= 0 && b > a) text = text.slice(0, a) + generated + text.slice(b + END.length);
  else text = `${text}${text.endsWith("\n") || text === "" ? "" : "\n"}\n## Results\n\n${generated}\n`;
  await writeFile(path, text);
}
