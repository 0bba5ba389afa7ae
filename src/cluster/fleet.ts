/**
 * The fleet view the balancer's port shows instead of one replica per request: /metrics is every
 * replica's exposition with each sample labelled `replica="<name>"` (families merged, so a query sums or
 * splits by replica), plus the cluster's own families (each replica up or not, its restarts);
 * /dashboard/state is each replica's dashboard state side by side, which dashboard/fleet.html draws;
 * /replicas/<name>/dashboard[/state, /assets/<file>] is one replica's own dashboard, relayed, so a browser
 * on the balancer's port sees it without reaching the replica's port.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

/** What the fleet view knows of one replica. */
export interface FleetReplica {
  readonly name: string;
  readonly url: string;
  /** started by this cluster (else fronted only) */
  readonly started: boolean;
  /** the current process of a started replica */
  readonly pid: number | null;
  /** times this cluster restarted it after it died */
  readonly restarts: number;
}

/** How long one replica may take to answer a scrape before it counts as down. */
const SCRAPE_TIMEOUT_MS = 2000;
/** Programs of one replica the fleet state lists at most (the page shows a sample, not 10 000 rows). */
const PROGRAMS_LISTED = 100;

interface Family {
  help: string | null;
  type: string | null;
  readonly samples: string[];
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

function labels(pairs: Record<string, string>): string {
  return Object.entries(pairs)
    .map(([k, v]) => `${k}="${escapeLabel(v)}"`)
    .join(",");
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(.*)$/;

/**
 * Prometheus text expositions of several replicas as one: each family once (its HELP and TYPE as the
 * first replica gave them), its samples from every replica in turn, each with `replica="<name>"` added.
 */
export function mergeExpositions(
  parts: readonly { readonly replica: string; readonly text: string }[],
): string {
  const families = new Map<string, Family>();
  const family = (name: string): Family => {
    let f = families.get(name);
    if (!f) {
      f = { help: null, type: null, samples: [] };
      families.set(name, f);
    }
    return f;
  };
  for (const { replica, text } of parts) {
    const label = labels({ replica });
    let current: string | null = null;
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      if (line.startsWith("#")) {
        const [, keyword, name] = line.split(" ");
        if (!name) continue;
        if (keyword === "HELP") family(name).help ??= line;
        else if (keyword === "TYPE") {
          family(name).type ??= line;
          current = name;
        }
        continue;
      }
      const m = SAMPLE.exec(line);
      if (!m) continue;
      const [, name, rest] = m as unknown as [string, string, string];
      const owner = current !== null && (name === current || name.startsWith(`${current}_`)) ? current : name;
      const labelled = rest.startsWith("{}")
        ? `${name}{${label}}${rest.slice(2)}`
        : rest.startsWith("{")
          ? `${name}{${label},${rest.slice(1)}`
          : `${name}{${label}}${rest}`;
      family(owner).samples.push(labelled);
    }
  }
  const lines: string[] = [];
  for (const f of families.values()) {
    if (f.samples.length === 0) continue;
    if (f.help) lines.push(f.help);
    if (f.type) lines.push(f.type);
    lines.push(...f.samples);
  }
  return lines.length > 0 ? `${lines.join("\n")}\n` : "";
}

/** The cluster's own families: which replicas answered this scrape, and how often each was restarted. */
function clusterFamilies(replicas: readonly FleetReplica[], up: readonly boolean[]): string {
  const lines = [
    "# HELP continuum:cluster_replica_up 1 when the replica answered this scrape of the fleet's /metrics, else 0",
    "# TYPE continuum:cluster_replica_up gauge",
    ...replicas.map(
      (r, i) =>
        `continuum:cluster_replica_up{${labels({ replica: r.name, url: r.url, kind: r.started ? "started" : "remote" })}} ${up[i] ? 1 : 0}`,
    ),
    "# HELP continuum:cluster_replica_restarts_total times the cluster restarted a replica it started after it died",
    "# TYPE continuum:cluster_replica_restarts_total counter",
    ...replicas
      .filter((r) => r.started)
      .map((r) => `continuum:cluster_replica_restarts_total{${labels({ replica: r.name })}} ${r.restarts}`),
  ];
  return `${lines.join("\n")}\n`;
}

async function get(url: string, headers: Record<string, string> = {}): Promise<Response | null> {
  try {
    return await fetch(url, { headers, signal: AbortSignal.timeout(SCRAPE_TIMEOUT_MS) });
  } catch {
    return null;
  }
}

/** The fleet's /metrics: every replica's samples labelled by replica, then the cluster's families. */
export async function fleetMetrics(replicas: readonly FleetReplica[]): Promise<string> {
  const texts = await Promise.all(
    replicas.map(async (r) => {
      const response = await get(`${r.url}/metrics`);
      return response?.ok ? await response.text().catch(() => null) : null;
    }),
  );
  const parts = replicas.flatMap((r, i) => {
    const text = texts[i];
    return text === null || text === undefined ? [] : [{ replica: r.name, text }];
  });
  return (
    mergeExpositions(parts) +
    clusterFamilies(
      replicas,
      texts.map((t) => typeof t === "string"),
    )
  );
}

export interface FleetReplicaState extends FleetReplica {
  readonly up: boolean;
  /** why it has no state (unreachable, an HTTP status), or null */
  readonly error: string | null;
  /** its /dashboard/state, its programs cut to a sample and its history to the last point */
  readonly state: Record<string, unknown> | null;
}

export interface FleetState {
  readonly timeS: number;
  readonly replicas: readonly FleetReplicaState[];
}

function summary(state: Record<string, unknown>): Record<string, unknown> {
  const { programs, history, ...rest } = state;
  return {
    ...rest,
    programs: Array.isArray(programs) ? programs.slice(0, PROGRAMS_LISTED) : [],
    last: Array.isArray(history) ? (history.at(-1) ?? null) : null,
  };
}

/**
 * Each replica's dashboard state, asked with the caller's credentials (a replica with API keys shows its
 * state to a key holder only); `unauthorized` when a replica refused them.
 */
export async function fleetState(
  replicas: readonly FleetReplica[],
  credentials: Record<string, string>,
): Promise<{ unauthorized: boolean; state: FleetState }> {
  let unauthorized = false;
  const states = await Promise.all(
    replicas.map(async (r): Promise<FleetReplicaState> => {
      const response = await get(`${r.url}/dashboard/state`, credentials);
      if (response === null) return { ...r, up: false, error: "unreachable", state: null };
      if (response.status === 401) unauthorized = true;
      if (!response.ok) {
        await response.body?.cancel();
        return { ...r, up: true, error: `HTTP ${response.status}`, state: null };
      }
      const state = (await response.json().catch(() => null)) as Record<string, unknown> | null;
      return { ...r, up: true, error: state ? null : "no JSON", state: state ? summary(state) : null };
    }),
  );
  return { unauthorized, state: { timeS: Date.now() / 1000, replicas: states } };
}

/** How long a replica may take to answer a relayed dashboard request (an hour of history is ~1 MB). */
const RELAY_TIMEOUT_MS = 10_000;
/** The paths of a replica's own dashboard the fleet relays: its page, its state, its page's files. */
const REPLICA_DASHBOARD = /^\/replicas\/([^/]+)(\/dashboard(?:\/state|\/assets\/[^/]+)?)$/;
/** Response headers a relayed answer keeps. */
const RELAYED_HEADERS = ["content-type", "cache-control"];

/**
 * `/replicas/<name>/dashboard...` as the replica's name (URL-decoded) and the path on the replica;
 * null when the path is no such page (or its name no valid encoding).
 */
export function replicaDashboardPath(path: string): { name: string; path: string } | null {
  const m = REPLICA_DASHBOARD.exec(path);
  if (!m) return null;
  try {
    return { name: decodeURIComponent(m[1] as string), path: m[2] as string };
  } catch {
    return null;
  }
}

export interface Relayed {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: Uint8Array;
}

/**
 * A GET of `path` (with its query string `search`, "" or "?...") on the replica, with the caller's
 * credentials, answered as the replica answered (status, type, body); null when it did not answer.
 */
export async function relayToReplica(
  replica: FleetReplica,
  path: string,
  search: string,
  credentials: Record<string, string>,
): Promise<Relayed | null> {
  try {
    const response = await fetch(`${replica.url}${path}${search}`, {
      headers: credentials,
      signal: AbortSignal.timeout(RELAY_TIMEOUT_MS),
    });
    const headers: Record<string, string> = {};
    for (const name of RELAYED_HEADERS) {
      const value = response.headers.get(name);
      if (value !== null) headers[name] = value;
    }
    return { status: response.status, headers, body: new Uint8Array(await response.arrayBuffer()) };
  } catch {
    return null;
  }
}

let page: string | null = null;

/** The fleet dashboard's page (a file of the package, like the replica's own dashboard). */
export function fleetPage(): string {
  page ??= readFileSync(fileURLToPath(new URL("../../dashboard/fleet.html", import.meta.url)), "utf8");
  return page;
}
