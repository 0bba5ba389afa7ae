/**
 * The fleet view the balancer's port shows instead of one replica per request: /metrics is every
 * replica's exposition with each sample labelled `replica="<name>"` (families merged, so a query sums or
 * splits by replica), plus the cluster's own families (each replica up or not, how old its samples are,
 * its restarts, the requests it lost or that were retried elsewhere); /dashboard/state is each replica's
 * dashboard state side by side with why a replica is down, which dashboard/fleet.html draws;
 * /replicas/<name>/dashboard[/state, /assets/<file>] is one replica's own dashboard, relayed, so a browser
 * on the balancer's port sees it without reaching the replica's port. /metrics and /dashboard/state
 * answer within a deadline however many replicas are unreachable (replica-scrape.ts).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { type BalancerView, balancerViews, parseShowStat, readShowStat } from "./haproxy-stats.js";
import { ReplicaScrape, type ScrapeRead } from "./replica-scrape.js";

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
  /** a started replica that died and is not back yet: how it exited and when it restarts; else null */
  readonly exited: string | null;
}

/** How long the fleet's /metrics and /dashboard/state wait for the replicas: each answers by then or is shown stale or down. */
const ANSWER_DEADLINE_MS = 200;
/** How long one request to a replica may take before it counts as failed (it runs on past the deadline). */
const SCRAPE_TIMEOUT_MS = 2000;
/** How long HAProxy's stats socket may take. */
const STATS_TIMEOUT_MS = 200;
/** Replica states kept per caller's credentials (each tenant sees its own programs): at most this many. */
const STATE_SCRAPES_KEPT = 256;
/** Programs of one replica the fleet state lists at most (the page shows a sample, not 10 000 rows). */
const PROGRAMS_LISTED = 100;
/** HAProxy's backends that name the replicas (haproxy-config.ts); the others track the first one's checks. */
const CHECKED_BACKEND = "by_program";
const REPLICA_BACKENDS = [CHECKED_BACKEND, "least_loaded", "by_response"];

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

/** The cluster's own families, for the replicas as read (`read`: their samples, fresh or stale, or none). */
function clusterFamilies(
  replicas: readonly FleetReplica[],
  read: readonly ScrapeRead<string>[],
  balancer: ReadonlyMap<string, BalancerView>,
): string {
  const family = (name: string, type: string, help: string, samples: readonly string[]) =>
    samples.length === 0 ? [] : [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, ...samples];
  const byReplica = (name: string, value: (r: FleetReplica, i: number) => number | null) =>
    replicas.flatMap((r, i) => {
      const v = value(r, i);
      return v === null ? [] : [`${name}{${labels({ replica: r.name })}} ${v}`];
    });
  const lines = [
    ...family(
      "continuum:cluster_replica_up",
      "gauge",
      "1 when the replica's samples are in this exposition (answered now, or its last answer while a slow one is awaited), else 0",
      replicas.map(
        (r, i) =>
          `continuum:cluster_replica_up{${labels({ replica: r.name, url: r.url, kind: r.started ? "started" : "remote" })}} ${read[i]?.value === null ? 0 : 1}`,
      ),
    ),
    ...family(
      "continuum:cluster_replica_scrape_age_seconds",
      "gauge",
      "seconds since the replica gave the samples in this exposition: 0 when it answered this scrape",
      byReplica("continuum:cluster_replica_scrape_age_seconds", (_r, i) => read[i]?.ageS ?? null),
    ),
    ...family(
      "continuum:cluster_replica_restarts_total",
      "counter",
      "times the cluster restarted a replica it started after it died",
      byReplica("continuum:cluster_replica_restarts_total", (r) => (r.started ? r.restarts : null)),
    ),
    ...family(
      "continuum:cluster_replica_retried_total",
      "counter",
      "requests that failed on the replica before it answered and that the balancer sent to another replica",
      byReplica("continuum:cluster_replica_retried_total", (r) => balancer.get(r.name)?.retried ?? null),
    ),
    ...family(
      "continuum:cluster_replica_lost_total",
      "counter",
      "answers the replica had begun and never finished (it died, or the balancer marked it down mid-answer)",
      byReplica("continuum:cluster_replica_lost_total", (r) => balancer.get(r.name)?.lost ?? null),
    ),
  ];
  return `${lines.join("\n")}\n`;
}

export interface FleetReplicaState extends FleetReplica {
  /** its state is shown: answered now, or (stale) its last answer while a slow one is awaited */
  readonly up: boolean;
  /** seconds since the state shown was answered: 0 when fresh, more when stale; null without one */
  readonly ageS: number | null;
  /** why there is no fresh state (unreachable, no answer in time, an HTTP status), or null */
  readonly error: string | null;
  /** HAProxy's view (its health check, the requests lost or retried), null when its stats did not answer */
  readonly balancer: BalancerView | null;
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

/** A replica's answer to its state request: its status, and the state when it gave one. */
interface StateAnswer {
  readonly status: number;
  readonly state: Record<string, unknown> | null;
}

async function loadMetrics(url: string, signal: AbortSignal): Promise<string> {
  const response = await fetch(`${url}/metrics`, { signal });
  if (!response.ok) {
    await response.body?.cancel();
    throw new Error(`/metrics answered HTTP ${response.status}`);
  }
  return response.text();
}

async function loadState(
  url: string,
  credentials: Record<string, string>,
  signal: AbortSignal,
): Promise<StateAnswer> {
  const response = await fetch(`${url}/dashboard/state`, { headers: credentials, signal });
  if (!response.ok) {
    await response.body?.cancel();
    return { status: response.status, state: null };
  }
  const state = (await response.json()) as Record<string, unknown>;
  return { status: response.status, state };
}

function credentialsKey(credentials: Record<string, string>): string {
  const entries = Object.entries(credentials).sort(([a], [b]) => a.localeCompare(b));
  return createHash("sha256").update(JSON.stringify(entries)).digest("hex");
}

/**
 * The fleet's /metrics and /dashboard/state over the replicas the supervisor fronts, each answered within
 * ANSWER_DEADLINE_MS, with HAProxy's view of each replica from its stats socket (null: none).
 */
export class FleetView {
  private readonly metricsScrapes = new Map<string, ReplicaScrape<string>>();
  private readonly stateScrapes = new Map<string, ReplicaScrape<StateAnswer>>();

  constructor(private readonly statsSocket: string | null) {}

  /** Every replica's samples labelled by replica, then the cluster's families. */
  async metrics(replicas: readonly FleetReplica[]): Promise<string> {
    const [read, balancer] = await Promise.all([
      Promise.all(replicas.map((r) => this.metricsScrape(r).read(ANSWER_DEADLINE_MS))),
      this.balancer(replicas),
    ]);
    const parts = replicas.flatMap((r, i) => {
      const text = read[i]?.value;
      return text === null || text === undefined ? [] : [{ replica: r.name, text }];
    });
    return mergeExpositions(parts) + clusterFamilies(replicas, read, balancer);
  }

  /**
   * Each replica's dashboard state, asked with the caller's credentials (a replica with API keys shows its
   * state to a key holder only); `unauthorized` when a replica refused them.
   */
  async state(
    replicas: readonly FleetReplica[],
    credentials: Record<string, string>,
  ): Promise<{ unauthorized: boolean; state: FleetState }> {
    const [read, balancer] = await Promise.all([
      Promise.all(replicas.map((r) => this.stateScrape(r, credentials).read(ANSWER_DEADLINE_MS))),
      this.balancer(replicas),
    ]);
    let unauthorized = false;
    const states = replicas.map((r, i): FleetReplicaState => {
      const { value, ageS, error } = read[i] as ScrapeRead<StateAnswer>;
      if (value?.status === 401) unauthorized = true;
      const refused = value && value.state === null ? `HTTP ${value.status}` : null;
      return {
        ...r,
        up: value !== null,
        ageS: value?.state ? ageS : null,
        error: error ?? refused,
        balancer: balancer.get(r.name) ?? null,
        state: value?.state ? summary(value.state) : null,
      };
    });
    return { unauthorized, state: { timeS: Date.now() / 1000, replicas: states } };
  }

  private metricsScrape(r: FleetReplica): ReplicaScrape<string> {
    const key = `${r.name}\n${r.url}`;
    let scrape = this.metricsScrapes.get(key);
    if (!scrape) {
      scrape = new ReplicaScrape((signal) => loadMetrics(r.url, signal), SCRAPE_TIMEOUT_MS);
      this.metricsScrapes.set(key, scrape);
    }
    return scrape;
  }

  private stateScrape(r: FleetReplica, credentials: Record<string, string>): ReplicaScrape<StateAnswer> {
    const key = `${r.name}\n${r.url}\n${credentialsKey(credentials)}`;
    let scrape = this.stateScrapes.get(key);
    if (!scrape) {
      scrape = new ReplicaScrape((signal) => loadState(r.url, credentials, signal), SCRAPE_TIMEOUT_MS);
      this.stateScrapes.set(key, scrape);
      const oldest = this.stateScrapes.keys().next().value;
      if (this.stateScrapes.size > STATE_SCRAPES_KEPT && oldest !== undefined) {
        this.stateScrapes.delete(oldest);
      }
    }
    return scrape;
  }

  private async balancer(replicas: readonly FleetReplica[]): Promise<Map<string, BalancerView>> {
    const csv = this.statsSocket === null ? null : await readShowStat(this.statsSocket, STATS_TIMEOUT_MS);
    if (csv === null) return new Map();
    return balancerViews(
      parseShowStat(csv),
      replicas.map((r) => r.name),
      CHECKED_BACKEND,
      REPLICA_BACKENDS,
    );
  }
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
