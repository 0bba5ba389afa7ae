/**
 * `/dashboard`: a live page over the server (KV pool, programs, queue, the last minutes) and the JSON it
 * polls, `/dashboard/state`, which scripts may read too. The page and its two libraries (htm's Preact
 * bundle for the views, uPlot for the charts) are files of the package: no build step, no CDN. The page
 * holds no data; the state endpoint is behind the API keys like /v1.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Hono } from "hono";
import type { ProgramSnapshot } from "../core/scheduler-snapshot.js";
import { describeDevice } from "../engine/device-info.js";
import type { EngineService } from "../engine/engine-api.js";
import type { DashboardHistory } from "./dashboard-history.js";
import type { AppEnv } from "./generation.js";

/** Where the page's own files and its libraries are, and how they are served. */
const ASSETS: Record<string, { url: string; type: string }> = {
  "index.html": { url: new URL("../../dashboard/index.html", import.meta.url).href, type: "text/html" },
  "app.js": { url: new URL("../../dashboard/app.js", import.meta.url).href, type: "text/javascript" },
  "preact-htm.js": { url: import.meta.resolve("htm/preact/standalone"), type: "text/javascript" },
  "uplot.js": { url: import.meta.resolve("uplot/dist/uPlot.iife.min.js"), type: "text/javascript" },
  "uplot.css": { url: import.meta.resolve("uplot/dist/uPlot.min.css"), type: "text/css" },
};

export const DASHBOARD_ASSET_PREFIX = "/dashboard/assets/";

/** How long a program that left the scheduler stays in the table as "finished". */
const FINISHED_SHOWN_S = 60;

export type DashboardProgram = Omit<ProgramSnapshot, "state"> & {
  state: ProgramSnapshot["state"] | "finished";
};

/** Programs the scheduler no longer lists (ended, or forgotten when idle) are shown as finished for a minute. */
class RecentlyFinished {
  private last = new Map<string, ProgramSnapshot>();
  private finished = new Map<string, { program: DashboardProgram; atS: number }>();

  update(programs: readonly ProgramSnapshot[], nowS: number): DashboardProgram[] {
    const current = new Map(programs.map((p) => [p.id, p]));
    for (const [id, program] of this.last) {
      if (!current.has(id))
        this.finished.set(id, { program: { ...program, state: "finished", pinTtlLeftS: null }, atS: nowS });
    }
    for (const id of current.keys()) this.finished.delete(id);
    for (const [id, entry] of this.finished)
      if (entry.atS < nowS - FINISHED_SHOWN_S) this.finished.delete(id);
    this.last = current;
    return [...programs, ...[...this.finished.values()].map((e) => e.program)];
  }
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

export function registerDashboard(
  app: Hono<AppEnv>,
  engine: EngineService,
  history: DashboardHistory,
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
  const finished = new RecentlyFinished();
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
    return c.json({
      server: { model: engine.modelId, version: server.version, policy: server.policy, kv: engine.kvSummary },
      device,
      timeS: Date.now() / 1000,
      pool: snapshot.pool,
      tiers: snapshot.tiers,
      running: snapshot.numRunning,
      waiting: snapshot.numWaiting,
      numPrograms: snapshot.numPrograms,
      programs: programsOfTenant(finished.update(snapshot.programs, snapshot.timeS), c.get("tenant") ?? null),
      history: history.history,
    });
  });
}
