/**
 * `continuum serve --disk-offload-persist` as processes, on the built-in tiny model: a clean stop keeps a
 * program's KV on disk, the next process restores it, and when that process is killed (SIGKILL, nothing of it
 * runs at the end) the process after it still restores what the clean stop kept and serves the program's next
 * turn from it.
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";

const MAIN = fileURLToPath(new URL("../main.ts", import.meta.url));

interface Serving {
  readonly child: ChildProcess;
  readonly url: string;
  /** the banner's words on the disk tier */
  readonly diskTier: string;
  readonly exited: Promise<number | null>;
}

/** Starts `continuum serve` with a persistent disk tier in `dir`; resolves once its banner is out. */
function serve(dir: string): Promise<Serving> {
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      MAIN,
      "serve",
      "--builtin-model",
      "tiny",
      "--threads",
      "1",
      "--port",
      "0",
      "--cpu-offload-gb",
      "0.25",
      "--disk-offload-dir",
      dir,
      "--disk-offload-gb",
      "1",
      "--disk-offload-persist",
      "--drain-timeout",
      "5",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  const exited = new Promise<number | null>((done) => child.on("exit", (code) => done(code)));
  return new Promise((resolve, reject) => {
    let out = "";
    child.stderr?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      const diskTier = /disk tier [^\n]*/.exec(out)?.[0];
      if (url && diskTier && out.includes("live dashboard")) resolve({ child, url, diskTier, exited });
    });
    void exited.then((code) => reject(new Error(`serve exited (${code}) before its banner:\n${out}`)));
  });
}

const FIRST = [
  { role: "system", content: "You are a coding agent." },
  { role: "user", content: `List the files of ${"the repository ".repeat(30)}` },
];

async function turn(url: string, messages: object[], last: boolean) {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-program-id": "job", "x-last-step": String(last) },
    body: JSON.stringify({ model: "continuum-tiny", messages, max_tokens: 6, temperature: 0 }),
  });
  assert.equal(response.status, 200);
  const body = (await response.json()) as {
    choices: { message: { content: string } }[];
    usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
  };
  return {
    text: body.choices[0]?.message.content ?? "",
    promptTokens: body.usage.prompt_tokens,
    cached: body.usage.prompt_tokens_details.cached_tokens,
  };
}

describe("a persistent disk KV tier across processes", { skip: llamaSkip }, () => {
  test("SIGKILL after a clean restart keeps the states the clean stop saved", async () => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-persist-kill-"));
    try {
      const first = await serve(dir);
      const reply = await turn(first.url, FIRST, false);
      first.child.kill("SIGTERM");
      assert.equal(await first.exited, 0);

      const second = await serve(dir);
      assert.match(second.diskTier, /kept across restarts \(1 state \(.*\) restored\)/);
      second.child.kill("SIGKILL");
      await second.exited;

      const third = await serve(dir);
      try {
        assert.match(third.diskTier, /kept across restarts \(1 state \(.*\) restored\)/);
        const next = await turn(
          third.url,
          [...FIRST, { role: "assistant", content: reply.text }, { role: "user", content: "Open README.md" }],
          true,
        );
        assert.ok(next.cached >= reply.promptTokens - 16, `${next.cached} of ${next.promptTokens} cached`);
      } finally {
        third.child.kill("SIGTERM");
        await third.exited;
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
