/**
 * End-to-end fixture: `continuum cluster` as an operator runs it, a command of its own (its own process
 * group, as a terminal's foreground job, so a test can send Ctrl-C to the whole group), optionally
 * inside a network namespace (`ip netns exec <ns>`), its lines collected. Also one agent turn against an
 * OpenAI-compatible URL through any fetch.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { resolve } from "node:path";
import { createInterface } from "node:readline";

/** `continuum` from the source tree. */
export const CONTINUUM: readonly string[] = [process.execPath, "--import", "tsx", resolve("src/cli/main.ts")];

/** Flags of a small, quick replica: the built-in tiny model on one thread, no RAM tier. */
export const TINY_SERVE_FLAGS: readonly string[] = [
  "--builtin-model",
  "tiny",
  "--threads",
  "1",
  "--cpu-offload-gb",
  "0",
];

export interface CliProcess {
  readonly child: ChildProcess;
  readonly lines: string[];
  readonly exited: Promise<number | null>;
  /** the first line (already seen or to come) matching `pattern` */
  waitFor(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray>;
  /** a signal to its whole process group, as a terminal sends Ctrl-C */
  signalGroup(signal: NodeJS.Signals): void;
  /** SIGKILL to its group, if it still runs */
  kill(): void;
}

/** Runs `prefix... continuum args...` in a process group of its own. */
export function runContinuum(args: readonly string[], prefix: readonly string[] = []): CliProcess {
  const [command, ...rest] = [...prefix, ...CONTINUUM, ...args] as [string, ...string[]];
  const child = spawn(command, rest, { stdio: ["ignore", "pipe", "pipe"], detached: true });
  const lines: string[] = [];
  const watchers = new Set<(line: string) => void>();
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream }).on("line", (line) => {
      lines.push(line);
      for (const watch of watchers) watch(line);
    });
  }
  const exited = new Promise<number | null>((done) => child.once("exit", (code) => done(code)));
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const signalGroup = (signal: NodeJS.Signals) => {
    if (!gone && child.pid !== undefined) process.kill(-child.pid, signal);
  };
  return {
    child,
    lines,
    exited,
    waitFor(pattern, timeoutMs) {
      const seen = lines.map((l) => l.match(pattern)).find((m) => m !== null);
      if (seen) return Promise.resolve(seen);
      return new Promise((done, fail) => {
        const timer = setTimeout(() => {
          watchers.delete(watch);
          fail(new Error(`no line matching ${pattern} within ${timeoutMs} ms:\n${lines.join("\n")}`));
        }, timeoutMs);
        const watch = (line: string) => {
          const m = line.match(pattern);
          if (!m) return;
          clearTimeout(timer);
          watchers.delete(watch);
          done(m);
        };
        watchers.add(watch);
        void exited.then((code) => {
          if (!watchers.has(watch)) return;
          clearTimeout(timer);
          watchers.delete(watch);
          fail(new Error(`exited (${code}) before a line matching ${pattern}:\n${lines.join("\n")}`));
        });
      });
    },
    signalGroup,
    kill() {
      signalGroup("SIGKILL");
    },
  };
}

/** The part of fetch the turns use (a namespaced client implements it too). */
export type Fetch = (
  url: string,
  init: { method: string; headers?: Record<string, string>; body?: string },
) => Promise<{ status: number; text: string }>;

export const globalFetch: Fetch = async (url, init) => {
  const response = await fetch(url, init);
  return { status: response.status, text: await response.text() };
};

export interface Turn {
  readonly status: number;
  readonly cachedTokens: number;
  readonly text: string;
}

/** One chat turn of program `id` (named by the X-Program-Id header or by the body's job_id). */
export async function chatTurn(
  fetcher: Fetch,
  url: string,
  id: string,
  messages: readonly object[],
  options: { last: boolean; byHeader: boolean; maxTokens?: number },
): Promise<Turn> {
  const response = await fetcher(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(options.byHeader ? { "X-Program-Id": id } : {}) },
    body: JSON.stringify({
      model: "continuum-tiny",
      messages,
      max_tokens: options.maxTokens ?? 6,
      ...(options.maxTokens === undefined ? {} : { ignore_eos: true }),
      temperature: 0,
      is_last_step: options.last,
      ...(options.byHeader ? {} : { job_id: id }),
    }),
  });
  let body: {
    choices?: { message: { content: string } }[];
    usage?: { prompt_tokens_details?: { cached_tokens?: number } };
  } = {};
  try {
    body = JSON.parse(response.text);
  } catch {
    // not JSON: an error page
  }
  return {
    status: response.status,
    cachedTokens: body.usage?.prompt_tokens_details?.cached_tokens ?? 0,
    text: body.choices?.[0]?.message.content ?? "",
  };
}

/** An agent program's conversation: a system prompt and a task, then the turns appended. */
export function conversation(p: number): object[] {
  return [
    { role: "system", content: `You are agent ${p}. Reply with a bash block.` },
    { role: "user", content: `Task ${p}: list the files of project ${p * 7}.` },
  ];
}

/**
 * Waits until HAProxy counts `replicas` replicas up (the fleet view's balancer status): the balancer answers
 * as soon as it listens, with 503 while no replica is up, and a program hashed before the last replica is
 * up can move once it is.
 */
export async function waitForReplicasUp(
  url: string,
  replicas: number,
  timeoutMs: number,
  get: Fetch = globalFetch,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fleet = JSON.parse((await get(`${url}/dashboard/state`, { method: "GET" })).text) as {
        replicas: { balancer: { status: string } | null }[];
      };
      const up = fleet.replicas.filter((r) => r.balancer?.status === "UP").length;
      if (up >= replicas) return;
      if (Date.now() > deadline) throw new Error(`${up} of ${replicas} replicas up after ${timeoutMs} ms`);
    } catch (error) {
      if (Date.now() > deadline) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
