/**
 * `npm run gpu-check`: does Continuum serve on this machine's NVIDIA GPU, and how well? In one run, on a
 * machine without network: builds the CUDA plugin (`continuum build-gpu`) while generating the 8B-shaped
 * models, serves the q8_0 one with every layer on the GPU under cachettl-adaptive and vllm, replays agent
 * programs at a light and a heavy load against each, runs `continuum profile`, times llama.cpp's steps at a
 * reference's shapes (--reference), and writes one JSON summary with the verdict beside the logs.
 *
 * `--rehearsal` runs the same stages on the CPU with the tiny model and short loads, no build: a check of
 * the check, for machines without a GPU.
 */
import { spawn } from "node:child_process";
import { createWriteStream, existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { parseReferenceSteps } from "../../core/profile/step-reference.js";
import { type BuiltinPreset, ensureBuiltinModel } from "../../gguf/index.js";
import { compareSteps, type StepShapeResult } from "../../profiler/step-shapes.js";
import { freePort, HOST, REPO_ROOT, runCommand, startServer, stopServer } from "../compare/processes.js";
import { readStepLog } from "../step-log-analysis.js";
import { restartCheck } from "./restart-check.js";
import {
  type BenchFigures,
  type CheckFigures,
  formatVerdict,
  judge,
  parseDeviceInfoMetric,
  type RestartFigures,
  type TierFigures,
} from "./verdict.js";

const { values: args } = parseArgs({
  options: {
    "out-dir": { type: "string" },
    reference: { type: "string" },
    "serve-model": { type: "string", default: "llama-3.1-8b-q8_0" },
    // bf16, as the reference's PyTorch weights are: llama.cpp multiplies f16 with f16 output and converts
    // it after each product: f16 took 1.02-1.15x bf16's model time at prefill on an H100 (docs/gpu.md)
    "steps-model": { type: "string", default: "llama-3.1-8b-bf16" },
    "skip-build": { type: "boolean", default: false },
    rehearsal: { type: "boolean", default: false },
    "kv-cache-tokens": { type: "string", default: "16384" },
    "max-num-seqs": { type: "string", default: "32" },
    "max-num-batched-tokens": { type: "string", default: "2048" },
    policies: { type: "string", default: "cachettl-adaptive,vllm" },
  },
});

const rehearsal = args.rehearsal === true;
const CLI = [join(REPO_ROOT, "bin", "continuum.js")];
const outDir = resolve(
  args["out-dir"] ?? join(REPO_ROOT, ".cache", "gpu-check", new Date().toISOString().replace(/[:.]/g, "-")),
);
const servePreset = (rehearsal ? "tiny" : args["serve-model"]) as BuiltinPreset;
const stepsPreset = (rehearsal ? "tiny" : args["steps-model"]) as BuiltinPreset;
const gpuLayers = rehearsal ? "auto" : "all";
const policies = (args.policies ?? "").split(",").filter((p) => p !== "");

/**
 * Agent programs from the generated SWE-bench-like workload, scaled so that one load runs in well under a
 * minute on an H100: a light load where programs rarely overlap, a heavy one where their KV outgrows the
 * pool (simulated on an H100 beforehand: vllm 16.9 s mean JCT, cachettl-adaptive 11.8 s).
 */
const LOADS = rehearsal
  ? [
      { name: "light", jps: 0.5, programs: 2, tokenScale: 0.01 },
      { name: "heavy", jps: 4, programs: 4, tokenScale: 0.01 },
    ]
  : [
      { name: "light", jps: 0.3, programs: 3, tokenScale: 0.1 },
      { name: "heavy", jps: 2, programs: 12, tokenScale: 0.1 },
    ];
const TOOL_TIME_SCALE = 0.1;

const t0 = performance.now();
const elapsed = () => `${((performance.now() - t0) / 1000).toFixed(0)} s`;
function log(line: string): void {
  process.stderr.write(`[gpu-check ${elapsed()}] ${line}\n`);
}

interface Stage {
  name: string;
  ok: boolean;
  seconds: number;
  error?: string;
}
const stages: Stage[] = [];

/** Runs a stage; its failure is recorded and the check goes on with what does not depend on it. */
async function stage<T>(name: string, body: () => Promise<T>): Promise<T | null> {
  const start = performance.now();
  log(`${name}...`);
  try {
    const value = await body();
    stages.push({ name, ok: true, seconds: (performance.now() - start) / 1000 });
    log(`${name}: done in ${((performance.now() - start) / 1000).toFixed(1)} s`);
    return value;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    stages.push({ name, ok: false, seconds: (performance.now() - start) / 1000, error: message });
    log(`${name}: FAILED: ${message}`);
    return null;
  }
}

/** A command's output to `logFile`; resolves with its exit code (never rejects). */
function runLogged(cmd: string, argv: readonly string[], logFile: string): Promise<number> {
  return new Promise((res) => {
    const file = createWriteStream(logFile);
    file.write(`$ ${cmd} ${argv.join(" ")}\n`);
    const child = spawn(cmd, argv, { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.pipe(file, { end: false });
    child.stderr.pipe(file, { end: false });
    // 'close' comes after the child's output is read to its end ('exit' can come before: a write after end)
    let failedToStart: Error | null = null;
    child.on("error", (e) => {
      failedToStart = e;
    });
    child.on("close", (code, signal) => {
      file.end(failedToStart ? `\n${failedToStart.message}\n` : `\nexit ${signal ?? code}\n`);
      res(failedToStart ? 127 : (code ?? 128));
    });
  });
}

async function environment(): Promise<Record<string, string>> {
  const out: Record<string, string> = { cores: String(availableParallelism()), node: process.version };
  const smi = join(outDir, "nvidia-smi.log");
  if (
    (await runLogged(
      "nvidia-smi",
      ["--query-gpu=name,driver_version,memory.total,compute_cap", "--format=csv,noheader"],
      smi,
    )) === 0
  ) {
    out["gpu"] = (await readFile(smi, "utf8")).split("\n")[1] ?? "";
  }
  const nvcc = join(outDir, "nvcc.log");
  if ((await runLogged("nvcc", ["--version"], nvcc)) === 0) {
    out["nvcc"] = /release [^\n]+/.exec(await readFile(nvcc, "utf8"))?.[0] ?? "";
  }
  return out;
}

async function buildPlugin(): Promise<void> {
  const logFile = join(outDir, "build-gpu.log");
  const code = await runLogged(process.execPath, [...CLI, "build-gpu", "--backend", "cuda"], logFile);
  if (code !== 0) throw new Error(`continuum build-gpu exited with ${code}; see ${logFile}`);
}

interface ServedRun {
  deviceLine: string | null;
  device: ReturnType<typeof parseDeviceInfoMetric>;
  bench: Record<string, BenchFigures>;
  /** the server's steps over all its loads (`serve --step-log`): how much of the model's time was sampling */
  steps: StepTimes | null;
}

interface StepTimes {
  steps: number;
  wallS: number;
  computeS: number;
  sampleS: number;
}

function stepTimes(path: string): StepTimes | null {
  if (!existsSync(path)) return null;
  const times: StepTimes = { steps: 0, wallS: 0, computeS: 0, sampleS: 0 };
  for (const record of readStepLog(path)) {
    times.steps++;
    times.wallS += record.wallS;
    times.computeS += record.computeS;
    times.sampleS += record.sampleS ?? 0;
  }
  return times;
}

function benchFigures(run: Record<string, unknown>): BenchFigures {
  const jct = run["jct"] as { mean: number; p95: number };
  return {
    completed: run["completed"] as number,
    programs: run["scheduled"] as number,
    meanJctS: jct.mean,
    p95JctS: jct.p95,
    throughputJps: run["throughput_jps"] as number,
    cachedRatio: run["cached_token_ratio"] as number,
    laterTurnsCachedRatio: run["later_turns_cached_ratio"] as number,
    errors: run["errors"] as Record<string, number>,
  };
}

/** `serve` argv for the check's model with every layer on the GPU under `policy`, `extra` flags appended. */
function serveArgv(policy: string, modelPath: string, port: number, extra: readonly string[]): string[] {
  return [
    ...CLI,
    "serve",
    "--model",
    modelPath,
    "--gpu-layers",
    gpuLayers,
    "--scheduling-policy",
    policy,
    "--kv-cache-tokens",
    args["kv-cache-tokens"] as string,
    "--max-num-seqs",
    args["max-num-seqs"] as string,
    "--max-num-batched-tokens",
    args["max-num-batched-tokens"] as string,
    "--host",
    HOST,
    "--port",
    String(port),
    ...extra,
  ];
}

/** One server under `policy`: its device line and metric, then every load replayed against it. */
async function serveAndBench(policy: string, modelPath: string): Promise<ServedRun> {
  const port = await freePort();
  const stepLog = join(outDir, `steps-${policy}.jsonl`);
  const server = await startServer(
    `continuum-${policy}`,
    process.execPath,
    serveArgv(policy, modelPath, port, ["--step-log", stepLog]),
    port,
    outDir,
  );
  let served: Omit<ServedRun, "steps">;
  try {
    const banner = await readFile(server.logFile, "utf8");
    const deviceLine = banner.split("\n").find((l) => /^\s*device:/.test(l)) ?? null;
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    const bench: Record<string, BenchFigures> = {};
    // the baseline is needed where the policies part: under load (a light load's turns find their KV either way)
    for (const load of policy === "vllm" ? LOADS.filter((l) => l.name !== "light") : LOADS) {
      const label = `${load.name}-${policy}`;
      const stdout = await runCommand(
        process.execPath,
        [
          ...CLI,
          "bench",
          "--url",
          server.url,
          "--workload",
          "swe-bench",
          "--programs",
          String(load.programs),
          "--jps",
          String(load.jps),
          "--seed",
          "1",
          "--token-scale",
          String(load.tokenScale),
          "--tool-time-scale",
          String(TOOL_TIME_SCALE),
          "--request-timeout-s",
          "120",
          // a stuck run ends instead of eating the machine's time
          "--duration-s",
          "30",
          "--drain-timeout-s",
          "60",
          "--label",
          label,
          "--quiet",
          "--json",
          "--out",
          join(outDir, `bench-${label}.json`),
        ],
        join(outDir, `bench-${label}.log`),
      );
      const parsed = JSON.parse(stdout) as { runs?: Record<string, unknown>[] } & Record<string, unknown>;
      const run = parsed.runs?.[0] ?? parsed;
      bench[load.name] = benchFigures(run);
      log(
        `${label}: ${bench[load.name]?.completed}/${load.programs} programs, mean JCT ${bench[load.name]?.meanJctS.toFixed(2)} s, ` +
          `turns 2+ ${((bench[load.name]?.laterTurnsCachedRatio ?? 0) * 100).toFixed(1)}% cached`,
      );
    }
    served = { deviceLine, device: parseDeviceInfoMetric(metrics), bench };
  } finally {
    await stopServer(server);
  }
  const steps = stepTimes(stepLog);
  if (steps && steps.computeS > 0) {
    log(
      `continuum-${policy}: ${steps.steps} steps, model ${steps.computeS.toFixed(1)} s of ${steps.wallS.toFixed(1)} s, ` +
        `host sampling ${steps.sampleS.toFixed(2)} s (${((steps.sampleS / steps.computeS) * 100).toFixed(1)}% of the model's time)`,
    );
  }
  return { ...served, steps };
}

interface ProfileNotes {
  notes: {
    offload: {
      bytes: number;
      saveRamBps: number;
      restoreRamBps: number;
      hostCopy?: {
        pinned: { hostToDeviceBps: number; deviceToHostBps: number };
        pageable: { hostToDeviceBps: number; deviceToHostBps: number };
      };
    };
  };
}

async function profile(modelPath: string): Promise<TierFigures | null> {
  const out = join(outDir, "profile.json");
  await runCommand(
    process.execPath,
    [
      ...CLI,
      "profile",
      "--model",
      modelPath,
      ...(rehearsal ? ["--quick"] : []),
      "--max-num-batched-tokens",
      rehearsal ? "512" : "2048",
      "--kv-cache-tokens",
      rehearsal ? "16384" : "65536",
      "--prefill-tokens",
      rehearsal ? "128,256,512" : "512,2048,8192",
      "--decode-batches",
      rehearsal ? "1,2" : "1,8",
      "--decode-contexts",
      rehearsal ? "0,256" : "1024",
      "--out",
      out,
    ],
    join(outDir, "profile.log"),
  );
  const p = JSON.parse(await readFile(out, "utf8")) as ProfileNotes;
  const o = p.notes.offload;
  if (!o.hostCopy) return null;
  return {
    stateBytes: o.bytes,
    restoreBps: o.restoreRamBps,
    saveBps: o.saveRamBps,
    pinnedHostToDeviceBps: o.hostCopy.pinned.hostToDeviceBps,
    pinnedDeviceToHostBps: o.hostCopy.pinned.deviceToHostBps,
    pageableHostToDeviceBps: o.hostCopy.pageable.hostToDeviceBps,
    pageableDeviceToHostBps: o.hostCopy.pageable.deviceToHostBps,
  };
}

async function stepShapes(modelPath: string, referencePath: string): Promise<StepShapeResult> {
  const out = join(outDir, "steps.json");
  const child = join(REPO_ROOT, "dist", "bench", "gpu-check", "step-shapes-child.js");
  await runCommand(process.execPath, [child, modelPath, referencePath, out], join(outDir, "steps.log"));
  return JSON.parse(await readFile(out, "utf8")) as StepShapeResult;
}

// ---------------------------------------------------------------------------------------------------------

interface Progress {
  env: Record<string, string>;
  pluginBuilt: boolean | null;
  served: Record<string, ServedRun>;
  tier: TierFigures | null;
  restart: RestartFigures | null;
  steps: StepShapeResult | null;
}

const referencePath = args.reference ? resolve(args.reference) : null;
const reference = referencePath ? parseReferenceSteps(await readFile(referencePath, "utf8")) : [];
const progress: Progress = {
  env: {},
  pluginBuilt: null,
  served: {},
  tier: null,
  restart: null,
  steps: null,
};

/** The summary of everything measured so far: written after every stage, so a run cut short keeps its figures. */
async function writeSummary(): Promise<ReturnType<typeof judge>> {
  const bench: Record<string, Record<string, BenchFigures>> = {};
  for (const [policy, run] of Object.entries(progress.served)) {
    for (const [load, figures] of Object.entries(run.bench)) {
      bench[load] ??= {};
      (bench[load] as Record<string, BenchFigures>)[policy] = figures;
    }
  }
  const firstServed = Object.values(progress.served)[0];
  const figures: CheckFigures = {
    pluginBuilt: progress.pluginBuilt,
    device: firstServed?.device ?? null,
    steps: progress.steps ? compareSteps(progress.steps.steps, reference, 0.25) : null,
    stepsNotRun: progress.steps?.skipped.length ?? 0,
    bench,
    tier: progress.tier,
    restart: progress.restart,
  };
  const verdict = judge(figures, { stepTolerance: 0.25, cachedTarget: 0.8 });
  const summary = {
    createdAt: new Date().toISOString(),
    seconds: (performance.now() - t0) / 1000,
    rehearsal,
    environment: progress.env,
    stages,
    serveModel: servePreset,
    stepsModel: referencePath ? stepsPreset : null,
    settings: {
      gpuLayers,
      kvCacheTokens: Number(args["kv-cache-tokens"]),
      maxNumSeqs: Number(args["max-num-seqs"]),
      maxNumBatchedTokens: Number(args["max-num-batched-tokens"]),
      loads: LOADS,
      toolTimeScale: TOOL_TIME_SCALE,
      workload: "swe-bench (generated), seed 1",
      reference: referencePath,
    },
    deviceLine: firstServed?.deviceLine ?? null,
    figures,
    servedSteps: Object.fromEntries(
      Object.entries(progress.served).map(([policy, run]) => [policy, run.steps]),
    ),
    skippedShapes: progress.steps?.skipped ?? [],
    verdict,
  };
  await writeFile(join(outDir, "gpu-check.json"), `${JSON.stringify(summary, null, 1)}\n`);
  return verdict;
}

await mkdir(outDir, { recursive: true });
log(`output in ${outDir}${rehearsal ? " (rehearsal on the CPU: tiny model, no build)" : ""}`);
progress.env = (await stage("environment", environment)) ?? {};
log(`machine: ${JSON.stringify(progress.env)}`);

// The build takes minutes on every core; the served model is written meanwhile (disk and one core), and the
// one the steps are timed on while the servers run (they need a core or two at most).
const build = args["skip-build"] || rehearsal ? null : stage("build-gpu", buildPlugin);
const serveModel = await stage(`model ${servePreset}`, () => ensureBuiltinModel({ preset: servePreset }));
progress.pluginBuilt = build === null ? null : (await build) !== null;
await writeSummary();
const stepsModelReady = referencePath
  ? stage(`model ${stepsPreset}`, () => ensureBuiltinModel({ preset: stepsPreset }))
  : Promise.resolve(null);

const gpuReady = progress.pluginBuilt !== false;
if (serveModel && gpuReady) {
  for (const policy of policies) {
    const run = await stage(`serve + bench ${policy}`, () => serveAndBench(policy, serveModel));
    if (run) progress.served[policy] = run;
    await writeSummary();
  }
  progress.tier = await stage("profile", () => profile(serveModel));
  await writeSummary();
  progress.restart = await stage("restart with a kept disk tier", () =>
    restartCheck({
      serveArgv: (port, extra) =>
        serveArgv("cachettl-adaptive", serveModel, port, [
          "--cpu-offload-gb",
          "2",
          "--disk-offload-gb",
          "4",
          ...extra,
        ]),
      outDir,
      tierDir: join(outDir, "kept-tier"),
      // about 3,000 tokens on the 8B model: 384 MiB of KV to reload
      promptRepeats: rehearsal ? 20 : 500,
    }),
  );
  await writeSummary();
}
const stepsModel = await stepsModelReady;
if (stepsModel && referencePath && gpuReady) {
  progress.steps = await stage("step shapes", () => stepShapes(stepsModel, referencePath));
}
const verdict = await writeSummary();
process.stdout.write(`${formatVerdict(verdict)}\n`);
log(`summary: ${join(outDir, "gpu-check.json")}`);
