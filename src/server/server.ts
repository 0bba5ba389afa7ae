import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { type AppOptions, type ContinuumApp, createApp } from "./app.js";

export interface StartServerOptions extends AppOptions {
  /** default 127.0.0.1 */
  readonly host?: string;
  /** default 8000; 0 picks a free port */
  readonly port?: number;
  /** how long close() lets in-flight requests finish before aborting them (default 30 s) */
  readonly drainTimeoutMs?: number;
}

export interface CloseOptions {
  /** call engine.shutdown() once requests have drained (default true) */
  readonly shutdownEngine?: boolean;
  /** overrides StartServerOptions.drainTimeoutMs */
  readonly drainTimeoutMs?: number;
}

export interface CloseResult {
  /** requests still in flight at the drain timeout, stopped (aborted) */
  readonly cutRequests: number;
}

export interface RunningServer {
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly api: ContinuumApp;
  /**
   * Graceful stop: refuse new requests (503), stop listening, let in-flight requests finish (aborting
   * those still running after the drain timeout), shut the engine down (flushing its recorder; a
   * persistent disk tier keeps the KV still held, pins included), and close the remaining connections.
   * Resolves with the requests it had to cut. Idempotent.
   */
  close(options?: CloseOptions): Promise<CloseResult>;
  /**
   * A balancer-friendly first stage of shutdown, which close() follows: new programs are refused (they go
   * to other replicas; /health says draining) while the requests in flight finish, and turns of programs
   * already here that come meanwhile are served. Resolves true once no request is in flight, false when
   * some still are after `timeoutMs`. Programs between turns do not hold it.
   */
  drain(timeoutMs: number): Promise<boolean>;
}

function urlHost(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/** Whether no request is in flight within `ms`. */
async function idleWithin(api: ContinuumApp, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), ms);
  });
  try {
    return await Promise.race([api.inflight.waitIdle().then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

export async function startServer(options: StartServerOptions): Promise<RunningServer> {
  const api = createApp(options);
  const host = options.host ?? "127.0.0.1";
  const server = await new Promise<Server>((resolve, reject) => {
    const s = serve({ fetch: api.app.fetch, hostname: host, port: options.port ?? 8000 }, () =>
      resolve(s as Server),
    );
    s.once("error", reject);
  });
  const port = (server.address() as AddressInfo).port;
  let closing: Promise<CloseResult> | null = null;

  const close = async (closeOptions: CloseOptions = {}): Promise<CloseResult> => {
    api.startDraining();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    const timeoutMs = closeOptions.drainTimeoutMs ?? options.drainTimeoutMs ?? 30_000;
    let cutRequests = 0;
    if (!(await idleWithin(api, timeoutMs))) {
      cutRequests = api.inflight.size;
      api.inflight.abortAll("server shutting down");
      // Aborted requests end at once, unless a stalled client never reads its stream's last frames.
      await idleWithin(api, 2_000);
    }
    try {
      if (closeOptions.shutdownEngine ?? true) await options.engine.shutdown();
    } finally {
      server.closeAllConnections();
      await closed;
    }
    return { cutRequests };
  };

  return {
    drain(timeoutMs) {
      api.startDrainingPrograms();
      return idleWithin(api, timeoutMs);
    },
    url: `http://${urlHost(host)}:${port}`,
    host,
    port,
    api,
    close(closeOptions) {
      closing ??= close(closeOptions);
      return closing;
    },
  };
}
