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

/** A streamed chat completion's first choice, its deltas put together. */
export interface StreamedChoice {
  readonly reasoning: string;
  readonly content: string;
  readonly calls: { name: string; args: string }[];
  readonly finishReason: string | null;
}

export function streamedChoice(sse: string): StreamedChoice {
  let reasoning = "";
  let content = "";
  let finishReason: string | null = null;
  const calls: { name: string; args: string }[] = [];
  for (const frame of sseEvents(sse).slice(0, -1)) {
    const choice = (JSON.parse(frame) as { choices: Json[] }).choices[0];
    if (choice === undefined) continue;
    const delta = choice.delta ?? {};
    reasoning += delta.reasoning_content ?? "";
    content += delta.content ?? "";
    for (const call of delta.tool_calls ?? []) {
      calls[call.index] ??= { name: "", args: "" };
      calls[call.index]!.name += call.function?.name ?? "";
      calls[call.index]!.args += call.function?.arguments ?? "";
    }
    finishReason = choice.finish_reason ?? finishReason;
  }
  return { reasoning, content, calls, finishReason };
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
