/**
 * deploy/: the Kubernetes manifests and the Dockerfile agree with each other and with the CLI. Nothing here
 * runs a cluster; it parses every manifest and checks names, labels, ports and flags against
 * `continuum serve`'s own command object, the engine's block size and the program id's header.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { DEFAULT_BLOCK_SIZE_TOKENS } from "../../engine/engine-setup.js";
import { bindsEndpoint } from "../../engine/kv/kv-event-wire.js";
import { programIdOf } from "../../server/programs/program-identity.js";
import { type ServeCliOptions, serveCommand } from "./serve-command.js";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));
const DEPLOY = join(ROOT, "deploy");

// The manifests' shapes, as far as the checks read them.
interface Labels {
  [key: string]: string;
}
interface ContainerPort {
  name: string;
  containerPort: number;
}
interface Probe {
  httpGet: { path: string; port: string };
  periodSeconds: number;
  failureThreshold: number;
}
interface Container {
  name: string;
  command: string[];
  args: string[];
  ports: ContainerPort[];
  startupProbe: Probe;
  readinessProbe: Probe;
  livenessProbe: Probe;
  volumeMounts: { name: string; mountPath: string }[];
}
interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Labels };
  // biome-ignore lint/suspicious/noExplicitAny: each kind's spec is read through the typed views below
  spec?: any;
  data?: Record<string, string>;
}
interface DeploymentSpec {
  selector: { matchLabels: Labels };
  template: {
    metadata: { labels: Labels };
    spec: {
      terminationGracePeriodSeconds: number;
      containers: Container[];
      volumes: { name: string }[];
    };
  };
}
interface ServiceSpec {
  selector: Labels;
  ports: { name: string; port: number; targetPort: string }[];
}
interface InferencePoolSpec {
  selector: { matchLabels: Labels };
  targetPorts: { number: number }[];
  endpointPickerRef: { name: string; port: { number: number } };
}
interface EppPlugin {
  type: string;
  name?: string;
  // biome-ignore lint/suspicious/noExplicitAny: plugin parameters differ per plugin type
  parameters?: any;
}
interface EppConfig {
  apiVersion: string;
  kind: string;
  plugins: EppPlugin[];
  schedulingProfiles: { name: string; plugins: { pluginRef: string }[] }[];
}

function loadManifests(): Manifest[] {
  const files = readdirSync(DEPLOY).filter((f) => f.endsWith(".yaml"));
  assert.ok(files.length >= 4, `deploy/ holds ${files.join(", ")}`);
  return files.flatMap((file) =>
    parseAllDocuments(readFileSync(join(DEPLOY, file), "utf8")).map((doc) => {
      assert.deepEqual(doc.errors, [], `${file} parses`);
      return doc.toJS() as Manifest;
    }),
  );
}

const manifests = loadManifests();

function only(kind: string): Manifest {
  const found = manifests.filter((m) => m.kind === kind);
  assert.equal(found.length, 1, `one ${kind} in deploy/`);
  return found[0] as Manifest;
}

const deployment = only("Deployment");
const service = only("Service");
const pool = only("InferencePool");
const eppConfigMap = only("ConfigMap");
const dSpec = deployment.spec as DeploymentSpec;
const sSpec = service.spec as ServiceSpec;
const pSpec = pool.spec as InferencePoolSpec;
const container = dSpec.template.spec.containers[0] as Container;

/** The container's args as `continuum serve` parses them (its commander command, action replaced). */
function serveOptionsOf(args: string[]): ServeCliOptions {
  const command = serveCommand();
  let parsed: ServeCliOptions | null = null;
  command.exitOverride().action((o: ServeCliOptions) => {
    parsed = o;
  });
  command.parse(args, { from: "user" });
  assert.ok(parsed, "serve's action ran");
  return parsed;
}

function portNamed(name: string): number {
  const port = container.ports.find((p) => p.name === name);
  assert.ok(port, `container port ${name}`);
  return port.containerPort;
}

function tcpPort(endpoint: string): number {
  const match = /^tcp:\/\/.+:(\d+)$/.exec(endpoint);
  assert.ok(match, `${endpoint} is a tcp endpoint with a port`);
  return Number(match[1]);
}

function eppConfig(): EppConfig {
  const files = Object.keys(eppConfigMap.data ?? {});
  assert.deepEqual(files, ["epp-config.yaml"]);
  return parseYaml(eppConfigMap.data?.["epp-config.yaml"] as string) as EppConfig;
}

function plugin(config: EppConfig, type: string): EppPlugin {
  const found = config.plugins.filter((p) => p.type === type);
  assert.equal(found.length, 1, `one ${type} plugin`);
  return found[0] as EppPlugin;
}

describe("deploy/ manifests", () => {
  test("API versions and kinds are the current ones", () => {
    assert.equal(deployment.apiVersion, "apps/v1");
    assert.equal(service.apiVersion, "v1");
    assert.equal(pool.apiVersion, "inference.networking.k8s.io/v1");
    const config = eppConfig();
    assert.equal(config.apiVersion, "llm-d.ai/v1alpha1");
    assert.equal(config.kind, "EndpointPickerConfig");
  });

  test("Deployment, Service and InferencePool select the same pods", () => {
    const selector = dSpec.selector.matchLabels;
    assert.ok(Object.keys(selector).length > 0);
    for (const [key, value] of Object.entries(selector)) {
      assert.equal(dSpec.template.metadata.labels[key], value, `pod template carries ${key}`);
    }
    assert.deepEqual(sSpec.selector, selector);
    assert.deepEqual(pSpec.selector.matchLabels, selector);
    assert.equal(service.metadata.name, deployment.metadata.name);
    assert.equal(pool.metadata.name, deployment.metadata.name);
    assert.equal(pSpec.endpointPickerRef.name, `${deployment.metadata.name}-epp`);
    assert.ok(pSpec.endpointPickerRef.port.number > 0);
  });

  test("the container runs `continuum serve` with flags serve has, values it accepts", () => {
    assert.deepEqual(container.command, ["node", "bin/continuum.js", "serve"]);
    assert.ok(existsSync(join(ROOT, "bin", "continuum.js")));
    const known = new Set(serveCommand().options.flatMap((o) => [o.long, o.short].filter(Boolean)));
    for (const flag of container.args.filter((a) => a.startsWith("-"))) {
      assert.ok(known.has(flag), `${flag} is a \`continuum serve\` option`);
    }
    const o = serveOptionsOf(container.args);
    assert.equal(o.host, "0.0.0.0");
    const models = container.volumeMounts.find((m) => m.name === "models");
    assert.ok(models && o.model?.startsWith(`${models.mountPath}/`), "--model lies on the models volume");
    assert.ok(dSpec.template.spec.volumes.some((v) => v.name === "models"));
  });

  test("ports: serve's --port and the KV events' port are the container's, the Service's and the pool's", () => {
    const o = serveOptionsOf(container.args);
    assert.equal(portNamed("http"), o.port);
    assert.deepEqual(
      pSpec.targetPorts.map((p) => p.number),
      [o.port],
    );
    const endpoint = o.kvEventsEndpoint;
    assert.equal(endpoint, "tcp://*:5557");
    assert.ok(bindsEndpoint(endpoint), "the pod binds, the picker subscribes to each pod");
    assert.equal(portNamed("kv-events"), tcpPort(endpoint));
    for (const p of sSpec.ports) assert.equal(p.port, portNamed(p.targetPort), `Service port ${p.name}`);
    const dockerfile = readFileSync(join(DEPLOY, "Dockerfile"), "utf8");
    assert.match(dockerfile, new RegExp(`^EXPOSE ${o.port} ${tcpPort(endpoint)}$`, "m"));
  });

  test("probes on /health and a grace period longer than serve's --drain-timeout", () => {
    const o = serveOptionsOf(container.args);
    for (const probe of [container.startupProbe, container.readinessProbe, container.livenessProbe]) {
      assert.deepEqual(probe.httpGet, { path: "/health", port: "http" });
    }
    const grace = dSpec.template.spec.terminationGracePeriodSeconds;
    assert.ok(grace > o.drainTimeout, `grace ${grace} s > --drain-timeout ${o.drainTimeout} s`);
    // /health answers 503 while draining: liveness must not kill a draining pod within its grace period
    const live = container.livenessProbe;
    assert.ok(live.periodSeconds * live.failureThreshold >= grace);
  });

  test("the endpoint picker reads our KV events, our block size and our session header", () => {
    const config = eppConfig();
    const o = serveOptionsOf(container.args);
    const precise = plugin(config, "precise-prefix-cache-scorer").parameters;
    assert.equal(precise.tokenProcessorConfig.blockSize, DEFAULT_BLOCK_SIZE_TOKENS);
    assert.equal(precise.kvEventsConfig.discoverPods, true);
    assert.equal(precise.kvEventsConfig.podDiscoveryConfig.socketPort, tcpPort(o.kvEventsEndpoint as string));
    assert.equal(precise.kvEventsConfig.topicFilter, "kv@");
    // the tokenizer is the served model's, named as the replicas name it
    assert.equal(plugin(config, "token-producer").parameters.modelName, o.servedModelName[0]);

    const producer = plugin(config, "session-id-producer");
    const header = (producer.parameters.headerName as string).toLowerCase();
    const named = programIdOf("chat", {}, (name) => (name === header ? "program-7" : undefined));
    assert.equal(named?.id, "program-7", `serve reads the program id from ${header}`);
    assert.equal(plugin(config, "session-affinity-scorer").parameters.sessionIDProducerName, producer.name);

    const profile = config.schedulingProfiles.find((p) => p.name === "default");
    assert.ok(profile);
    const used = new Set(profile.plugins.map((p) => p.pluginRef));
    for (const type of ["session-affinity-scorer", "precise-prefix-cache-scorer", "max-score-picker"]) {
      assert.ok(used.has(type), `the default profile uses ${type}`);
    }
  });
});
