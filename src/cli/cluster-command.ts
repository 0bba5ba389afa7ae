import { Command, InvalidArgumentError } from "commander";
import { startCluster } from "../cluster/cluster.js";
import { positiveInt } from "./sim-options.js";

interface ClusterCliOptions {
  replicas: number;
  port: number;
  host: string;
  haproxy: string;
  configDir: string;
  devices?: string;
  maxConnections: number;
}

function basePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 65000)
    throw new InvalidArgumentError(`expected a port, got "${value}"`);
  return n;
}

export function clusterCommand(): Command {
  return new Command("cluster")
    .description(
      "N `continuum serve` replicas on one host behind HAProxy: every turn of a program on the replica holding its KV",
    )
    .option("--replicas <n>", "replicas to start (ports P+1 .. P+N)", positiveInt, 2)
    .option("--port <port>", "the balancer's port P", basePort, 8000)
    .option("--host <host>", "where the balancer listens", "127.0.0.1")
    .option("--haproxy <path>", "the haproxy binary", "haproxy")
    .option("--config-dir <dir>", "where the generated haproxy.cfg is written", "continuum-cluster")
    .option("--devices <list>", "GPU per replica, comma separated (sets CUDA_VISIBLE_DEVICES), e.g. 0,1,2")
    .option(
      "--max-connections <n>",
      "connections HAProxy holds at once (each takes up to 2 MiB of buffers; see docs/scale-out.md)",
      positiveInt,
      4096,
    )
    .argument("[serve-flags...]", "any `continuum serve` flag, given to every replica")
    .allowUnknownOption()
    .addHelpText(
      "after",
      "\nExample: continuum cluster --replicas 3 --port 8000 --builtin-model tiny --threads 1",
    )
    .action(async (serveArgs: string[], o: ClusterCliOptions) => {
      const log = (line: string) => process.stdout.write(`${line}\n`);
      const cluster = await startCluster({
        replicas: o.replicas,
        port: o.port,
        host: o.host,
        serveArgs,
        haproxy: o.haproxy,
        configDir: o.configDir,
        devices: o.devices ? o.devices.split(",").map((d) => d.trim()) : [],
        command: [process.execPath, ...process.execArgv, process.argv[1] as string],
        log,
        maxConnections: o.maxConnections,
        startTimeoutMs: 600_000,
        stopTimeoutMs: 60_000,
      });
      log(`continuum cluster: ${o.replicas} replicas behind HAProxy on ${cluster.url}`);
      for (const r of cluster.replicas) log(`  ${r.name} ${r.url}`);
      log(`  HAProxy configuration: ${cluster.configPath}`);
      let stopping = false;
      const stop = (reason: string, code: number) => {
        if (stopping) return;
        stopping = true;
        log(`continuum cluster: ${reason}, stopping replicas (they drain) and HAProxy`);
        cluster.stop().then(
          () => process.exit(code),
          () => process.exit(1),
        );
      };
      process.on("SIGINT", () => stop("SIGINT", 0));
      process.on("SIGTERM", () => stop("SIGTERM", 0));
      void cluster.ended.then((why) => stop(why, 1));
    });
}
