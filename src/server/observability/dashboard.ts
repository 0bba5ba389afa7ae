/**
 * `/dashboard`: a live page over the server (KV pool, programs, queue, the last minutes) and the JSON it
 * polls, `/dashboard/state`, which scripts may read too. The page and its two libraries (htm's Preact
 * bundle for the views, uPlot for the charts) are files of the package: no build step, no CDN. The page
 * holds no data; the state endpoint is behind the API keys like /v1.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Context, Hono } from "hono";
import type { ProgramSnapshot, SchedulerSnapshot } from "../../core/scheduler-snapshot.js";
import type { EngineService, ProgramKv } from "../../engine/engine-api.js";
import { describeDevice } from "../../engine/gpu/device-info.js";
import type { AppEnv } from "../generation/generation.js";
import type { AnswerCounter } from "./answer-counts.js";
import type { DashboardHistory } from "./dashboard-history.js";

/** Where the page's own files and its libraries are, and how they are served. */
const ASSETS: Record<string, { url: string; type: string }> = {
  "index.html": { url: new URL("../../../dashboard/index.html", import.meta.url).href, type: "text/html" },
  "app.js": { url: new URL("../../../dashboard/app.js", import.meta.url).href, type: "text/javascript" },
  "preact-htm.js": { url: import.meta.resolve("htm/preact/standalone"), type: "text/javascript" },
  "uplot.js": { url: import.meta.resolve("uplot/dist/uPlot.iife.min.js"), type: "text/javascript" },
  "uplot.css": { url: import.meta.resolve("uplot/dist/uPlot.min.css"), type: "text/css" },
};

export const DASHBOARD_ASSET_PREFIX = "/dashboard/assets/";

/** Seconds of history a state without `?since=` carries (the page asks for the whole hour once, then for new points). */
const DEFAULT_HISTORY_S = 600;

/** How long a program that left the scheduler stays in the table as "finished". */
const FINISHED_SHOWN_S = 60;

export type DashboardProgram = Omit<ProgramSnapshot, "state"> & {
  state: ProgramSnapshot["state"] | "finished";
  /** where its KV is now (null: nowhere, a next turn computes its context again) */
  kv: ProgramKv | null;
  /** seconds since it left the scheduler (finished only; null otherwise) */
  finishedAgoS: number | null;
};

/**
 * The scheduler's programs and those that left it in the last minute (recorded as they left, so a program
 * that came and went between two polls is there, with every turn it ran), each with where its KV is.
 */
function programsOf(snapshot: SchedulerSnapshot, kv: ReadonlyMap<string, ProgramKv>): DashboardProgram[] {
  const live = snapshot.programs.map((p) => ({ ...p, kv: kv.get(p.id) ?? null, finishedAgoS: null }));
  const liveIds = new Set(live.map((p) => p.id));
  const finished = snapshot.departed
    .filter((p) => p.leftAgoS <= FINISHED_SHOWN_S && !liveIds.has(p.id))
    .reverse()
    .map((p) => ({
      id: p.id,
      state: "finished" as const,
      pinTtlLeftS: null,
      contextTokens: p.contextTokens,
      turns: p.turns,
      ageS: p.lifeS,
      cachedShare: p.cachedShare,
      kv: kv.get(p.id) ?? null,
      finishedAgoS: p.leftAgoS,
    }));
  return [...live, ...finished];
}

/**
 * With several API keys a tenant sees only its own programs, under the ids it sent; an open or
 * single-key server (tenant null) sees them all.
 */
function programsOfTenant(programs: readonly DashboardProgram[], tenant: string | null): DashboardProgram[] {
  if (tenant === null) return [...programs];
  const prefix = `${tenant}/`;
  return programs
    .filter((p) => p.id.startsWith(prefix))
    .map((p) => ({ ...p, id: p.id.slice(prefix.length) }));
}

/**
 * The address this request reached the server at, `host:port` (the instance the page names in its
 * header; through the fleet's supervisor, the replica's own address); null off a socket.
 */
function instanceOf(c: Context<AppEnv>): string | null {
  const socket = c.env?.incoming?.socket;
  if (!socket?.localAddress || !socket.localPort) return null;
  const host = socket.localAddress.replace(/^::ffff:/, "");
  return host.includes(":") ? `[${host}]:${socket.localPort}` : `${host}:${socket.localPort}`;
}

export function registerDashboard(
  app: Hono<AppEnv>,
  engine: EngineService,
  history: DashboardHistory,
  answers: AnswerCounter,
  server: { readonly version: string; readonly policy: string | null },
): void {
  const files = new Map<string, string>();
  const file = (name: string): string => {
    let text = files.get(name);
    if (text === undefined) {
      text = readFileSync(fileURLToPath(ASSETS[name]!.url), "utf8");
      files.set(name, text);
    }
    return text;
  };
  const device = { ...engine.device, summary: describeDevice(engine.device) };

  app.get("/dashboard", (c) => c.html(file("index.html")));
  app.get(`${DASHBOARD_ASSET_PREFIX}:name`, (c) => {
    const name = c.req.param("name");
    const asset = ASSETS[name];
    if (!asset || name === "index.html") return c.notFound();
    return c.body(file(name), 200, {
      "Content-Type": `${asset.type}; charset=utf-8`,
      "Cache-Control": "max-age=3600",
    });
  });
  app.get("/dashboard/state", (c) => {
    const snapshot = engine.snapshot();
    const metrics = engine.metrics();
    const since = Number(c.req.query("since"));
    return c.json({
      server: {
        model: engine.modelId,
        instance: instanceOf(c),
        version: server.version,
        policy: server.policy,
        kv: engine.kvSummary,
      },
      device,
      timeS: Date.now() / 1000,
      pool: snapshot.pool,
      tiers: snapshot.tiers,
      running: snapshot.numRunning,
      waiting: snapshot.numWaiting,
      longestWaitS: metrics.longestWaitS,
      answers: answers.snapshot(),
      numPrograms: snapshot.numPrograms,
      programs: programsOfTenant(programsOf(snapshot, engine.kvByProgram()), c.get("tenant") ?? null),
      pins: {
        created: metrics.pinsCreated,
        expired: metrics.pinsExpired,
        sacrificed: metrics.pinsSacrificed,
        prefill1kTokensS: metrics.prefill1kTokensS,
        ramReload1kTokensS: snapshot.tiers.some((t) => t.name === "cpu") ? metrics.ramReload1kTokensS : null,
      },
      history: history.since(Number.isFinite(since) ? since : Date.now() / 1000 - DEFAULT_HISTORY_S),
      distributions: history.distributions(),
    });
  });
}
