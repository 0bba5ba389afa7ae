/**
 * The supervisor's HTTP endpoint, on 127.0.0.1 beside HAProxy, which routes to it the fleet view
 * (/metrics, /dashboard, /dashboard/state, each replica's own dashboard at /replicas/<name>/dashboard:
 * fleet.ts) and streamed requests (stream-guard.ts).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { ApiError, errorBody } from "../server/errors.js";
import { type FleetReplica, FleetView, fleetPage, relayToReplica, replicaDashboardPath } from "./fleet.js";
import { streamGuard } from "./stream-guard.js";

export interface SupervisorServer {
  readonly port: number;
  close(): Promise<void>;
}

const PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8";
/** where each replica's own dashboard is relayed: /replicas/<name>/dashboard */
const REPLICAS_PREFIX = "/replicas/";

function credentialsOf(req: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of ["authorization", "x-api-key"]) {
    const value = req.headers[name];
    if (typeof value === "string") out[name] = value;
  }
  return out;
}

function sendError(res: ServerResponse, error: ApiError): void {
  res.writeHead(error.status, { "content-type": "application/json" });
  res.end(JSON.stringify(errorBody(error)));
}

async function fleetView(
  path: string,
  search: string,
  req: IncomingMessage,
  res: ServerResponse,
  replicas: readonly FleetReplica[],
  view: FleetView,
): Promise<void> {
  if (req.method !== "GET") {
    res.setHeader("allow", "GET");
    const message = `${req.method} is not allowed on ${path}; it takes GET`;
    return sendError(res, new ApiError(405, message, "invalid_request_error", "method_not_allowed"));
  }
  if (path === "/metrics") {
    const text = await view.metrics(replicas);
    res.writeHead(200, { "content-type": PROMETHEUS_TEXT });
    res.end(text);
  } else if (path === "/dashboard") {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(fleetPage());
  } else if (path === "/dashboard/state") {
    const { unauthorized, state } = await view.state(replicas, credentialsOf(req));
    if (unauthorized) {
      return sendError(
        res,
        new ApiError(
          401,
          "a replica wants an API key for its state",
          "invalid_request_error",
          "invalid_api_key",
        ),
      );
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(state));
  } else if (path.startsWith(REPLICAS_PREFIX)) {
    const target = replicaDashboardPath(path);
    const replica = target && replicas.find((r) => r.name === target.name);
    if (!target || !replica) {
      const what = target
        ? `no replica ${JSON.stringify(target.name)}`
        : `${path}: not a replica's dashboard`;
      return sendError(
        res,
        new ApiError(
          404,
          `${what} (a replica's dashboard is /replicas/<name>/dashboard)`,
          "invalid_request_error",
          "not_found",
        ),
      );
    }
    const relayed = await relayToReplica(replica, target.path, search, credentialsOf(req));
    if (!relayed) {
      return sendError(res, new ApiError(502, `replica ${replica.name} did not answer`, "server_error"));
    }
    res.writeHead(relayed.status, relayed.headers);
    res.end(relayed.body);
  } else {
    sendError(
      res,
      new ApiError(404, `${path}: the fleet dashboard is /dashboard`, "invalid_request_error", "not_found"),
    );
  }
}

const isFleetView = (path: string) =>
  path === "/metrics" ||
  path === "/dashboard" ||
  path.startsWith("/dashboard/") ||
  path.startsWith(REPLICAS_PREFIX);

/**
 * Listens on 127.0.0.1 (any free port): the fleet view over `replicas()`, with HAProxy's view of them
 * from its stats socket at `statsSocket` (null: none), and the guard of streams, which it sends back to
 * HAProxy at `streamsSocket`.
 */
export async function startSupervisorServer(
  replicas: () => readonly FleetReplica[],
  streamsSocket: string,
  statsSocket: string | null = null,
): Promise<SupervisorServer> {
  const guard = streamGuard(streamsSocket);
  const view = new FleetView(statsSocket);
  const server = createServer((req, res) => {
    const url = req.url ?? "/";
    const query = url.indexOf("?");
    const path = query < 0 ? url : url.slice(0, query);
    if (!isFleetView(path)) return guard.handle(req, res);
    fleetView(path, query < 0 ? "" : url.slice(query), req, res, replicas(), view).catch((error: unknown) => {
      if (res.headersSent) res.destroy();
      else sendError(res, new ApiError(500, String(error), "server_error"));
    });
  });
  // HAProxy drops idle connections to its servers after a few seconds; this side keeps them longer
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((done, fail) => {
    server.once("error", fail);
    server.listen(0, "127.0.0.1", done);
  });
  return {
    port: (server.address() as AddressInfo).port,
    close() {
      guard.close();
      server.closeAllConnections();
      return new Promise((done) => server.close(() => done()));
    },
  };
}
