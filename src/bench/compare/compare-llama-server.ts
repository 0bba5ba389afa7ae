import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { basename, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { NATIVE_CPU_VARIANT, PREBUILT_CPU_VARIANTS } from "../../engine/native/cpu-backend-location.js";
import { loadedBackends } from "../../engine/native/llama-native.js";
import {
  type BuiltinPreset,
  ensureBuiltinModel,
  metaNumber,
  metaString,
  readGgufInfo,
} from "../../gguf/index.js";
import { measureProfileToFile } from "../../profiler/profile-file.js";
import { loadEngineProfile } from "../../sim/hardware/engine-profile.js";
import { generateWorkload } from "../../workload/generators.js";
import { loadTrace, serializeTraceJsonl } from "../../workload/trace.js";
import { analyzeSteps, readStepLog, type StepKindTotals } from "../step-log-analysis.js";
import { prepareTrace } from "./prepare-trace.js";
import { freePort, HOST, REPO_ROOT, runCommand, type Server, startServer, stopServer } from "./processes.js";
import { compareRawKernels } from "./raw-kernels.js";
import {
  type BenchResult,
  type CompareResults,
  type LlamaConfig,
  pick,
  type RawRow,
  type RunRecord,
  renderResults,
  type SimResult,
  writeDocBlock,
} from "./results.js";

const ROOT = REPO_ROOT;
const SHARED_TRACE = resolve(ROOT, "..", "shared", "traces", "swe-agent-lm32b.jsonl");

// ---------------------------------------------------------------------------------------------------------
// options

const { values: args } = parseArgs({
  options: {
    threads: { type: "string", default: "1" },
    "kv-tokens": { type: "string", default: "16384" },
    seqs: { type: "string", default: "1,2" },
    model: { type: "string" },
    "builtin-model": { type: "string", default: "small" },
    "out-dir": { type: "string" },
    doc: { type: "string", default: join(ROOT, "docs", "benchmarks.md") },
    "light-jps": { type: "string", default: "0.25" },
    "light-programs": { type: "string", default: "8" },
    "heavy-jps": { type: "string", default: "4" },
    "heavy-programs": { type: "string", default: "20" },
    "trial-programs": { type: "string", default: "8" },
    "max-turns": { type: "string", default: "8" },
    "token-scale": { type: "string", default: "0.1" },
    "max-tool-s": { type: "string", default: "3" },
    np: { type: "string", default: "1,2,4" },
    "cache-ram-mib": { type: "string", default: "4096" },
    // ours, the paper's and the fork's rules, and the peers of issue #32 (ThunderAgent, CONCUR);
    // `<policy>@<kv type>` serves with `--kv-cache-dtype <kv type>` (not simulated)
    policies: {
      type: "string",
      default:
        "vllm,cachettl,cachettl-adaptive,cachettl-adaptive@q8_0,continuum-heuristic,thunderagent,concur",
    },
    // `continuum gateway --engine llama-server` in front of the same llama-server, one row per policy
    // ("" for none): the gateway's scheduling over an engine it does not own, against that engine alone
    "gateway-policies": { type: "string", default: "cachettl-adaptive,thunderagent" },
    seed: { type: "string", default: "1" },
    // the agent trace replayed (default: the SWE-agent trace beside the repository when there is one,
    // else a generated SWE-bench workload, said on stderr and in the report)
    trace: { type: "string" },
    "no-trial": { type: "boolean", default: false },
    "skip-sim": { type: "boolean", default: false },
    "skip-raw": { type: "boolean", default: false },
    "raw-rounds": { type: "string", default: "2" },
    // serving runs per load, interleaved (llama-server, each policy, again): medians and ranges; a round
    // took ~12 min with four policies (~18 min expected with six), so one by default
    "serve-rounds": { type: "string", default: "1" },
    // the `continuum` entry point run for serve / bench / simulate (tsx)
    cli: { type: "string", default: join(ROOT, "src", "cli", "main.ts") },
    // use these llama-server / llama-batched-bench binaries instead of building (meta.json beside bin/ if any)
    "llama-bin-dir": { type: "string" },
    // our engine's CPU kernels: "native" (continuum build-cpu: compiled for this CPU, as llama.cpp's build
    // compiles its own with GGML_NATIVE) or "prebuilt" (ggml's pick of the packaged variants)
    "cpu-backend": { type: "string", default: "native" },
  },
});
const CLI = ["--import", "tsx", resolve(args.cli)];

const threads = Number(args.threads);
const kvTokens = Number(args["kv-tokens"]);
const seed = Number(args.seed);
/** RAM for KV that left the pool: llama-server's --cache-ram, Continuum's --cpu-offload-gb */
const ramGb = Number(args["cache-ram-mib"]) / 1024;
/** the Continuum servers to run: a policy, and `@<kv type>` for a KV element type other than f16 */
const policies = args.policies
  .split(",")
  .map((s) => s.trim())
  .filter((s) => s.length > 0);
const gatewayPolicies = args["gateway-policies"]
  .split(",")
  .map((s) => s.trim())
  .filter((s) => s.length > 0);
/** the policies the simulator predicts (it has no q8_0 KV) */
const simulatedPolicies = policies.filter((p) => !p.includes("@"));
const serveRounds = Number(args["serve-rounds"]);
if (!Number.isInteger(serveRounds) || serveRounds < 1)
  throw new Error("--serve-rounds must be a whole number >= 1");
const stamp = new Date().toISOString().replace(/[:.]/g, "-");
const outDir = resolve(args["out-dir"] ?? join(ROOT, ".cache", "compare", stamp));
const loads = [
  { name: "light", jps: Number(args["light-jps"]), programs: Number(args["light-programs"]) },
  { name: "heavy", jps: Number(args["heavy-jps"]), programs: Number(args["heavy-programs"]) },
] as const;

const t0 = performance.now();
const elapsed = () => `${((performance.now() - t0) / 1000).toFixed(0)} s`;
function log(line: string) {
  process.stderr.write(`[compare ${elapsed()}] ${line}\n`);
}

async function runBench(server: Server, jps: number, programs: number, tag: string): Promise<BenchResult> {
  const out = join(outDir, `bench-${tag}.json`);
  const stdout = await runCommand(
    process.execPath,
    [
      ...CLI,
      "bench",
      "--url",
      server.url,
      "--trace",
      tracePath,
      "--jps",
      String(jps),
      "--programs",
      String(programs),
      "--seed",
      String(seed),
      "--label",
      tag,
      "--quiet",
      "--json",
      "--out",
      out,
    ],
    join(outDir, `bench-${tag}.log`),
  );
  const parsed = JSON.parse(stdout) as BenchResult | { runs: BenchResult[] };
  return "runs" in parsed ? parsed.runs[0]! : parsed;
}

/** Model, threads, KV size, batch sizes and flash attention: the same for llama-server and its bench. */
function llamaCommonArgv(model: string): string[] {
  return [
    "-m",
    model,
    "-t",
    String(threads),
    "-tb",
    String(threads),
    "-c",
    String(kvTokens),
    "-b",
    "512",
    "-ub",
    "512",
    "-fa",
    "on",
  ];
}

function llamaServerArgv(model: string, port: number, c: LlamaConfig): string[] {
  return [
    ...llamaCommonArgv(model),
    "--host",
    HOST,
    "--port",
    String(port),
    "-np",
    String(c.np),
    c.unified ? "-kvu" : "-no-kvu",
    "--cache-prompt",
    "--cache-ram",
    args["cache-ram-mib"],
    "--no-webui",
    "--no-warmup",
  ];
}

async function withLlamaServer<T>(
  bin: string,
  model: string,
  c: LlamaConfig,
  body: (s: Server) => Promise<T>,
): Promise<T> {
  const port = await freePort();
  const server = await startServer(`llama-${c.name}`, bin, llamaServerArgv(model, port, c), port, outDir);
  try {
    return await body(server);
  } finally {
    await stopServer(server);
  }
}

/** The engine settings `continuum serve` runs with and `continuum simulate` models. */
function continuumEngineArgv(maxNumSeqs: number): string[] {
  return [
    "--max-num-seqs",
    String(maxNumSeqs),
    "--max-num-batched-tokens",
    "512",
    "--cpu-offload-gb",
    String(ramGb),
  ];
}

async function withContinuum<T>(
  server: string,
  maxNumSeqs: number,
  model: string,
  profile: string,
  body: (s: Server) => Promise<T>,
  stepLog?: string,
) {
  const [policy, kvCacheDtype] = server.split("@") as [string, string | undefined];
  const port = await freePort();
  const argv = [
    ...CLI,
    "serve",
    "--model",
    model,
    "--threads",
    String(threads),
    "--kv-cache-tokens",
    String(kvTokens),
    ...continuumEngineArgv(maxNumSeqs),
    "--scheduling-policy",
    policy,
    ...(kvCacheDtype ? ["--kv-cache-dtype", kvCacheDtype] : []),
    "--profile",
    profile,
    ...(stepLog ? ["--step-log", stepLog] : []),
    "--host",
    HOST,
    "--port",
    String(port),
  ];
  const running = await startServer(`continuum-${server}`, process.execPath, argv, port, outDir);
  try {
    return await body(running);
  } finally {
    await stopServer(running);
  }
}

/** `continuum gateway` with `policy` in front of llama-server `c` (same model, threads, slots and RAM cache). */
async function withGateway<T>(
  bin: string,
  model: string,
  c: LlamaConfig,
  policy: string,
  body: (s: Server) => Promise<T>,
): Promise<T> {
  return withLlamaServer(bin, model, c, async (backend) => {
    const port = await freePort();
    const argv = [
      ...CLI,
      "gateway",
      "--backend",
      // one KV pool over the slots (-kvu): say its size, which /props cannot
      c.unified ? `${backend.url}?kv-tokens=${kvTokens}` : backend.url,
      "--engine",
      "llama-server",
      "--scheduling-policy",
      policy,
      "--host",
      HOST,
      "--port",
      String(port),
    ];
    const gateway = await startServer(`gateway-${policy}`, process.execPath, argv, port, outDir);
    try {
      return await body(gateway);
    } finally {
      await stopServer(gateway);
    }
  });
}

// ---------------------------------------------------------------------------------------------------------
// main

await mkdir(outDir, { recursive: true });
log(`output in ${relative(ROOT, outDir) || outDir}`);
for (const command of ["serve", "bench", "simulate"]) {
  try {
    await runCommand(process.execPath, [...CLI, command, "--help"], join(outDir, `cli-${command}-help.log`));
  } catch {
    throw new Error(
      `\`continuum ${command}\` is not available from ${args.cli} (is it registered in main.ts?)`,
    );
  }
}

// 1. llama-server
const binDir = args["llama-bin-dir"]
  ? resolve(args["llama-bin-dir"])
  : (
      await runCommand(
        process.execPath,
        [join(ROOT, "scripts", "build-llama-server.mjs")],
        join(outDir, "build-llama-server.log"),
      )
    )
      .trim()
      .split("\n")
      .at(-1)!
      .trim();
const llamaServerBin = join(binDir, "llama-server");
const batchedBenchBin = join(binDir, "llama-batched-bench");
const metaPath = join(binDir, "..", "meta.json");
const buildMeta = existsSync(metaPath)
  ? (JSON.parse(await readFile(metaPath, "utf8")) as {
      llamaCppTag: string;
      commit: string;
      buildSeconds: number;
    })
  : { llamaCppTag: "unknown", commit: "unknown", buildSeconds: Number.NaN };
log(`llama-server ${buildMeta.llamaCppTag} (${buildMeta.commit.slice(0, 12)}) ready`);

// our CPU kernels; every engine this run starts (serve, profile, the raw bench) inherits the choice
if (args["cpu-backend"] === "native") {
  await runCommand(process.execPath, [...CLI, "build-cpu"], join(outDir, "build-cpu.log"));
  process.env["CONTINUUM_GGML_CPU"] = NATIVE_CPU_VARIANT;
} else if (args["cpu-backend"] === "prebuilt") {
  process.env["CONTINUUM_GGML_CPU"] = PREBUILT_CPU_VARIANTS;
} else {
  throw new Error(`--cpu-backend ${args["cpu-backend"]}: native or prebuilt`);
}
const cpuBackend = loadedBackends().cpu.replace(`${REPO_ROOT}/`, "");
log(`our CPU kernels: ${cpuBackend}`);

// 2. model
const modelPath =
  args.model ?? (await ensureBuiltinModel({ preset: args["builtin-model"] as BuiltinPreset }));
const ggufInfo = await readGgufInfo(modelPath);
const modelContext = metaNumber(ggufInfo, `${metaString(ggufInfo, "general.architecture")}.context_length`);
log(`model ${modelPath} (context ${modelContext})`);

// workload
if (args.trace !== undefined && !existsSync(args.trace))
  throw new Error(`--trace ${args.trace}: no such file`);
const traceSource = args.trace ?? (existsSync(SHARED_TRACE) ? SHARED_TRACE : null);
const traceLabel = traceSource ? basename(traceSource) : "generated swe-bench";
const sourcePrograms = traceSource
  ? await loadTrace(traceSource)
  : generateWorkload({ kind: "swe-bench", programs: 200, seed });
const prepared = prepareTrace(sourcePrograms, {
  maxTurns: Number(args["max-turns"]),
  tokenScale: Number(args["token-scale"]),
  maxToolS: Number(args["max-tool-s"]),
  maxContext: Math.min(modelContext, kvTokens),
});
const tracePath = join(outDir, "trace.jsonl");
await writeFile(tracePath, `${serializeTraceJsonl(prepared)}\n`);
log(
  `trace: ${traceLabel}${traceSource ? "" : " (no --trace, and no ../shared/traces beside the repository)"} -> ` +
    `${prepared.length} programs, ` +
    `<= ${args["max-turns"]} turns, tokens x${args["token-scale"]}, tools <= ${args["max-tool-s"]} s`,
);

// 3. profile of our engine (for its serving runs and the simulator)
const profilePath = join(outDir, "profile.json");
const needsProfile = policies.length > 0 || !args["skip-sim"];
const profileFile = !needsProfile
  ? null
  : await measureProfileToFile(
      {
        model: modelPath,
        threads,
        kvCacheTokens: kvTokens,
        maxNumBatchedTokens: 512,
        quick: false,
        out: profilePath,
        json: false,
        prefillTokens: [256, 512, 1024, 2048, 4096],
        decodeBatches: [1, 2, 4, 8, 16],
        decodeContexts: [0, 512, 2048],
      },
      (line) => log(`profile: ${line}`),
      (text) => log(`profile: ${text.trimEnd()}`),
    );

const profileLatency = profileFile === null ? null : loadEngineProfile(profileFile).latency;

// 4. raw kernels: llama-batched-bench vs ours
const raw: RawRow[] = args["skip-raw"]
  ? []
  : await compareRawKernels({
      batchedBenchBin,
      llamaArgv: llamaCommonArgv(modelPath),
      modelPath,
      threads,
      kvTokens,
      rounds: Number(args["raw-rounds"]),
      outDir,
    });
for (const r of raw) {
  log(
    `raw pp ${r.pp} tg ${r.tg} pl ${r.pl}: prefill ${r.ours.speedPp.toFixed(0)} vs ${r.llama.speedPp.toFixed(0)} t/s, ` +
      `decode ${r.ours.speedTg.toFixed(1)} vs ${r.llama.speedTg.toFixed(1)} t/s`,
  );
}

// 5. both servers at their best: a short trial at the heavy load
const heavy = loads[1];
const npList = args.np.split(",").map(Number);
const maxPrompt = Math.max(...prepared.flatMap((p) => p.turns.map((t) => t.input + t.output)));
const candidates: LlamaConfig[] = [];
for (const np of npList) {
  // per-slot KV only where a slot still holds the longest conversation; one slot is the same either way
  const perSlot = kvTokens / np >= maxPrompt;
  if (perSlot) candidates.push({ name: `np${np}`, np, unified: false });
  if (!perSlot || np === Math.max(...npList)) candidates.push({ name: `np${np}-kvu`, np, unified: true });
}
const trial: { config: LlamaConfig; result: BenchResult }[] = [];
let best: LlamaConfig = candidates.find((c) => c.unified) ?? candidates[0]!;
if (!args["no-trial"] && candidates.length > 1) {
  const trialPrograms = Number(args["trial-programs"]);
  for (const config of candidates) {
    const result = await withLlamaServer(llamaServerBin, modelPath, config, (s) =>
      runBench(s, heavy.jps, trialPrograms, `trial-${config.name}`),
    );
    log(
      `trial llama-server ${config.name}: mean JCT ${result.jct.mean.toFixed(2)} s, p95 ${result.jct.p95.toFixed(2)} s, ` +
        `${result.completed}/${result.scheduled} done, cached ${(result.cached_token_ratio * 100).toFixed(0)}%`,
    );
    trial.push({ config, result });
  }
  const ok = trial.filter((t) => t.result.failed === 0 && t.result.completed === t.result.scheduled);
  const pool = ok.length > 0 ? ok : trial;
  best = pool.reduce((a, b) => (b.result.jct.mean < a.result.jct.mean ? b : a)).config;
}
log(`llama-server config: ${best.name}`);

const seqsList = args.seqs.split(",").map(Number);
const continuumTrial: { maxNumSeqs: number; result: BenchResult }[] = [];
let maxNumSeqs = Math.max(...seqsList);
if (!args["no-trial"] && seqsList.length > 1 && policies.length > 0) {
  const trialPrograms = Number(args["trial-programs"]);
  for (const seqs of seqsList) {
    const result = await withContinuum("cachettl", seqs, modelPath, profilePath, (s) =>
      runBench(s, heavy.jps, trialPrograms, `trial-continuum-seqs${seqs}`),
    );
    log(
      `trial continuum cachettl --max-num-seqs ${seqs}: mean JCT ${result.jct.mean.toFixed(2)} s, ` +
        `p95 ${result.jct.p95.toFixed(2)} s, ${result.completed}/${result.scheduled} done`,
    );
    continuumTrial.push({ maxNumSeqs: seqs, result });
  }
  const ok = continuumTrial.filter((t) => t.result.failed === 0 && t.result.completed === t.result.scheduled);
  maxNumSeqs = (ok.length > 0 ? ok : continuumTrial).reduce((a, b) =>
    b.result.jct.mean < a.result.jct.mean ? b : a,
  ).maxNumSeqs;
}
log(`continuum --max-num-seqs ${maxNumSeqs}`);

// 6. the replays, in interleaved rounds: llama-server, then each policy, then again (the machine drifts, so
// each ratio is taken against the llama-server run of its own round). Each Continuum run logs its engine
// steps; the first round's logs show where the simulator's price and the engine part.
const runs: RunRecord[] = [];
const stepSplits: { load: string; policy: string; totals: StepKindTotals[] }[] = [];
for (const load of loads) {
  for (let round = 0; round < serveRounds; round++) {
    const record = (server: string, result: BenchResult) => {
      runs.push({ load: load.name, jps: load.jps, programs: load.programs, server, round, result });
      log(
        `${load.name} (${load.jps} jobs/s, ${load.programs} programs) round ${round + 1}/${serveRounds} ${server}: ` +
          `mean JCT ${result.jct.mean.toFixed(2)} s, p95 ${result.jct.p95.toFixed(2)} s, ` +
          `${result.throughput_jps.toFixed(3)} jobs/s, ${result.completed}/${result.scheduled} done`,
      );
    };
    const tag = (name: string) => `${load.name}-${name}${serveRounds > 1 ? `-r${round + 1}` : ""}`;
    record(
      "llama-server",
      await withLlamaServer(llamaServerBin, modelPath, best, (s) =>
        runBench(s, load.jps, load.programs, tag("llama-server")),
      ),
    );
    for (const policy of policies) {
      const stepLog = round === 0 ? join(outDir, `steps-${load.name}-${policy}.jsonl`) : undefined;
      record(
        `continuum ${policy}`,
        await withContinuum(
          policy,
          maxNumSeqs,
          modelPath,
          profilePath,
          (s) => runBench(s, load.jps, load.programs, tag(`continuum-${policy}`)),
          stepLog,
        ),
      );
      if (stepLog && profileLatency !== null) {
        stepSplits.push({
          load: load.name,
          policy,
          totals: analyzeSteps(readStepLog(stepLog), profileLatency),
        });
      }
    }
    for (const policy of gatewayPolicies) {
      record(
        `gateway ${policy}`,
        await withGateway(llamaServerBin, modelPath, best, policy, (s) =>
          runBench(s, load.jps, load.programs, tag(`gateway-${policy}`)),
        ),
      );
    }
  }
}

// 7. the simulator with our profile
const sims: { load: string; results: SimResult[] }[] = [];
if (!args["skip-sim"]) {
  for (const load of loads) {
    const out = await runCommand(
      process.execPath,
      [
        ...CLI,
        "simulate",
        "--profile",
        profilePath,
        "--trace",
        tracePath,
        "--jps",
        String(load.jps),
        "--programs",
        String(load.programs),
        "--seed",
        String(seed),
        "--policies",
        simulatedPolicies.join(","),
        ...continuumEngineArgv(maxNumSeqs),
        "--json",
        "--no-report",
      ],
      join(outDir, `simulate-${load.name}.log`),
    );
    sims.push({ load: load.name, results: (JSON.parse(out) as { results: SimResult[] }).results });
  }
}

// 8. results
const totalS = (performance.now() - t0) / 1000;
const results: CompareResults = {
  createdAt: new Date().toISOString(),
  totalSeconds: totalS,
  settings: {
    threads,
    kvTokens,
    maxNumSeqs,
    model: relative(ROOT, modelPath).startsWith("..") ? modelPath : relative(ROOT, modelPath),
    trace: traceLabel,
    programsInTrace: prepared.length,
    maxTurns: Number(args["max-turns"]),
    tokenScale: Number(args["token-scale"]),
    maxToolS: Number(args["max-tool-s"]),
    seed,
    rawRounds: Number(args["raw-rounds"]),
    serveRounds,
    loads,
    llamaCpp: { tag: buildMeta.llamaCppTag, commit: buildMeta.commit, buildSeconds: buildMeta.buildSeconds },
    cpuBackend,
  },
  llamaServer: {
    chosen: best,
    chosenArgs: describeConfig(best),
    trial: trial.map((t) => ({ config: t.config, args: describeConfig(t.config), result: pick(t.result) })),
  },
  continuum: {
    maxNumSeqs,
    args: continuumEngineArgv(maxNumSeqs).join(" "),
    trial: continuumTrial.map((t) => ({ maxNumSeqs: t.maxNumSeqs, result: pick(t.result) })),
  },
  raw,
  runs: runs.map((r) => ({ ...r, result: pick(r.result) })),
  sims,
  stepSplits,
};
await writeFile(join(outDir, "results.json"), `${JSON.stringify(results, null, 2)}\n`);
const block = renderResults(results);
process.stdout.write(`${block}\n`);
if (args.doc) {
  await writeDocBlock(args.doc, block);
  log(`updated ${relative(ROOT, args.doc)}`);
}
log(`done in ${(totalS / 60).toFixed(1)} min; results in ${relative(ROOT, outDir)}/results.json`);

/** llama-server's flags for a configuration, as the doc prints them. */
function describeConfig(c: LlamaConfig): string {
  return `-np ${c.np} ${c.unified ? "-kvu" : "-no-kvu"} -c ${kvTokens} --cache-prompt --cache-ram ${args["cache-ram-mib"]} -fa on -b 512 -ub 512 -t ${threads} -tb ${threads}`;
}
