/**
 * `npm run harness-check`: the coding-agent harnesses people run (Claude Code, Codex CLI, Qwen Code,
 * opencode), installed from npm at pinned versions into `.cache/harnesses/<name>`, each run headless
 * against its own `continuum serve` with the base-URL settings its docs give, for two turns of one
 * session (a run, then the session continued; Qwen Code: two messages in one process). A recording proxy between harness and server keeps
 * every request and response; the server's recorder export says which program each request landed on.
 * Per harness: exit codes, requests by endpoint and status, protocol errors, the programs its turns
 * landed on, cached prompt tokens on later turns. Prints a table, writes a JSON summary, exits 1 when a
 * harness fails (0 with a "skipped: ..." line when an install failed for lack of network or disk).
 *
 *   npm run harness-check -- [--only claude-code,codex] [--skip-install] [--max-output-tokens 256]
 *     [--serve-args="--builtin-model medium"] [--turn-timeout-s 1800] [--port-range 9000-9099]
 *     [--out-dir <dir>] [--json <file>]
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createWriteStream, existsSync } from "node:fs";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { HOST, REPO_ROOT, type Server, stopServer } from "../compare/processes.js";
import { COMMON_ENV, HARNESSES, type Harness, type HarnessContext, TASKS } from "./harnesses.js";
import { PortPicker, parsePortRange } from "./port-range.js";
import { startRecordingProxy } from "./recording-proxy.js";
import {
  formatTable,
  type HarnessResult,
  type InvocationResult,
  recordedRequests,
  requestRows,
  skipped,
  summarize,
} from "./results.js";

const USAGE = `usage: npm run harness-check -- [options]
  --only <a,b>              harnesses to run (${HARNESSES.map((h) => h.name).join(", ")})
  --skip-install            use what .cache/harnesses/<name> holds; a missing one is skipped
  --max-output-tokens <n>   the harness's own output cap per reply (default 0: its own)
  --eos-bias <b>            on a built-in model (no --model in --serve-args), serve --logit-bias eos+<b>:
                            its random replies then end after ~140 tokens on average (default 4; 0: none)
  --serve-args="<flags>"    more flags for continuum serve, e.g. --serve-args="--builtin-model medium"
  --turn-timeout-s <s>      per invocation (default 1800)
  --port-range <A-B>        the ports each harness's serve and recording proxy listen on, from this range
                            (default: any free ones)
  --out-dir <dir>           logs and records (default .cache/harness-check/<time>)
  --json <file>             the JSON summary (default <out-dir>/summary.json)`;

const { values: args } = parseArgs({
  options: {
    only: { type: "string" },
    "skip-install": { type: "boolean", default: false },
    "max-output-tokens": { type: "string", default: "0" },
    "eos-bias": { type: "string", default: "4" },
    "serve-args": { type: "string", default: "" },
    "turn-timeout-s": { type: "string", default: "1800" },
    "port-range": { type: "string" },
    "out-dir": { type: "string" },
    json: { type: "string" },
    help: { type: "boolean", default: false },
  },
});

if (args.help) {
  process.stdout.write(`${USAGE}\n`);
  process.exit(0);
}

const CACHE = join(REPO_ROOT, ".cache", "harnesses");
const outDir = resolve(
  args["out-dir"] ??
    join(REPO_ROOT, ".cache", "harness-check", new Date().toISOString().replace(/[:.]/g, "-")),
);
const jsonPath = resolve(args.json ?? join(outDir, "summary.json"));
const maxOutput = Number(args["max-output-tokens"]);
const turnTimeoutS = Number(args["turn-timeout-s"]);
const eosBias = Number(args["eos-bias"]);
const userServeArgs = (args["serve-args"] ?? "").split(/\s+/).filter((a) => a !== "");
// The built-in models' weights are random: EOS comes about once in 3000 tokens, so a reply would run for
// minutes, and a harness that treats a reply cut at its output cap as an error (Claude Code) would fail.
const builtinModel = !userServeArgs.some((a) => a === "--model" || a.startsWith("--model="));
const serveArgs = [
  ...(builtinModel && eosBias > 0 ? ["--logit-bias", `eos+${eosBias}`] : []),
  ...userServeArgs,
];
const portRange = args["port-range"] === undefined ? null : parsePortRange(args["port-range"]);
if (args["port-range"] !== undefined && portRange === null) {
  process.stderr.write(`--port-range ${args["port-range"]}: expected A-B with 1 <= A <= B <= 65535\n`);
}
if (
  !Number.isInteger(maxOutput) ||
  maxOutput < 0 ||
  !(turnTimeoutS > 0) ||
  !(eosBias >= 0 && eosBias <= 100) ||
  (args["port-range"] !== undefined && portRange === null)
) {
  process.stderr.write(`${USAGE}\n`);
  process.exit(2);
}
const only = args.only
  ?.split(",")
  .map((s) => s.trim())
  .filter((s) => s !== "");
const unknown = only?.filter((n) => !HARNESSES.some((h) => h.name === n)) ?? [];
if (unknown.length > 0) {
  process.stderr.write(`unknown harness ${unknown.join(", ")}\n${USAGE}\n`);
  process.exit(2);
}
const selected = HARNESSES.filter((h) => !only || only.includes(h.name));
const ports = new PortPicker(HOST, portRange);

const t0 = performance.now();
function log(line: string): void {
  process.stderr.write(`[harness-check ${((performance.now() - t0) / 1000).toFixed(0)} s] ${line}\n`);
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
}

/** Runs a command with its output kept (and copied to `logFile`); killed (its process group) after `timeoutS`. */
function run(
  cmd: string,
  argv: readonly string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; logFile: string; timeoutS: number; stdin?: string },
): Promise<Exit> {
  return new Promise((res) => {
    const file = createWriteStream(opts.logFile, { flags: "a" });
    file.write(`$ ${cmd} ${argv.map((a) => (/\s/.test(a) ? JSON.stringify(a) : a)).join(" ")}\n`);
    const child = spawn(cmd, argv, {
      cwd: opts.cwd,
      env: opts.env,
      stdio: [opts.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      detached: true,
    });
    if (opts.stdin !== undefined) {
      child.stdin?.on("error", () => {}); // it may exit without reading
      child.stdin?.end(opts.stdin);
    }
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout?.on("data", (d: Buffer) => {
      stdout += d.toString();
      file.write(d);
    });
    child.stderr?.on("data", (d: Buffer) => {
      stderr += d.toString();
      file.write(d);
    });
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        if (child.pid !== undefined) process.kill(-child.pid, "SIGKILL");
      } catch {
        child.kill("SIGKILL");
      }
    }, opts.timeoutS * 1000);
    const done = (code: number | null, signal: NodeJS.Signals | null) => {
      clearTimeout(timer);
      file.end(`\n[exit ${signal ?? code}${timedOut ? ", timed out" : ""}]\n`);
      res({ code, signal, timedOut, stdout, stderr });
    };
    child.once("error", (e) => {
      stderr += String(e);
      done(127, null);
    });
    child.once("close", done);
  });
}

/** The environment a harness starts from: enough to run, nothing of the user's own configs or keys. */
function baseEnv(home: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env["PATH"] ?? "/usr/bin:/bin",
    LANG: process.env["LANG"] ?? "C.UTF-8",
    HOME: home,
    USERPROFILE: home,
    XDG_CONFIG_HOME: join(home, ".config"),
    XDG_DATA_HOME: join(home, ".local", "share"),
    XDG_STATE_HOME: join(home, ".local", "state"),
    XDG_CACHE_HOME: join(home, ".cache"),
    TMPDIR: join(home, "tmp"),
    ...COMMON_ENV,
  };
  // a proxy for the registry may be needed (opencode installs its provider package on first use), never for us
  for (const name of ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "npm_config_registry"]) {
    const v = process.env[name];
    if (v) env[name] = v;
  }
  const noProxy = [process.env["NO_PROXY"] ?? process.env["no_proxy"], "127.0.0.1", "localhost"]
    .filter(Boolean)
    .join(",");
  env["NO_PROXY"] = noProxy;
  env["no_proxy"] = noProxy;
  return env;
}

function binPath(h: Harness): string {
  return join(CACHE, h.name, "node_modules", ".bin", h.bin);
}

/** npm's words for a failure that is the machine's, not the package's: no network, no disk. */
const ENVIRONMENTAL =
  /(ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|network|ENOSPC|no space left)/i;

/** Installs the pinned package (or reuses it); null when ready, else why it is skipped or failed. */
async function install(h: Harness): Promise<{ skip: string } | { fail: string } | null> {
  const dir = join(CACHE, h.name);
  const logFile = join(outDir, `${h.name}-install.log`);
  const version = async () => {
    if (!existsSync(binPath(h))) return null;
    const r = await run(binPath(h), ["--version"], {
      cwd: dir,
      env: baseEnv(join(outDir, h.name, "home")),
      logFile,
      timeoutS: 60,
    });
    return r.code === 0 ? r.stdout.trim() : null;
  };
  const have = await version();
  if (have?.includes(h.version)) {
    log(`${h.name}: ${h.pkg}@${h.version} already in ${dir}`);
    return null;
  }
  if (args["skip-install"])
    return { skip: `${h.pkg}@${h.version} is not installed in ${dir} (--skip-install)` };
  log(`${h.name}: installing ${h.pkg}@${h.version} into ${dir}`);
  await mkdir(dir, { recursive: true });
  await writeFile(
    join(dir, "package.json"),
    `${JSON.stringify({ private: true, dependencies: { [h.pkg]: h.version } }, null, 2)}\n`,
  );
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const r = await run(npm, ["install", "--no-audit", "--no-fund", "--no-package-lock", "--loglevel=error"], {
    cwd: dir,
    env: { ...process.env, npm_config_update_notifier: "false" },
    logFile,
    timeoutS: 900,
  });
  if (r.code !== 0) {
    const why =
      (r.stderr
        .trim()
        .split("\n")
        .find((l) => ENVIRONMENTAL.test(l)) ??
        r.stderr.trim().split("\n").pop()) ||
      `exit ${r.code}`;
    return ENVIRONMENTAL.test(r.stderr) || r.timedOut
      ? { skip: `npm install ${h.pkg}@${h.version} failed (${why.trim()}); see ${logFile}` }
      : { fail: `npm install ${h.pkg}@${h.version} failed: ${why.trim()}; see ${logFile}` };
  }
  const now = await version();
  if (!now?.includes(h.version)) {
    return { fail: `${binPath(h)} --version gives ${JSON.stringify(now)}, not ${h.version}; see ${logFile}` };
  }
  log(`${h.name}: installed (${now})`);
  return null;
}

/** Starts `continuum serve` (output to `<dir>/serve.log`) and waits until /v1/models answers with the key. */
async function startServe(
  argv: readonly string[],
  port: number,
  apiKey: string,
  dir: string,
): Promise<Server> {
  const logFile = join(dir, "serve.log");
  const file = createWriteStream(logFile, { flags: "a" });
  file.write(`$ node ${argv.join(" ")}\n`);
  const child = spawn(process.execPath, argv, { cwd: REPO_ROOT, stdio: ["ignore", "pipe", "pipe"] });
  child.stdout.pipe(file);
  child.stderr.pipe(file);
  const url = `http://${HOST}:${port}`;
  const server: Server = { name: "serve", url, child, logFile };
  // the first use of a built-in model generates it (seconds for the small ones, minutes for 8B shapes)
  const deadline = performance.now() + 900_000;
  while (performance.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(
        `continuum serve exited during start-up (${child.exitCode ?? child.signalCode}); see ${logFile}`,
      );
    }
    try {
      const r = await fetch(`${url}/v1/models`, {
        headers: { authorization: `Bearer ${apiKey}` },
        signal: AbortSignal.timeout(2000),
      });
      if (r.ok) return server;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  await stopServer(server);
  throw new Error(`continuum serve did not become ready in 900 s; see ${logFile}`);
}

interface ModelInfo {
  id: string;
  maxModelLen: number;
}

async function servedModel(url: string, apiKey: string): Promise<ModelInfo> {
  const r = await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${apiKey}` } });
  const body = (await r.json()) as { data: { id: string; max_model_len?: number }[] };
  const first = body.data[0];
  if (!first) throw new Error("GET /v1/models lists no model");
  return { id: first.id, maxModelLen: first.max_model_len ?? 8192 };
}

async function dashboardPrograms(
  url: string,
  apiKey: string,
): Promise<{ id: string; turns: number }[] | null> {
  try {
    const r = await fetch(`${url}/dashboard/state`, { headers: { authorization: `Bearer ${apiKey}` } });
    const state = (await r.json()) as { programs?: { id: string; turns: number }[] };
    return state.programs ?? null;
  } catch {
    return null;
  }
}

async function checkHarness(h: Harness): Promise<HarnessResult> {
  const outputCap =
    maxOutput === 0
      ? "harness default"
      : h.outputCapSetting
        ? `${maxOutput} (${h.outputCapSetting})`
        : "none (no setting; the reply runs to EOS or the context)";
  const identity = { name: h.name, pkg: h.pkg, version: h.version, api: h.api, outputCap };
  const installed = await install(h);
  if (installed && "skip" in installed) {
    log(`${h.name}: skipped: ${installed.skip}`);
    return skipped(identity, installed.skip);
  }
  if (installed && "fail" in installed) {
    log(`${h.name}: ${installed.fail}`);
    return { ...skipped(identity, installed.fail), verdict: "fail" };
  }

  const dir = join(outDir, h.name);
  const home = join(dir, "home");
  const workDir = join(dir, "work");
  await rm(dir, { recursive: true, force: true });
  for (const d of [home, join(home, "tmp"), workDir]) await mkdir(d, { recursive: true });
  await writeFile(join(workDir, "README.md"), "A scratch directory of `npm run harness-check`.\n");

  const apiKey = `hc-${randomBytes(12).toString("hex")}`;
  const port = await ports.take();
  const recordFile = join(dir, "record.jsonl");
  const argv = [
    join(REPO_ROOT, "bin", "continuum.js"),
    "serve",
    "--host",
    HOST,
    "--port",
    String(port),
    "--api-key",
    apiKey,
    "--record",
    recordFile,
    "--drain-timeout",
    "0",
    ...serveArgs,
  ];
  log(`${h.name}: starting continuum serve${serveArgs.map((a) => ` ${a}`).join("")} on port ${port}`);
  let server: Server | null = null;
  const invocations: InvocationResult[] = [];
  let exchanges: Awaited<ReturnType<typeof startRecordingProxy>>["exchanges"] = [];
  let programs: { id: string; turns: number }[] | null = null;
  try {
    server = await startServe(argv, port, apiKey, dir);
    const model = await servedModel(server.url, apiKey);
    const proxy = await startRecordingProxy(
      server.url,
      join(dir, "exchanges.jsonl"),
      `${h.name}-`,
      await ports.take(),
    );
    try {
      const ctx: HarnessContext = {
        baseUrl: proxy.url,
        apiKey,
        model: model.id,
        contextTokens: model.maxModelLen,
        maxOutputTokens: maxOutput === 0 ? null : maxOutput,
        home,
        workDir,
        requestTimeoutMs: turnTimeoutS * 1000,
      };
      const env = { ...baseEnv(home), ...(await h.prepare(ctx)) };
      log(`${h.name}: model ${model.id} (context ${model.maxModelLen}), output cap ${outputCap}`);
      for (const [i, inv] of h.invocations(ctx).entries()) {
        const input =
          inv.stdin === undefined ? "" : ` < ${inv.stdin.trim().split("\n").length} messages on stdin`;
        log(`${h.name}: run ${i + 1}: ${h.bin} ${inv.argv.join(" ")}${input}`);
        const startMs = performance.now();
        const startAt = proxy.now();
        const exit = await run(binPath(h), inv.argv, {
          cwd: workDir,
          env,
          logFile: join(dir, `run-${i + 1}.log`),
          timeoutS: turnTimeoutS * (inv.stdin === undefined ? 1 : TASKS.length),
          ...(inv.stdin === undefined ? {} : { stdin: inv.stdin }),
        });
        const findings = h.findings(exit.stdout, exit.stderr);
        const durationS = (performance.now() - startMs) / 1000;
        invocations.push({
          argv: inv.argv,
          exitCode: exit.code,
          signal: exit.signal,
          timedOut: exit.timedOut,
          durationS,
          startMs: startAt,
          endMs: proxy.now(),
          clientErrors: findings.errors,
          notes: findings.notes,
          sessionId: findings.sessionId,
          exitFromOutputCap: findings.exitFromOutputCap,
        });
        log(
          `${h.name}: run ${i + 1}: exit ${exit.signal ?? exit.code}${exit.timedOut ? " (timed out)" : ""} after ${durationS.toFixed(0)} s, ${proxy.exchanges.length} requests so far`,
        );
        if (exit.timedOut) break;
      }
      // a harness killed mid-request leaves it running on the server: let the proxy see it end
      for (let waited = 0; proxy.inFlight() > 0 && waited < 30_000; waited += 250) {
        await new Promise((r) => setTimeout(r, 250));
      }
      programs = await dashboardPrograms(server.url, apiKey);
    } finally {
      await proxy.close();
      exchanges = proxy.exchanges;
    }
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    log(`${h.name}: ${why}`);
    return { ...skipped(identity, why), verdict: "fail" };
  } finally {
    if (server) await stopServer(server);
  }
  const record = existsSync(recordFile) ? await readFile(recordFile, "utf8") : "";
  const rows = requestRows(exchanges, recordedRequests(record), invocations);
  const result = summarize({ ...identity, invocations, rows, dashboardPrograms: programs });
  await writeFile(join(dir, "dashboard-programs.json"), `${JSON.stringify(programs, null, 2)}\n`);
  log(`${h.name}: ${result.verdict}${result.reasons.length ? ` (${result.reasons.join("; ")})` : ""}`);
  return result;
}

async function main(): Promise<void> {
  await mkdir(outDir, { recursive: true });
  log(`logs, records and exchanges in ${outDir}`);
  const results: HarnessResult[] = [];
  for (const h of selected) results.push(await checkHarness(h));
  const table = formatTable(results);
  process.stdout.write(`${table}\n`);
  for (const r of results)
    if (r.verdict === "skipped") process.stdout.write(`skipped: ${r.name}: ${r.reasons[0]}\n`);
  const summary = {
    command: [
      "npm run harness-check",
      ...(process.argv.length > 2 ? ["--", ...process.argv.slice(2)] : []),
    ].join(" "),
    date: new Date().toISOString(),
    serveArgs,
    maxOutputTokens: maxOutput === 0 ? null : maxOutput,
    outDir,
    results,
  };
  await mkdir(resolve(jsonPath, ".."), { recursive: true });
  await writeFile(jsonPath, `${JSON.stringify(summary, null, 2)}\n`);
  log(`summary in ${jsonPath}`);
  process.exitCode = results.some((r) => r.verdict === "fail") ? 1 : 0;
}

await main();
