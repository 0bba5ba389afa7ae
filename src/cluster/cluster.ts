/**
 * N replicas behind HAProxy: `continuum serve` processes the supervisor starts on consecutive ports of
 * this host, and replicas on other hosts it fronts (see haproxy-config.ts). The supervisor starts its
 * replicas, each in a process group of its own (a terminal's Ctrl-C reaches the supervisor only, which
 * drains them), waits until each answers /health, writes the configuration where the user can reuse it,
 * restarts a replica that dies (with backoff; HAProxy's health check takes it back), serves the fleet
 * view and guards streams (supervisor-server.ts), and stops everything it started: HAProxy first, softly
 * (it takes no new request and lets those in flight finish), then the replicas.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { bindsEndpoint } from "../engine/kv/kv-event-wire.js";
import type { FleetReplica } from "./fleet.js";
import { haproxyConfig } from "./haproxy-config.js";
import { type SupervisorServer, startSupervisorServer } from "./supervisor-server.js";

/** A replica on another host (or started by someone else), as `--replica http://host:port` names it. */
export interface RemoteReplica {
  readonly host: string;
  readonly port: number;
  /** its `serve --agent-port`, given as `?agent-port=N`: HAProxy then sees it drain */
  readonly agentPort?: number;
}

export interface ClusterOptions {
  /** replicas to start on this host */
  readonly replicas: number;
  /** replicas to front without starting them */
  readonly remote: readonly RemoteReplica[];
  /** where started replicas listen (0.0.0.0 or :: for every interface; HAProxy reaches them on loopback) */
  readonly replicaHost: string;
  /** the balancer's port; started replicas listen on port + 1 .. port + replicas */
  readonly port: number;
  /** where the balancer listens */
  readonly host: string;
  /** flags passed to every started `continuum serve` (its KV events' endpoints and topic its own: replicaServeArgs) */
  readonly serveArgs: readonly string[];
  /** the haproxy binary */
  readonly haproxy: string;
  /** where haproxy.cfg is written */
  readonly configDir: string;
  /** GPU device per started replica (CUDA_VISIBLE_DEVICES), in replica order; empty: leave the environment */
  readonly devices: readonly string[];
  /** how the `continuum` command is run again for the replicas (node's argv up to the subcommand) */
  readonly command: readonly string[];
  /** lines of the supervisor and of its children */
  readonly log: (line: string) => void;
  /** how long replicas may take to answer /health (the first start may generate the built-in model) */
  readonly startTimeoutMs: number;
  /** HAProxy's maxconn */
  readonly maxConnections: number;
  /** how long stop() lets the requests in flight finish before cutting them (serve's --drain-timeout) */
  readonly drainTimeoutMs: number;
  /** how long stop() lets replicas stop by themselves before killing them */
  readonly stopTimeoutMs: number;
}

export interface ClusterReplica {
  readonly name: string;
  /** where HAProxy and the supervisor reach it */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly agentPort?: number;
}

/** A replica this cluster started; after a restart, `process` and `exited` are the new process's. */
export interface StartedReplica extends ClusterReplica {
  readonly process: ChildProcess;
  readonly exited: Promise<number | null>;
  /** times it was restarted after it died */
  readonly restarts: number;
  /** where it publishes KV events (its own `--kv-events-endpoint`, see replicaServeArgs), null: not at all */
  readonly kvEventsEndpoint: string | null;
  /** the pod its KV events' topic names (`kv@<pod>@<model>`), null when it publishes none */
  readonly kvEventsPod: string | null;
}

export interface RunningCluster {
  readonly url: string;
  readonly configPath: string;
  /** every replica behind the balancer: the started ones, then the remote ones */
  readonly replicas: readonly ClusterReplica[];
  readonly started: readonly StartedReplica[];
  /** resolves when HAProxy exited without being told to (the cluster cannot serve) */
  readonly ended: Promise<string>;
  /**
   * HAProxy's soft stop (it takes no new request; those in flight finish, streams through the supervisor
   * too) for at most the drain timeout, then SIGTERM to every started replica (nothing in flight: they stop
   * at once); kills what outlives its timeout. True when everything stopped by itself, exiting 0, no
   * request cut.
   */
  stop(): Promise<boolean>;
  /** SIGKILL to every process the cluster started (a second Ctrl-C) */
  kill(): void;
}

/** First restart delay; it doubles up to RESTART_MAX_MS while the replica keeps dying. */
const RESTART_FIRST_MS = 500;
const RESTART_MAX_MS = 30_000;
/** A replica up this long before it died is restarted after the first delay again. */
const RESTART_STABLE_MS = 60_000;

/** The install hint when HAProxy is missing. */
export function haproxyMissing(binary: string): string | null {
  const probe = spawnSync(binary, ["-v"], { encoding: "utf8" });
  if (probe.error || probe.status !== 0) {
    return `HAProxy not found (${binary}): continuum cluster runs it in front of the replicas. Install it with \`sudo apt-get install haproxy\` (Debian/Ubuntu) or pass --haproxy <path>.`;
  }
  return null;
}

/** `http://host:port[?agent-port=N]` as a remote replica; an Error saying what is wrong otherwise. */
export function parseReplicaUrl(text: string): RemoteReplica {
  const wrong = (why: string) => new Error(`--replica ${text}: ${why}`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw wrong("expected http://host:port");
  }
  if (url.protocol !== "http:") throw wrong("only http:// (HAProxy speaks plain HTTP to the replicas)");
  if (url.pathname !== "/" || url.hash || url.username || url.password) {
    throw wrong("expected http://host:port, with no path");
  }
  let agentPort: number | undefined;
  for (const [key, value] of url.searchParams) {
    const n = Number(value);
    if (key !== "agent-port") throw wrong(`unknown parameter ${key} (only agent-port)`);
    if (!Number.isInteger(n) || n < 1 || n > 65535) throw wrong(`agent-port ${value} is not a port`);
    agentPort = n;
  }
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  return { host, port: url.port ? Number(url.port) : 80, ...(agentPort === undefined ? {} : { agentPort }) };
}

const KV_EVENTS_FLAG = "--kv-events-endpoint";
const KV_REPLAY_FLAG = "--kv-events-replay-endpoint";
const KV_POD_FLAG = "--kv-events-pod";
const KV_RANK_FLAG = "--kv-events-data-parallel-rank";
const DISK_DIR_FLAG = "--disk-offload-dir";

/**
 * `endpoint` moved by replica `index` (0 for r1), as vLLM moves an endpoint by the data-parallel rank: a tcp
 * one to port + index, an ipc:// or inproc:// one to its name with `_dp<index>` appended. `tcp://*:*` (a free
 * port each) is kept.
 */
function offsetEndpoint(endpoint: string, index: number, flag: string): string {
  if (index === 0) return endpoint;
  if (endpoint.startsWith("ipc://") || endpoint.startsWith("inproc://")) return `${endpoint}_dp${index}`;
  const tcp = /^(tcp:\/\/.+):(\d+)$/.exec(endpoint);
  if (!tcp) return endpoint;
  const port = Number(tcp[2]) + index;
  if (port > 65535) {
    throw new Error(`${flag} ${endpoint}: replica r${index + 1} would bind port ${port}`);
  }
  return `${tcp[1]}:${port}`;
}

/**
 * Replica `index`'s (0 for r1) KV events endpoint, as vLLM offsets it by the data-parallel rank: an endpoint
 * it binds gets port + index (`tcp://*:5557`: r1 5557, r2 5558...), an ipc:// or inproc:// one the suffix
 * `_dp<index>`, so that replicas on one host never bind the same one. An endpoint it connects to is kept:
 * several publishers may connect to one subscriber. `tcp://*:*` (a free port each) is kept too.
 */
export function replicaKvEventsEndpoint(endpoint: string, index: number): string {
  return bindsEndpoint(endpoint) ? offsetEndpoint(endpoint, index, KV_EVENTS_FLAG) : endpoint;
}

/**
 * The pod replica `index` names in its KV events' default topic, `<pod>-r<N>` (`kv@<host>-r2@<model>`), so that
 * llm-d indexes each replica's blocks as a pod of its own.
 */
export function replicaKvEventsPod(pod: string, index: number): string {
  return `${pod}-r${index + 1}`;
}

/**
 * The disk tier's directory of started replica `index`: one of its own under the one given (a persistent
 * tier takes a directory for one server, and a replica restarted finds its own KV again there).
 */
function replicaDiskDir(dir: string, index: number): string {
  return join(dir, `r${index + 1}`);
}

/** The value of `flag` among serve flags (the last one given, as commander takes it), else null. */
function flagValue(serveArgs: readonly string[], flag: string): string | null {
  let value: string | null = null;
  serveArgs.forEach((arg, i) => {
    if (serveArgs[i - 1] === flag) value = arg;
    else if (arg.startsWith(`${flag}=`)) value = arg.slice(flag.length + 1);
  });
  return value;
}

/**
 * The serve flags of started replica `index` (0 for r1), made its own: its `--kv-events-endpoint` and
 * `--kv-events-replay-endpoint` (the replay socket is always bound, so always moved), the pod of its KV
 * events' topic (`--kv-events-pod`, given or else `$POD_IP` or the host name, with `-r<N>`) and its
 * data-parallel rank (the one given plus index, else index), and its `--disk-offload-dir`.
 */
export function replicaServeArgs(
  serveArgs: readonly string[],
  index: number,
  env: NodeJS.ProcessEnv = process.env,
): string[] {
  const perReplica: [string, (value: string) => string][] = [
    [KV_EVENTS_FLAG, (endpoint) => replicaKvEventsEndpoint(endpoint, index)],
    [KV_REPLAY_FLAG, (endpoint) => offsetEndpoint(endpoint, index, KV_REPLAY_FLAG)],
    [KV_POD_FLAG, (pod) => replicaKvEventsPod(pod, index)],
    [KV_RANK_FLAG, (rank) => (/^\d+$/.test(rank) ? String(Number(rank) + index) : rank)],
    [DISK_DIR_FLAG, (dir) => replicaDiskDir(dir, index)],
  ];
  const args = serveArgs.map((arg, i) => {
    for (const [flag, own] of perReplica) {
      if (serveArgs[i - 1] === flag) return own(arg);
      if (arg.startsWith(`${flag}=`)) return `${flag}=${own(arg.slice(flag.length + 1))}`;
    }
    return arg;
  });
  if (flagValue(serveArgs, KV_EVENTS_FLAG) !== null) {
    if (flagValue(serveArgs, KV_POD_FLAG) === null) {
      args.push(KV_POD_FLAG, replicaKvEventsPod(env["POD_IP"] || hostname(), index));
    }
    if (flagValue(serveArgs, KV_RANK_FLAG) === null) args.push(KV_RANK_FLAG, String(index));
  }
  return args;
}

/** The `--kv-events-endpoint` among serve flags (the last one given, as commander takes it), else null. */
export function kvEventsEndpointOf(serveArgs: readonly string[]): string | null {
  return flagValue(serveArgs, KV_EVENTS_FLAG);
}

/** The `--kv-events-pod` among serve flags, else null. */
export function kvEventsPodOf(serveArgs: readonly string[]): string | null {
  return flagValue(serveArgs, KV_POD_FLAG);
}

/** Where a replica listening on `host` is reached from this host. */
function reachableHost(host: string): string {
  if (host === "0.0.0.0") return "127.0.0.1";
  if (host === "::") return "::1";
  return host;
}

function urlOf(host: string, port: number): string {
  return `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
}

/** Where a server listening on `host`:`port` is reached from this host. */
function reachableUrl(host: string, port: number): string {
  return urlOf(reachableHost(host), port);
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

/** util-linux's setpriv, which has the kernel signal the command it runs when its parent dies; null if absent. */
const SETPRIV = ["/usr/bin/setpriv", "/bin/setpriv"].find((path) => existsSync(path)) ?? null;

/**
 * `command` run so that it is sent SIGTERM when this process dies however it dies (a SIGKILL, the OOM
 * killer), where an exit handler never runs: HAProxy left behind would keep the balancer's port. Without
 * setpriv, as it is.
 */
function diesWithThisProcess(command: readonly string[]): string[] {
  return SETPRIV === null ? [...command] : [SETPRIV, "--pdeathsig", "TERM", "--", ...command];
}

/** SIGKILL to a child's whole process group (it leads one: spawned detached). */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    child.kill("SIGKILL");
  }
}

/** Waits until `url` answers HTTP at all (any status: a balancer without a live replica answers 503). */
async function waitAnswering(url: string, exited: Promise<unknown>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  while (Date.now() < deadline) {
    if (gone) throw new Error(`${url} exited before it answered`);
    try {
      await (await fetch(`${url}/health`, { signal: AbortSignal.timeout(1000) })).body?.cancel();
      return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
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

/**
 * `signal` (SIGTERM; HAProxy's soft stop is SIGUSR1), then SIGKILL after the timeout; true when it exited
 * by itself with 0 (or had exited before: a replica waiting for its restart).
 */
async function stopProcess(
  child: ChildProcess,
  exited: Promise<number | null>,
  timeoutMs: number,
  signal: NodeJS.Signals = "SIGTERM",
): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  child.kill(signal);
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    killGroup(child);
  }, timeoutMs);
  const code = await exited;
  clearTimeout(timer);
  return !killed && code === 0;
}

/** One replica the cluster runs: its current process, respawned by `spawn()` after it died. */
class Replica implements StartedReplica {
  process!: ChildProcess;
  exited!: Promise<number | null>;
  restarts = 0;
  /** when the current process was started, ms */
  startedAtMs = 0;
  /** how the last process ended and when the next one starts, while it is not back */
  down: { how: string; atMs: number; restartAtMs: number } | null = null;

  constructor(
    readonly name: string,
    readonly host: string,
    readonly port: number,
    readonly agentPort: number,
    readonly kvEventsEndpoint: string | null,
    readonly kvEventsPod: string | null,
    private readonly launch: () => ChildProcess,
  ) {
    this.spawn();
  }

  get url(): string {
    return urlOf(this.host, this.port);
  }

  spawn(): void {
    this.process = this.launch();
    this.exited = exitOf(this.process);
    this.startedAtMs = Date.now();
  }

  /** Why it is down, for the fleet view: how it exited, how long ago, and when it is (was) restarted. */
  downReason(nowMs: number): string | null {
    if (!this.down) return null;
    const ago = `${((nowMs - this.down.atMs) / 1000).toFixed(1)} s ago`;
    const restart =
      nowMs < this.down.restartAtMs
        ? `restart ${this.restarts + 1} in ${((this.down.restartAtMs - nowMs) / 1000).toFixed(1)} s`
        : `restarted (pid ${this.process.pid}), not answering /health yet`;
    return `exited (${this.down.how}) ${ago}; ${restart}`;
  }
}

export async function startCluster(o: ClusterOptions): Promise<RunningCluster> {
  const missing = haproxyMissing(o.haproxy);
  if (missing) throw new Error(missing);
  if (o.replicas + o.remote.length === 0) throw new Error("a cluster needs at least one replica");
  if (o.devices.length > 0 && o.devices.length !== o.replicas) {
    throw new Error(`--devices names ${o.devices.length} devices for ${o.replicas} replicas`);
  }
  const [executable, ...prefixArgs] = o.command;
  if (!executable) throw new Error("no command to start the replicas with");

  // each started replica's own serve flags, checked before any starts
  const replicaArgs = Array.from({ length: o.replicas }, (_, i) => replicaServeArgs(o.serveArgs, i));
  const started: Replica[] = [];
  const stopStarted = () =>
    Promise.all(started.map((r) => stopProcess(r.process, r.exited, o.stopTimeoutMs)));
  try {
    for (let i = 1; i <= o.replicas; i++) {
      const name = `r${i}`;
      const port = o.port + i;
      const agentPort = o.port + o.replicas + i;
      const device = o.devices[i - 1];
      const serveArgs = replicaArgs[i - 1] as string[];
      const launch = () => {
        const child = spawn(
          executable,
          [
            ...prefixArgs,
            "serve",
            ...serveArgs,
            "--host",
            o.replicaHost,
            "--port",
            String(port),
            "--agent-port",
            String(agentPort),
            // a supervisor killed outright leaves no replica running on its own
            "--exit-with-parent",
          ],
          {
            stdio: ["ignore", "pipe", "pipe"],
            env: device === undefined ? process.env : { ...process.env, CUDA_VISIBLE_DEVICES: device },
            // its own process group: a terminal's Ctrl-C reaches the supervisor, which drains it
            detached: true,
          },
        );
        pipeLines(child, `[${name}]`, o.log);
        return child;
      };
      started.push(
        new Replica(
          name,
          reachableHost(o.replicaHost),
          port,
          agentPort,
          kvEventsEndpointOf(serveArgs),
          kvEventsEndpointOf(serveArgs) === null ? null : kvEventsPodOf(serveArgs),
          launch,
        ),
      );
    }
    await Promise.all(started.map((r) => waitHealthy(r.url, r.exited, o.startTimeoutMs)));
  } catch (error) {
    await stopStarted();
    throw error;
  }
  const remote: ClusterReplica[] = o.remote.map((r, i) => ({
    name: `r${o.replicas + i + 1}`,
    url: urlOf(r.host, r.port),
    ...r,
  }));
  await Promise.all(
    remote.map(async (r) => {
      const up = await fetch(`${r.url}/health`, { signal: AbortSignal.timeout(2000) }).then(
        (response) => response.status === 200 || response.status === 503,
        () => false,
      );
      if (!up)
        o.log(
          `continuum cluster: ${r.name} (${r.url}) does not answer /health yet; HAProxy adds it when it does`,
        );
    }),
  );
  const replicas: readonly ClusterReplica[] = [...started, ...remote];

  const fleet = (): FleetReplica[] => [
    ...started.map((r) => ({
      name: r.name,
      url: r.url,
      started: true,
      pid: r.process.pid ?? null,
      restarts: r.restarts,
      exited: r.downReason(Date.now()),
    })),
    ...remote.map((r) => ({
      name: r.name,
      url: r.url,
      started: false,
      pid: null,
      restarts: 0,
      exited: null,
    })),
  ];
  mkdirSync(o.configDir, { recursive: true });
  const configPath = resolve(join(o.configDir, "haproxy.cfg"));
  // streamed requests come back to HAProxy on a local socket, and the supervisor reads HAProxy's stats on
  // another: on Linux sockets of the abstract namespace (no file to clean up), elsewhere files beside the
  // configuration
  const localSocket = (name: string) => {
    const abstract = `continuum-cluster-${o.port}-${process.pid}-${name}`;
    const file = resolve(join(o.configDir, `${name}.sock`));
    return process.platform === "linux"
      ? { bind: `abns@${abstract}`, path: `\0${abstract}` }
      : { bind: `unix@${file}`, path: file };
  };
  const streams = localSocket("streams");
  const stats = localSocket("stats");
  let supervisor: SupervisorServer;
  try {
    supervisor = await startSupervisorServer(fleet, streams.path, stats.path);
  } catch (error) {
    await stopStarted();
    throw error;
  }

  writeFileSync(
    configPath,
    haproxyConfig({
      host: o.host,
      port: o.port,
      replicas,
      bufferBytes: 1 << 20,
      maxConnections: o.maxConnections,
      checkIntervalMs: 1000,
      supervisor: { port: supervisor.port, streamsBind: streams.bind, statsBind: stats.bind },
    }),
  );
  // -db: foreground, logs to stderr; -W: master-worker, so SIGTERM stops it cleanly
  const [haproxyCommand, ...haproxyArgs] = diesWithThisProcess([o.haproxy, "-W", "-db", "-f", configPath]);
  const haproxy = spawn(haproxyCommand as string, haproxyArgs, {
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  pipeLines(haproxy, "[haproxy]", o.log);
  const haproxyExited = exitOf(haproxy);
  // a supervisor that exits without stopping (an uncaught error) leaves no balancer behind; its replicas
  // see their parent gone and drain by themselves
  const orphaned = () => killGroup(haproxy);
  process.once("exit", orphaned);
  const url = urlOf(o.host, o.port);
  try {
    // HAProxy listening is enough: it answers 503 until a replica is up, however long that takes
    await waitAnswering(reachableUrl(o.host, o.port), haproxyExited, 10_000);
  } catch (error) {
    await stopStarted();
    await stopProcess(haproxy, haproxyExited, o.stopTimeoutMs);
    await supervisor.close();
    process.removeListener("exit", orphaned);
    throw error;
  }

  let stopping = false;
  /** restarts waiting out their delay, ended early by a stop */
  const pauses = new Set<() => void>();
  const pause = (ms: number) =>
    new Promise<void>((done) => {
      const wake = () => {
        clearTimeout(timer);
        pauses.delete(wake);
        done();
      };
      const timer = setTimeout(wake, ms);
      pauses.add(wake);
    });
  const endPauses = () => {
    for (const wake of [...pauses]) wake();
  };
  const supervise = async (r: Replica) => {
    let delayMs = RESTART_FIRST_MS;
    for (;;) {
      const code = await r.exited;
      if (stopping) return;
      if (Date.now() - r.startedAtMs >= RESTART_STABLE_MS) delayMs = RESTART_FIRST_MS;
      const diedAtMs = Date.now();
      const how = code === null ? (r.process.signalCode ?? "killed") : `code ${code}`;
      r.down = { how, atMs: diedAtMs, restartAtMs: diedAtMs + delayMs };
      o.log(
        `continuum cluster: replica ${r.name} (${r.url}) exited (${how}); restart ${r.restarts + 1} in ${(delayMs / 1000).toFixed(1)} s`,
      );
      await pause(delayMs);
      if (stopping) return;
      delayMs = Math.min(2 * delayMs, RESTART_MAX_MS);
      r.spawn();
      r.restarts += 1;
      try {
        await waitHealthy(r.url, r.exited, o.startTimeoutMs);
        r.down = null;
        o.log(
          `continuum cluster: replica ${r.name} is back (pid ${r.process.pid}), ${((Date.now() - diedAtMs) / 1000).toFixed(1)} s after it exited`,
        );
      } catch (error) {
        if (stopping) return;
        o.log(`continuum cluster: replica ${r.name} did not come back: ${(error as Error).message}`);
        killGroup(r.process);
      }
    }
  };
  for (const r of started) void supervise(r);

  const ended = haproxyExited.then((code) =>
    stopping ? new Promise<string>(() => {}) : `HAProxy exited (${code})`,
  );
  let stoppingAll: Promise<boolean> | null = null;
  return {
    url,
    configPath,
    replicas,
    started,
    ended,
    stop() {
      stoppingAll ??= (async () => {
        stopping = true;
        endPauses();
        // the balancer first: no new request comes in, those in flight finish (or are cut at the drain
        // timeout); then the replicas have nothing in flight and stop at once
        const haproxyClean = await stopProcess(haproxy, haproxyExited, o.drainTimeoutMs, "SIGUSR1");
        const replicasClean = await stopStarted();
        await supervisor.close();
        process.removeListener("exit", orphaned);
        return replicasClean.every(Boolean) && haproxyClean;
      })();
      return stoppingAll;
    },
    kill() {
      stopping = true;
      endPauses();
      for (const r of started) killGroup(r.process);
      killGroup(haproxy);
    },
  };
}
