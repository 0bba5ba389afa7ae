/**
 * The supervisor's HTTP endpoint, on 127.0.0.1 beside HAProxy, which routes to it the fleet view
 * (/metrics, /dashboard, /dashboard/state: fleet.ts) and streamed requests (stream-guard.ts).
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { ApiError, errorBody } from "../server/errors.js";
import { type FleetReplica, fleetMetrics, fleetPage, fleetState } from "./fleet.js";
import { streamGuard } from "./stream-guard.js";

export interface SupervisorServer {
  readonly port: number;
  close(): Promise<void>;
}

const PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8";

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
  req: IncomingMessage,
  res: ServerResponse,
  replicas: readonly FleetReplica[],
): Promise<void> {
  if (req.method !== "GET") return sendError(res, new ApiError(405, `${path} answers GET only`));
  if (path === "/metrics") {
    const text = await fleetMetrics(replicas);
    res.writeHead(200, { "content-type": PROMETHEUS_TEXT });
    res.end(text);
  } else if (path === "/dashboard") {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
    res.end(fleetPage());
  } else if (path === "/dashboard/state") {
    const { unauthorized, state } = await fleetState(replicas, credentialsOf(req));
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
  } else {
    // a replica's own dashboard pages are on the replica (the fleet page links them)
    sendError(
      res,
      new ApiError(404, `${path}: the fleet dashboard is /dashboard`, "invalid_request_error", "not_found"),
    );
  }
}

const isFleetView = (path: string) =>
  path === "/metrics" || path === "/dashboard" || path.startsWith("/dashboard/");

/**
 * Listens on 127.0.0.1 (any free port): the fleet view over `replicas()` and the guard of streams, which
 * it sends back to HAProxy at `streamsSocket`.
 */
export async function startSupervisorServer(
  replicas: () => readonly FleetReplica[],
  streamsSocket: string,
): Promise<SupervisorServer> {
  const guard = streamGuard(streamsSocket);
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0] as string;
    if (!isFleetView(path)) return guard.handle(req, res);
    fleetView(path, req, res, replicas()).catch((error: unknown) => {
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
