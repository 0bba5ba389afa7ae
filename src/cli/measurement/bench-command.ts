import { writeFileSync } from "node:fs";
import { Command, InvalidArgumentError, Option } from "commander";
import {
  agentxJson,
  agentxNotes,
  formatAgentxTable,
  renderAgentxReportHtml,
} from "../../analysis/agentx-report.js";
import { type BenchFile, type BenchRun, loadBenchFile, withoutPrograms } from "../../bench/bench-metrics.js";
import { progressPrinter } from "../../bench/bench-progress.js";
import { formatBenchTable, formatErrors, renderBenchReport } from "../../bench/bench-report.js";
import { runBench } from "../../bench/bench-run.js";
import { runClosedLoopBench } from "../../bench/closed-loop-bench.js";
import { compareWithRecorder, formatRecorderCheck } from "../../bench/compare-recorder.js";
import type { ReplayApi } from "../../bench/replay/replay-client.js";
import type { ObservationRole } from "../../bench/replay/replay-conversation.js";
import { WORKLOAD_KINDS, type WorkloadKind } from "../../workload/generators.js";
import { addClosedLoopOptions, nonNegativeNumber, positiveInt, positiveNumber } from "../sim-options.js";

interface BenchCliOptions {
  url: string;
  api: ReplayApi;
  model?: string;
  apiKey?: string;
  trace?: string;
  workload: WorkloadKind;
  programs: number;
  jps: number;
  seed: number;
  tokenScale: number;
  toolTimeScale: number;
  turnRepeat: number;
  maxContext?: number;
  durationS?: number;
  drainTimeoutS: number;
  requestTimeoutS: number;
  runTools?: string;
  toolTimeoutS: number;
  charsPerToken?: number;
  observationRole: ObservationRole;
  stream: boolean;
  extraBody?: Record<string, unknown>;
  programPrefix?: string;
  label: string;
  json?: boolean;
  out?: string;
  report?: string;
  quiet?: boolean;
  concurrency?: number;
  duration: number;
  warmStart: boolean;
  idleGapCap: number;
  interactivityFloor: number;
  blockSize?: number;
  gpus: number;
  cpuCores?: number;
}

/** `bench --concurrency N`: AgentX's closed loop against the server, its metrics as simulate prints them. */
async function runClosedLoopBenchCli(o: BenchCliOptions): Promise<void> {
  if (!o.trace)
    throw new Error(
      "--concurrency replays session traces: give --trace <Weka file or directory, or Mooncake JSONL>",
    );
  const stop = new AbortController();
  const onSignal = () => {
    if (stop.signal.aborted) process.exit(130);
    process.stderr.write("\nbench: interrupted; ending the run (again to exit at once)\n");
    stop.abort();
  };
  process.on("SIGINT", onSignal);
  try {
    const run = await runClosedLoopBench({
      url: o.url,
      api: o.api,
      ...(o.model === undefined ? {} : { model: o.model }),
      apiKey: o.apiKey ?? process.env["CONTINUUM_API_KEY"] ?? null,
      tracePaths: [o.trace],
      ...(o.blockSize === undefined ? {} : { mooncakeBlockSize: o.blockSize }),
      tokenScale: o.tokenScale,
      timeScale: o.toolTimeScale,
      concurrency: o.concurrency as number,
      durationS: o.duration,
      warmStart: o.warmStart,
      idleGapCapS: o.idleGapCap,
      interactivityFloor: o.interactivityFloor,
      seed: o.seed,
      ...(o.charsPerToken === undefined ? {} : { charsPerToken: o.charsPerToken }),
      requestTimeoutS: o.requestTimeoutS,
      devices: o.cpuCores ?? o.gpus,
      deviceKind: o.cpuCores === undefined ? "gpu" : "cpu-core",
      ...(o.extraBody ? { extraBody: o.extraBody } : {}),
      ...(o.programPrefix === undefined ? {} : { programPrefix: o.programPrefix }),
      label: o.label,
      stopSignal: stop.signal,
      log: (line) => process.stderr.write(`${line}\n`),
    });
    for (const s of run.settings) process.stderr.write(`# ${s}\n`);
    const mae =
      run.prompt_tokens_mae === null ? "not reported" : `${run.prompt_tokens_mae.toFixed(1)} tokens`;
    const errors = Object.entries(run.errors);
    process.stderr.write(
      `# prompt tokens: trace vs server mean abs error ${mae}; errors: ${errors.length === 0 ? "none" : errors.map(([k, n]) => `${k} ${n}`).join(", ")}\n`,
    );
    if (!run.cached_tokens_reported)
      process.stderr.write("# the server reported no cached tokens (achieved prefix hit shown as 0)\n");
    const points = [{ policy: run.label, metrics: run.metrics }];
    if (o.json) {
      process.stdout.write(
        `${JSON.stringify({ results: points.map(agentxJson), settings: run.settings, url: run.url, model: run.model, prompt_tokens_mae: run.prompt_tokens_mae, errors: run.errors }, null, 2)}\n`,
      );
    } else process.stdout.write(`${[formatAgentxTable(points), ...agentxNotes(points)].join("\n")}\n`);
    if (o.report) {
      writeFileSync(
        o.report,
        await renderAgentxReportHtml({
          title: `continuum bench: ${o.label}`,
          settings: run.settings,
          points,
        }),
      );
      process.stderr.write(`# report written to ${o.report}\n`);
    }
  } finally {
    process.off("SIGINT", onSignal);
  }
}

function jsonObject(value: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    throw new InvalidArgumentError(`expected a JSON object, got ${JSON.stringify(value)}`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    throw new InvalidArgumentError(`expected a JSON object, got ${JSON.stringify(value)}`);
  return parsed as Record<string, unknown>;
}

function writeJson(path: string, value: unknown): void {
  writeFileSync(path, `${JSON.stringify(value, null, 2)}\n`);
}

/** Prints the runs (table or --json) and writes --out / --report. */
async function emit(
  runs: readonly BenchRun[],
  o: { json?: boolean; out?: string; report?: string },
  title: string,
): Promise<void> {
  if (o.out) {
    writeJson(o.out, { runs: [...runs] } satisfies BenchFile);
    process.stderr.write(`# results written to ${o.out}\n`);
  }
  if (o.json) process.stdout.write(`${JSON.stringify({ runs: runs.map(withoutPrograms) }, null, 2)}\n`);
  else process.stdout.write(`${formatBenchTable(runs)}\n`);
  if (o.report) {
    writeFileSync(o.report, await renderBenchReport(runs, title));
    process.stderr.write(`# report written to ${o.report}\n`);
  }
}

async function runBenchCli(o: BenchCliOptions): Promise<void> {
  const stop = new AbortController();
  const onSignal = () => {
    if (stop.signal.aborted) process.exit(130);
    process.stderr.write("\nbench: interrupted; abandoning running programs (again to exit at once)\n");
    stop.abort();
  };
  process.on("SIGINT", onSignal);
  const progress = o.quiet ? null : progressPrinter();
  try {
    const run = await runBench({
      url: o.url,
      api: o.api,
      ...(o.model === undefined ? {} : { model: o.model }),
      apiKey: o.apiKey ?? process.env["CONTINUUM_API_KEY"] ?? null,
      ...(o.trace === undefined ? { workload: o.workload } : { trace: o.trace }),
      programs: o.programs,
      jps: o.jps,
      seed: o.seed,
      tokenScale: o.tokenScale,
      toolTimeScale: o.toolTimeScale,
      turnRepeat: o.turnRepeat,
      ...(o.maxContext === undefined ? {} : { maxContext: o.maxContext }),
      ...(o.durationS === undefined ? {} : { durationS: o.durationS }),
      drainTimeoutS: o.drainTimeoutS,
      requestTimeoutS: o.requestTimeoutS,
      ...(o.runTools === undefined ? {} : { runTools: o.runTools }),
      toolTimeoutS: o.toolTimeoutS,
      ...(o.charsPerToken === undefined ? {} : { charsPerToken: o.charsPerToken }),
      observationRole: o.observationRole,
      stream: o.stream,
      ...(o.extraBody ? { extraBody: o.extraBody } : {}),
      ...(o.programPrefix === undefined ? {} : { programPrefix: o.programPrefix }),
      label: o.label,
      stopSignal: stop.signal,
      ...(progress ? { onProgress: (p) => progress.update(p) } : {}),
      log: (line) => process.stderr.write(`${line}\n`),
    });
    progress?.finish();
    for (const s of run.settings) process.stderr.write(`# ${s}\n`);
    const mae =
      run.prompt_tokens_mae === null ? "not reported" : `${run.prompt_tokens_mae.toFixed(1)} tokens`;
    process.stderr.write(
      `# prompt tokens: trace vs server mean abs error ${mae}` +
        (run.tokenizer_mae === null ? "" : `, client tokenizer vs server ${run.tokenizer_mae.toFixed(1)}`) +
        `; errors: ${formatErrors(run.errors)}\n`,
    );
    if (!run.cached_tokens_reported)
      process.stderr.write("# the server reported no cached tokens (cached ratio shown as 0)\n");
    await emit([run], o, `continuum bench: ${o.label}`);
  } finally {
    process.off("SIGINT", onSignal);
  }
}

function compareCommand(): Command {
  return new Command("compare")
    .description("merge saved bench results (--out files) into one table and HTML report")
    .argument("<results...>", "JSON files written by `continuum bench --out`")
    .option("--report <file.html>", "write the HTML report of every run side by side")
    .option("--out <file.json>", "write the merged runs")
    .option("--json", "print the merged runs as JSON")
    .option("--title <text>", "report title")
    .action(async (files: string[], _o: unknown, command: Command) => {
      // Options the parent `bench` also defines are parsed by it (commander's default); take both.
      const o = command.optsWithGlobals() as {
        report?: string;
        out?: string;
        json?: boolean;
        title?: string;
      };
      const runs = files.flatMap((f) => loadBenchFile(f));
      await emit(runs, { ...o, json: o.json === true }, o.title ?? "continuum bench compare");
    });
}

function checkRecorderCommand(): Command {
  return new Command("check-recorder")
    .description("check a saved bench run against the server's --record export of the same run")
    .argument("<results>", "JSON file written by `continuum bench --out`")
    .argument("<record>", "the server's recorder export (<path>.jsonl, or a fork scheduler_timestamps)")
    .option("--run <label>", "which run of the file (default: the first)")
    .option("--tolerance-s <s>", "absolute JCT tolerance", nonNegativeNumber, 0.5)
    .option(
      "--tolerance-rel <f>",
      "relative JCT tolerance (fraction of the bench JCT)",
      nonNegativeNumber,
      0.05,
    )
    .action(async (results: string, record: string, _o: unknown, command: Command) => {
      const o = command.optsWithGlobals() as { run?: string; toleranceS: number; toleranceRel: number };
      const runs = loadBenchFile(results);
      const run = o.run === undefined ? runs[0]! : runs.find((r) => r.label === o.run);
      if (!run) throw new Error(`${results} has no run labelled ${JSON.stringify(o.run)}`);
      const check = await compareWithRecorder(run, record, {
        toleranceS: o.toleranceS,
        toleranceRel: o.toleranceRel,
      });
      process.stdout.write(`${formatRecorderCheck(check, run.label)}\n`);
      if (!check.ok) process.exitCode = 1;
    });
}

export function benchCommand(): Command {
  const command = new Command("bench")
    .description(
      "replay agent programs against any OpenAI-compatible server (Poisson arrivals, real multi-turn " +
        "conversations with program fields) and measure JCT, TTFT and cache reuse",
    )
    .option("--url <url>", "server to load (only this one is contacted)", "http://127.0.0.1:8000")
    .addOption(
      new Option("--api <api>", "endpoint: /v1/chat/completions or /v1/completions")
        .choices(["chat", "completions"])
        .default("chat"),
    )
    .option("--model <name>", "model field (default: the first of GET /v1/models)")
    .option("--api-key <key>", "Authorization: Bearer <key> (default: env CONTINUUM_API_KEY)")
    .option(
      "--trace <path>",
      "agent trace (JSONL, see docs/workloads.md), or session traces with block ids for --concurrency (Weka file or directory, Mooncake JSONL); default: a generated workload",
    )
    .addOption(
      new Option("--workload <kind>", "generated workload when no --trace is given (docs/workloads.md)")
        .choices([...WORKLOAD_KINDS])
        .default("swe-bench"),
    )
    .option("--programs <n>", "agent programs to schedule", positiveInt, 20)
    .option("--jps <rate>", "program arrival rate (jobs per second, Poisson)", positiveNumber, 0.5)
    .option("--seed <n>", "seed for the sample, arrivals and prompt words", (v) => Number.parseInt(v, 10), 1)
    .option("--token-scale <f>", "scale every token count (fit GPU traces to a CPU model)", positiveNumber, 1)
    .option("--tool-time-scale <f>", "scale every tool time (0: no tool time)", nonNegativeNumber, 1)
    .option("--turn-repeat <k>", "repeat each program's turns k times, tokens scaled by 1/k", positiveInt, 1)
    .option(
      "--max-context <tokens>",
      "cut programs before their first request that does not fit",
      positiveInt,
    )
    .option("--duration-s <s>", "stop starting programs after this many seconds", positiveNumber)
    .option(
      "--drain-timeout-s <s>",
      "after --duration-s, abandon programs still running this much later",
      nonNegativeNumber,
      60,
    )
    .option("--request-timeout-s <s>", "per-request timeout", positiveNumber, 600)
    .option("--run-tools <dir>", "run a harmless command per tool call in <dir> instead of sleeping")
    .option("--tool-timeout-s <s>", "timeout of each --run-tools command", positiveNumber, 30)
    .option(
      "--chars-per-token <n>",
      "estimate tokens as chars / n (foreign models) instead of the built-in tokenizer",
      positiveNumber,
    )
    .addOption(
      new Option("--observation-role <role>", "chat role of tool outputs")
        .choices(["user", "tool"])
        .default("user"),
    )
    .option("--no-stream", "do not stream (no TTFT)")
    .option("--extra-body <json>", "more request body fields, e.g. '{\"temperature\":0}'", jsonObject)
    .option("--program-prefix <p>", "prefix of the program ids sent (default: unique per run)")
    .option("--label <name>", "name of this run in tables and reports", "bench")
    .option("--json", "print the results as JSON")
    .option("--out <file.json>", "save the results with every program (for compare / check-recorder)")
    .option("--report <file.html>", "write an HTML report")
    .option("--quiet", "no live progress on stderr")
    .option("--gpus <n>", "closed loop: the server's GPUs, which TPGS divides by", positiveInt, 1)
    .option(
      "--cpu-cores <n>",
      "closed loop: the server runs on this many CPU cores: tokens per core-second",
      positiveInt,
    )
    .enablePositionalOptions()
    .action(async (o: BenchCliOptions) => {
      if (o.concurrency !== undefined) await runClosedLoopBenchCli(o);
      else await runBenchCli(o);
    });
  addClosedLoopOptions(
    command,
    "closed-loop replay of --trace's session trees (Weka, Mooncake) as AgentX: this many lanes, each drawing the next tree when its tree drains",
  );
  command.addCommand(compareCommand());
  command.addCommand(checkRecorderCommand());
  return command;
}
