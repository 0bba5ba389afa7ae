/**
 * End-to-end fixture: `continuum serve` (its real flag parsing and runServe) with the real llama.cpp
 * engine on the built-in tiny model, listening on 127.0.0.1 at a random port, driven by the official
 * `openai` SDK. The engine is kept so tests can read what the scheduler measured (never to drive it).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import type { RecorderEvent } from "../../core/recorder/events.js";
import { readEventLog } from "../../core/recorder/read-event-log.js";
import type { Engine } from "../../engine/engine.js";
import { createLlamaEngine } from "../../engine/engine-factory.js";
import type { RunningServer } from "../../server/server.js";
import { runServe, serveCommand } from "../serving/serve-command.js";

export interface LlamaServer {
  readonly server: RunningServer;
  readonly engine: Engine;
  readonly openai: OpenAI;
  readonly model: string;
  /** the start-up banner's lines */
  readonly banner: readonly string[];
  /** The gauges and counters of /metrics, by name (labels dropped: one model per server). */
  metrics(): Promise<Record<string, number>>;
  /** Stops the server (engine included) and returns the scheduler's event log (`--record`). */
  close(): Promise<RecorderEvent[]>;
}

/**
 * Starts `continuum serve --builtin-model tiny --threads 1 --port 0 --record <tmp> ...flags`.
 * Always pair with close() (in a finally).
 */
export async function startLlamaServer(
  flags: readonly string[],
  { apiKey = "unused" }: { apiKey?: string } = {},
): Promise<LlamaServer> {
  const dir = await mkdtemp(join(tmpdir(), "continuum-e2e-"));
  const record = join(dir, "events.jsonl");
  const argv = [
    "--builtin-model",
    "tiny",
    "--threads",
    "1",
    "--host",
    "127.0.0.1",
    "--port",
    "0",
    "--record",
    record,
    ...flags,
  ];
  let engine: Engine | null = null;
  let server: RunningServer | null = null;
  const banner: string[] = [];
  const command = serveCommand().exitOverride();
  command.action(async (options) => {
    server = await runServe(options, {
      createEngine: async (engineOptions) => {
        engine = await createLlamaEngine(engineOptions);
        return engine;
      },
      log: (line) => banner.push(line),
      handleSignals: false,
    });
  });
  await command.parseAsync(argv, { from: "user" });
  if (!server || !engine) throw new Error("continuum serve did not start");
  const running: RunningServer = server;
  const openai = new OpenAI({
    baseURL: `${running.url}/v1`,
    apiKey,
    maxRetries: 0,
    timeout: 30_000,
  });
  const model = (await openai.models.list()).data[0]!.id;
  let closed: Promise<RecorderEvent[]> | null = null;
  return {
    server: running,
    engine,
    openai,
    model,
    banner,
    async metrics() {
      const text = await (await fetch(`${running.url}/metrics`)).text();
      const values: Record<string, number> = {};
      for (const line of text.split("\n")) {
        const m = /^([a-z_:]+)(?:\{[^}]*\})? (\S+)$/.exec(line);
        if (m && !(m[1]! in values)) values[m[1]!] = Number(m[2]);
      }
      return values;
    },
    close() {
      closed ??= (async () => {
        try {
          await running.close({ drainTimeoutMs: 5_000 });
          const events: RecorderEvent[] = [];
          for await (const event of readEventLog(record)) events.push(event);
          return events;
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      })();
      return closed;
    },
  };
}

/**
 * Python's `extra_body`: the openai SDKs merge these fields top-level into the JSON body, which is
 * where the server (like the authors' fork) reads `job_id`, `is_last_step`, `this_func_call`. The Node
 * SDK sends unknown params as they are, so merging them into the params is the same request.
 */
export function withExtraBody<P extends object>(params: P, extraBody: Record<string, unknown>): P {
  return { ...params, ...extraBody };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
