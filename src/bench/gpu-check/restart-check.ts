/**
 * The GPU check's restart stage (`serve --disk-offload-persist`): a program's first turn is served, the server
 * stops cleanly (its resident KV goes to the disk tier), a second server on the same directory reloads it,
 * and the program's next turn is held against the same turn computed by a server with an empty directory:
 * how much of its prompt came from disk, how long each took, and whether both decoded the same tokens.
 */
import { readFile } from "node:fs/promises";
import { freePort, type Server, startServer, stopServer } from "../compare/processes.js";
import type { RestartFigures } from "./verdict.js";

export interface RestartCheckOptions {
  /** `serve` argv (after the node binary) for a server on `port` with `extra` flags appended */
  readonly serveArgv: (port: number, extra: readonly string[]) => string[];
  readonly outDir: string;
  readonly tierDir: string;
  /** times the first turn's filler sentence repeats: sized so that its KV is worth reloading */
  readonly promptRepeats: number;
}

interface Turn {
  readonly text: string;
  readonly promptTokens: number;
  readonly cachedTokens: number;
  readonly logprobs: readonly number[];
  readonly seconds: number;
}

interface ChatResponse {
  choices: { message: { content: string | null }; logprobs?: { content?: { logprob: number }[] } }[];
  usage: { prompt_tokens: number; prompt_tokens_details?: { cached_tokens?: number } };
}

const PROGRAM = "gpu-check-restart";

async function chatTurn(
  server: Server,
  messages: readonly { role: string; content: string }[],
): Promise<Turn> {
  const models = (await (await fetch(`${server.url}/v1/models`)).json()) as { data: { id: string }[] };
  const model = models.data[0]?.id ?? "";
  const start = performance.now();
  const response = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-program-id": PROGRAM },
    body: JSON.stringify({ model, messages, max_tokens: 8, temperature: 0, logprobs: true }),
    signal: AbortSignal.timeout(120_000),
  });
  if (!response.ok) throw new Error(`${server.name}: HTTP ${response.status}: ${await response.text()}`);
  const body = (await response.json()) as ChatResponse;
  const choice = body.choices[0];
  if (!choice) throw new Error(`${server.name}: no choice in the reply`);
  return {
    text: choice.message.content ?? "",
    promptTokens: body.usage.prompt_tokens,
    cachedTokens: body.usage.prompt_tokens_details?.cached_tokens ?? 0,
    logprobs: (choice.logprobs?.content ?? []).map((t) => t.logprob),
    seconds: (performance.now() - start) / 1000,
  };
}

/** Starts a server, runs `body` against it, always stops it; returns what `body` returned and the server's log. */
async function withServer<T>(
  opts: RestartCheckOptions,
  name: string,
  extra: readonly string[],
  body: (server: Server) => Promise<T>,
): Promise<{ value: T; logFile: string }> {
  const port = await freePort();
  const server = await startServer(name, process.execPath, opts.serveArgv(port, extra), port, opts.outDir);
  try {
    return { value: await body(server), logFile: server.logFile };
  } finally {
    await stopServer(server);
  }
}

export async function restartCheck(opts: RestartCheckOptions): Promise<RestartFigures> {
  // a clean stop at once: the program is between turns, which is what the kept tier is for
  const tier = (dir: string) => ["--disk-offload-dir", dir, "--disk-offload-persist", "--drain-timeout", "0"];
  const first = [
    {
      role: "user",
      content: `Read the task and plan the fix. ${"the repository holds the code ".repeat(opts.promptRepeats)}`,
    },
  ];
  const turn1 = await withServer(opts, "restart-before", tier(opts.tierDir), (s) => chatTurn(s, first));
  const second = [
    ...first,
    { role: "assistant", content: turn1.value.text },
    { role: "user", content: "Now run the tests." },
  ];
  const restored = await withServer(opts, "restart-after", tier(opts.tierDir), (s) => chatTurn(s, second));
  const computed = await withServer(opts, "restart-fresh", tier(`${opts.tierDir}-fresh`), (s) =>
    chatTurn(s, second),
  );
  const banner = await readFile(restored.logFile, "utf8");
  // the banner says "kept across restarts (no states found)" too: only a line naming restored states counts
  const restoredLine =
    banner.split("\n").find((l) => /kept across restarts \(\d+ states? \(.*\) restored\)/.test(l)) ?? null;
  const n = Math.min(restored.value.logprobs.length, computed.value.logprobs.length);
  let maxLogprobDiff = 0;
  for (let i = 0; i < n; i++) {
    maxLogprobDiff = Math.max(
      maxLogprobDiff,
      Math.abs((restored.value.logprobs[i] as number) - (computed.value.logprobs[i] as number)),
    );
  }
  return {
    restoredLine: restoredLine?.trim() ?? null,
    firstTurnPromptTokens: turn1.value.promptTokens,
    promptTokens: restored.value.promptTokens,
    cachedTokens: restored.value.cachedTokens,
    computedCachedTokens: computed.value.cachedTokens,
    restoredS: restored.value.seconds,
    computedS: computed.value.seconds,
    sameText: restored.value.text === computed.value.text,
    comparedTokens: n,
    maxLogprobDiff,
  };
}
