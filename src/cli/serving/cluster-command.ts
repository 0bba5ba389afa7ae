import { Command, InvalidArgumentError } from "commander";
import { parseReplicaUrl, type RemoteReplica, startCluster } from "../../cluster/cluster.js";
import { loadPolicyModules } from "../../policies/index.js";
import { positiveInt } from "../sim-options.js";
import { DEFAULT_DRAIN_TIMEOUT_S } from "./serve-command.js";

interface ClusterCliOptions {
  replicas?: number;
  replica?: RemoteReplica[];
  replicaHost: string;
  port: number;
  host: string;
  haproxy: string;
  configDir: string;
  devices?: string[];
  maxConnections: number;
}

function basePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65000)
    throw new InvalidArgumentError(`expected a port, got "${value}"`);
  return n;
}

function replicaCount(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`expected a count, got "${value}"`);
  return n;
}

function remoteReplica(value: string, previous: RemoteReplica[] | undefined): RemoteReplica[] {
  try {
    return [...(previous ?? []), parseReplicaUrl(value)];
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

/**
 * `--devices`: each replica's GPUs (its CUDA_VISIBLE_DEVICES), comma separated, one entry per replica; `+`
 * joins the GPUs of a replica that spans several (`0+1,2+3`: a model too large for one GPU, which llama.cpp
 * then splits by layers over the GPUs it sees).
 */
export function replicaDevices(value: string): string[] {
  return value.split(",").map((entry) => {
    const gpus = entry.split("+").map((gpu) => gpu.trim());
    if (gpus.some((gpu) => !/^[\w-]+$/.test(gpu))) {
      throw new InvalidArgumentError(
        `expected GPUs such as 0,1 or 0+1,2+3 (one entry per replica), got "${value}"`,
      );
    }
    return gpus.join(",");
  });
}

/** The value a `serve` flag list gives `flag` (the last one given, as commander takes it), or null. */
export function serveFlagOf(serveArgs: readonly string[], flag: string): string | null {
  let value: string | null = null;
  serveArgs.forEach((arg, i) => {
    if (serveArgs[i - 1] === flag) value = arg;
    else if (arg.startsWith(`${flag}=`)) value = arg.slice(flag.length + 1);
  });
  return value;
}

/** The replicas' --drain-timeout in ms: how long stopping the cluster lets the requests in flight finish. */
export function drainTimeoutMsOf(serveArgs: readonly string[]): number {
  const given = serveFlagOf(serveArgs, "--drain-timeout");
  if (given === null) return 1000 * DEFAULT_DRAIN_TIMEOUT_S;
  const s = Number(given);
  if (given.trim() === "" || !Number.isFinite(s) || s < 0) {
    throw new InvalidArgumentError(`--drain-timeout: expected seconds >= 0, got "${given}"`);
  }
  return 1000 * s;
}

export function clusterCommand(): Command {
  return new Command("cluster")
    .description(
      "`continuum serve` replicas behind HAProxy, started here and/or on other hosts: every turn of a program on the replica holding its KV",
    )
    .option(
      "--replicas <n>",
      "replicas to start on this host (ports P+1 .. P+N); default 2, or 0 with --replica",
      replicaCount,
    )
    .option(
      "--replica <url>",
      "a replica this cluster fronts but does not start, http://host:port[?agent-port=N] (repeatable)",
      remoteReplica,
    )
    .option(
      "--replica-host <host>",
      "where started replicas listen (0.0.0.0: every interface, for balancers on other hosts)",
      "127.0.0.1",
    )
    .option("--port <port>", "the balancer's port P", basePort, 8000)
    .option("--host <host>", "where the balancer listens", "127.0.0.1")
    .option("--haproxy <path>", "the haproxy binary", "haproxy")
    .option("--config-dir <dir>", "where the generated haproxy.cfg is written", "continuum-cluster")
    .option(
      "--devices <list>",
      "GPUs per replica, comma separated, + joining one replica's (sets CUDA_VISIBLE_DEVICES), e.g. 0,1,2 or 0+1,2+3",
      replicaDevices,
    )
    .option(
      "--max-connections <n>",
      "connections HAProxy holds at once (each takes up to 2 MiB of buffers; see docs/scale-out.md)",
      positiveInt,
      4096,
    )
    .argument(
      "[serve-flags...]",
      "any `continuum serve` flag, given to every started replica (--kv-events-endpoint tcp://*:5557 binds 5557 on r1, 5558 on r2..., each with topic kv@<host>-r<N>@<model> and data-parallel rank N-1)",
    )
    .allowUnknownOption()
    .addHelpText(
      "after",
      "\nExamples:\n  continuum cluster --replicas 3 --port 8000 --builtin-model tiny --threads 1\n" +
        "  continuum cluster --replicas 0 --host 0.0.0.0 --replica http://10.0.0.2:8001 --replica http://10.0.0.3:8001\n" +
        "\nCtrl-C or SIGTERM lets the requests in flight finish (at most the replicas' --drain-timeout) and stops (a second Ctrl-C kills everything at once); a replica that dies is restarted.",
    )
    .action(async (serveArgs: string[], o: ClusterCliOptions) => {
      const log = (line: string) => process.stdout.write(`${line}\n`);
      const remote = o.replica ?? [];
      const replicas = o.replicas ?? (remote.length > 0 ? 0 : 2);
      if (replicas + remote.length === 0) {
        throw new Error("--replicas 0 needs at least one --replica");
      }
      // A policy module is checked here once, before any replica starts (each replica, started in this
      // working directory, imports it again for itself).
      const policy = serveFlagOf(serveArgs, "--scheduling-policy");
      if (policy !== null) await loadPolicyModules([policy]);
      const cluster = await startCluster({
        replicas,
        remote,
        replicaHost: o.replicaHost,
        port: o.port,
        host: o.host,
        serveArgs,
        haproxy: o.haproxy,
        configDir: o.configDir,
        devices: o.devices ?? [],
        command: [process.execPath, ...process.execArgv, process.argv[1] as string],
        log,
        maxConnections: o.maxConnections,
        startTimeoutMs: 600_000,
        drainTimeoutMs: drainTimeoutMsOf(serveArgs),
        stopTimeoutMs: 60_000,
      });
      log(`continuum cluster: ${cluster.replicas.length} replicas behind HAProxy on ${cluster.url}`);
      for (const r of cluster.started) {
        const kvEvents = r.kvEventsEndpoint
          ? `, KV events on ${r.kvEventsEndpoint} with topic kv@${r.kvEventsPod}@<model>`
          : "";
        log(`  ${r.name} ${r.url} (pid ${r.process.pid}${kvEvents})`);
      }
      for (const r of cluster.replicas.slice(cluster.started.length)) log(`  ${r.name} ${r.url} (remote)`);
      log(`  HAProxy configuration: ${cluster.configPath}`);
      log(`  fleet view: ${cluster.url}/dashboard, ${cluster.url}/metrics`);
      let stopping = false;
      const stop = (reason: string, code: number) => {
        if (stopping) {
          log(`continuum cluster: ${reason} again, killing the replicas and HAProxy`);
          cluster.kill();
          process.exit(1);
        }
        stopping = true;
        log(
          `continuum cluster: ${reason}, finishing the requests in flight (at most ${drainTimeoutMsOf(serveArgs) / 1000} s; the balancer takes no new ones), then stopping the replicas; Ctrl-C again stops at once`,
        );
        cluster.stop().then(
          (clean) => process.exit(clean ? code : 1),
          () => process.exit(1),
        );
      };
      for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const)
        process.on(signal, () => stop(signal, 0));
      void cluster.ended.then((why) => stop(why, 1));
    });
}
