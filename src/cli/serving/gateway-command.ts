/**
 * `continuum gateway`: the core scheduler and its policies in front of engines it does not own (vLLM,
 * SGLang, llama-server, Continuum replicas), speaking what `continuum serve` speaks (docs/gateway.md).
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Command, InvalidArgumentError, Option } from "commander";
import {
  type BackendSpec,
  ENGINE_KINDS,
  type EngineKind,
  parseBackendSpec,
} from "../../gateway/backends/backend-spec.js";
import { Gateway } from "../../gateway/gateway.js";
import { createPolicy, isPolicyName, POLICY_NAMES } from "../../policies/index.js";
import { createGatewayApp } from "../../server/gateway/gateway-app.js";
import { positiveInt } from "../sim-options.js";
import { apiKeysOf } from "./serve-command.js";

export interface GatewayCliOptions {
  backend: string[];
  engine?: EngineKind;
  schedulingPolicy: string;
  host: string;
  port: number;
  maxNumSeqs?: number;
  servedModelName: string[];
  apiKey: string[];
  apiKeysFile?: string;
}

export interface RunningGateway {
  readonly url: string;
  readonly port: number;
  readonly gateway: Gateway;
  close(): Promise<void>;
}

function collect(value: string, previous: string[]): string[] {
  return [...previous, value];
}

function port(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535)
    throw new InvalidArgumentError(`expected a port, got "${value}"`);
  return n;
}

/** The policies a gateway runs: not those whose KV falls to an offload tier, which is the backend's own. */
const GATEWAY_POLICIES = POLICY_NAMES.filter((name) => !createPolicy(name).needsOffload);

function policyName(value: string): string {
  if (!isPolicyName(value) || !GATEWAY_POLICIES.includes(value)) {
    throw new InvalidArgumentError(
      `unknown policy "${value}" for a gateway; choose from ${GATEWAY_POLICIES.join(", ")} (offload tiers are the backend's own)`,
    );
  }
  return value;
}

/** Starts the gateway and its HTTP API; backends that do not answer yet are reported and probed again. */
export async function runGateway(
  o: GatewayCliOptions,
  {
    log = (line: string): void => {
      process.stderr.write(`${line}\n`);
    },
    handleSignals = true,
  }: { log?: (line: string) => void; handleSignals?: boolean } = {},
): Promise<RunningGateway> {
  if (o.backend.length === 0)
    throw new Error("give at least one --backend URL (e.g. --backend http://127.0.0.1:8080)");
  const specs: BackendSpec[] = o.backend.map(parseBackendSpec);
  const gateway = new Gateway({
    backends: specs,
    engine: o.engine ?? null,
    policy: () => createPolicy(o.schedulingPolicy),
    ...(o.maxNumSeqs === undefined ? {} : { maxNumSeqs: o.maxNumSeqs }),
    log,
  });
  await gateway.start();
  const app = createGatewayApp({ gateway, apiKeys: apiKeysOf(o), servedModelNames: o.servedModelName });
  const server = await new Promise<Server>((resolve, reject) => {
    const s = serve({ fetch: app.fetch, hostname: o.host, port: o.port }, () => resolve(s as Server));
    s.once("error", reject);
  });
  const boundPort = (server.address() as AddressInfo).port;
  const url = `http://${o.host.includes(":") ? `[${o.host}]` : o.host}:${boundPort}`;
  const up = gateway.upBackends.length;
  log(
    `continuum gateway on ${url}: ${specs.length} backend(s), ${up} up, policy ${o.schedulingPolicy}` +
      (up === 0 ? " (requests are answered 503 until one is up)" : ""),
  );
  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await gateway.close();
    })();
    return closing;
  };
  if (handleSignals) {
    const stop = () => void close().then(() => process.exit(0));
    process.once("SIGTERM", stop);
    process.once("SIGINT", stop);
  }
  return { url, port: boundPort, gateway, close };
}

export function gatewayCommand(): Command {
  return new Command("gateway")
    .description(
      "schedule agent programs onto engines you already run (vLLM, SGLang, llama-server, Continuum): the core scheduler and its policies in front of them, speaking what `serve` speaks",
    )
    .option(
      "--backend <url>",
      "a backend's base URL (repeatable); ?kv-tokens=N gives its KV size where it cannot say (llama-server --kv-unified), ?kv-events=tcp://host:port where it publishes vLLM KV events",
      collect,
      [],
    )
    .addOption(
      new Option("--engine <engine>", "the backends' engine (default: detected for each)").choices([
        ...ENGINE_KINDS,
      ]),
    )
    .option(
      "--scheduling-policy <name>",
      `the gateway's policy (${GATEWAY_POLICIES.join(", ")}); vllm forwards every turn at once`,
      policyName,
      "cachettl-adaptive",
    )
    .option(
      "--max-num-seqs <n>",
      "turns forwarded to one backend at once, where the backend does not say (llama-server: its slots; default 256)",
      positiveInt,
    )
    .option("--host <host>", "address to bind", "127.0.0.1")
    .option("--port <port>", "port to listen on", port, 8000)
    .option("--served-model-name <name>", "a name clients may use for the model (repeatable)", collect, [])
    .option(
      "--api-key <key>",
      "require Authorization: Bearer <key> on /v1; repeat for several tenants (default: env CONTINUUM_API_KEY)",
      collect,
      [],
    )
    .option("--api-keys-file <file>", "more API keys, one per line (a tenant each; # comments)")
    .action(async (options: GatewayCliOptions) => {
      await runGateway(options);
    });
}
