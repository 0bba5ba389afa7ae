/**
 * One host, N replicas: `continuum serve` processes on consecutive ports behind HAProxy (see
 * haproxy-config.ts). The supervisor starts them, waits until each answers /health, writes the
 * configuration where the user can reuse it, and stops everything it started. A replica that dies is
 * left to HAProxy's failover; the cluster goes on while one replica lives.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { haproxyConfig } from "./haproxy-config.js";

export interface ClusterOptions {
  readonly replicas: number;
  /** the balancer's port; replicas listen on port + 1 .. port + replicas */
  readonly port: number;
  /** where the balancer listens (replicas always listen on 127.0.0.1) */
  readonly host: string;
  /** flags passed to every `continuum serve` */
  readonly serveArgs: readonly string[];
  /** the haproxy binary */
  readonly haproxy: string;
  /** where haproxy.cfg is written */
  readonly configDir: string;
  /** GPU device per replica (CUDA_VISIBLE_DEVICES), in replica order; empty: leave the environment */
  readonly devices: readonly string[];
  /** how the `continuum` command is run again for the replicas (node's argv up to the subcommand) */
  readonly command: readonly string[];
  /** lines of the supervisor and of its children */
  readonly log: (line: string) => void;
  /** how long replicas may take to answer /health (the first start may generate the built-in model) */
  readonly startTimeoutMs: number;
  /** HAProxy's maxconn */
  readonly maxConnections: number;
  /** how long stop() lets replicas drain before killing them */
  readonly stopTimeoutMs: number;
}

export interface ReplicaProcess {
  readonly name: string;
  readonly url: string;
  readonly process: ChildProcess;
  readonly exited: Promise<number | null>;
}

export interface RunningCluster {
  readonly url: string;
  readonly configPath: string;
  readonly replicas: readonly ReplicaProcess[];
  /** resolves when every replica has exited or the balancer has (the cluster cannot serve) */
  readonly ended: Promise<string>;
  /** SIGTERM to every replica (they drain), then to HAProxy; kills what outlives the timeout */
  stop(): Promise<void>;
}

/** The install hint when HAProxy is missing. */
export function haproxyMissing(binary: string): string | null {
  const probe = spawnSync(binary, ["-v"], { encoding: "utf8" });
  if (probe.error || probe.status !== 0) {
    return `HAProxy not found (${binary}): continuum cluster runs it in front of the replicas. Install it with \`sudo apt-get install haproxy\` (Debian/Ubuntu) or pass --haproxy <path>.`;
  }
  return null;
}

function exitOf(child: ChildProcess): Promise<number | null> {
  return new Promise((done) => {
    if (child.exitCode !== null || child.signalCode !== null) done(child.exitCode);
    else child.once("exit", (code) => done(code));
  });
}

function pipeLines(child: ChildProcess, prefix: string, log: (line: string) => void): void {
  for (const stream of [child.stdout, child.stderr]) {
    if (stream) createInterface({ input: stream }).on("line", (line) => log(`${prefix} ${line}`));
  }
}

async function waitHealthy(url: string, exited: Promise<unknown>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  while (Date.now() < deadline) {
    if (gone) throw new Error(`${url} exited before it was healthy`);
    try {
      const response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) });
      if (response.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} did not answer /health within ${timeoutMs} ms`);
}

async function stopProcess(child: ChildProcess, exited: Promise<unknown>, timeoutMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
  await exited;
  clearTimeout(timer);
}

/** Replica i (1-based) serves on port + i and answers HAProxy's agent check on port + replicas + i. */
function agentPortOf(o: ClusterOptions, i: number): number {
  return o.port + o.replicas + i;
}

export async function startCluster(o: ClusterOptions): Promise<RunningCluster> {
  const missing = haproxyMissing(o.haproxy);
  if (missing) throw new Error(missing);
  if (o.devices.length > 0 && o.devices.length !== o.replicas) {
    throw new Error(`--devices names ${o.devices.length} devices for ${o.replicas} replicas`);
  }
  const [executable, ...prefixArgs] = o.command;
  if (!executable) throw new Error("no command to start the replicas with");

  const replicas: ReplicaProcess[] = [];
  const stopAll = async (haproxy: ChildProcess | null, haproxyExited: Promise<unknown> | null) => {
    await Promise.all(replicas.map((r) => stopProcess(r.process, r.exited, o.stopTimeoutMs)));
    if (haproxy && haproxyExited) await stopProcess(haproxy, haproxyExited, o.stopTimeoutMs);
  };
  try {
    for (let i = 1; i <= o.replicas; i++) {
      const name = `r${i}`;
      const port = o.port + i;
      const device = o.devices[i - 1];
      const child = spawn(
        executable,
        [
          ...prefixArgs,
          "serve",
          ...o.serveArgs,
          "--host",
          "127.0.0.1",
          "--port",
          String(port),
          "--agent-port",
          String(agentPortOf(o, i)),
        ],
        {
          stdio: ["ignore", "pipe", "pipe"],
          env: device === undefined ? process.env : { ...process.env, CUDA_VISIBLE_DEVICES: device },
        },
      );
      pipeLines(child, `[${name}]`, o.log);
      replicas.push({ name, url: `http://127.0.0.1:${port}`, process: child, exited: exitOf(child) });
    }
    await Promise.all(replicas.map((r) => waitHealthy(r.url, r.exited, o.startTimeoutMs)));
  } catch (error) {
    await stopAll(null, null);
    throw error;
  }

  mkdirSync(o.configDir, { recursive: true });
  const configPath = resolve(join(o.configDir, "haproxy.cfg"));
  writeFileSync(
    configPath,
    haproxyConfig({
      host: o.host,
      port: o.port,
      replicas: replicas.map((r, i) => ({
        name: r.name,
        host: "127.0.0.1",
        port: o.port + i + 1,
        agentPort: agentPortOf(o, i + 1),
      })),
      bufferBytes: 1 << 20,
      maxConnections: o.maxConnections,
      checkIntervalMs: 1000,
    }),
  );
  // -db: foreground, logs to stderr; -W: master-worker, so SIGTERM stops it cleanly
  const haproxy = spawn(o.haproxy, ["-W", "-db", "-f", configPath], { stdio: ["ignore", "pipe", "pipe"] });
  pipeLines(haproxy, "[haproxy]", o.log);
  const haproxyExited = exitOf(haproxy);
  const url = `http://${o.host.includes(":") ? `[${o.host}]` : o.host}:${o.port}`;
  try {
    await waitHealthy(url, haproxyExited, 10_000);
  } catch (error) {
    await stopAll(haproxy, haproxyExited);
    throw error;
  }

  const ended = Promise.race([
    haproxyExited.then((code) => `HAProxy exited (${code})`),
    Promise.all(replicas.map((r) => r.exited)).then(() => "every replica exited"),
  ]);
  for (const r of replicas) {
    void r.exited.then((code) => o.log(`continuum cluster: replica ${r.name} (${r.url}) exited (${code})`));
  }
  let stopping: Promise<void> | null = null;
  return {
    url,
    configPath,
    replicas,
    ended,
    stop() {
      stopping ??= stopAll(haproxy, haproxyExited);
      return stopping;
    },
  };
}
