import type { AppOptions } from "../app.js";
import { type RunningServer, startServer } from "../server.js";
import { FakeEngine, type FakeEngineOptions } from "./fake-engine.js";

/** A response body the tests walk freely (their assertions check its shape). */
// biome-ignore lint/suspicious/noExplicitAny: test assertions index arbitrary response JSON
export type Json = any;

export interface TestServer {
  readonly engine: FakeEngine;
  readonly server: RunningServer;
  readonly url: string;
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Response>;
}

/** Runs `fn` against a server on 127.0.0.1 (random port) over a FakeEngine; always closes it. */
export async function withServer(
  engineOptions: FakeEngineOptions,
  appOptions: Omit<AppOptions, "engine">,
  fn: (t: TestServer) => Promise<void>,
): Promise<void> {
  const engine = new FakeEngine(engineOptions);
  const server = await startServer({ ...appOptions, engine, host: "127.0.0.1", port: 0, logError: () => {} });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  try {
    await fn({ engine, server, url: server.url, post });
  } finally {
    await server.close({ drainTimeoutMs: 2_000 });
  }
}

/** The `data:` payloads of an SSE body, in order. */
export function sseEvents(body: string): string[] {
  return body
    .split("\n\n")
    .filter((frame) => frame.length > 0)
    .map((frame) => {
      if (!frame.startsWith("data: ")) throw new Error(`not an SSE data frame: ${JSON.stringify(frame)}`);
      return frame.slice("data: ".length);
    });
}
