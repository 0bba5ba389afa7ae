import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { isNativeAvailable } from "../../engine/native/llama-native.js";

const main = fileURLToPath(new URL("../main.ts", import.meta.url));

interface ServeRun {
  /** The server's URL once it listens; null when it exits first. */
  readonly url: Promise<string | null>;
  readonly exitCode: Promise<number | null>;
  readonly stdout: () => string;
  /** The lines Continuum itself wrote on stderr (llama.cpp's own log lines left out). */
  readonly continuumLines: () => string[];
  readonly kill: () => void;
}

/** `continuum serve` on the tiny built-in model with CONTINUUM_GPU_PLUGIN=plugin. */
function serve(plugin: string, gpuLayers: string): ServeRun {
  const args = [
    "serve",
    "--builtin-model",
    "tiny",
    "--port",
    "0",
    "--no-dashboard",
    "--gpu-layers",
    gpuLayers,
  ];
  const child = spawn(process.execPath, ["--import", "tsx", main, ...args], {
    env: { ...process.env, CONTINUUM_GPU_PLUGIN: plugin },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8").on("data", (data: string) => {
    stderr += data;
  });
  const exitCode = new Promise<number | null>((resolve) => child.once("close", resolve));
  const url = new Promise<string | null>((resolve) => {
    child.stdout.on("data", (data: string) => {
      stdout += data;
      const listening = /listening on (http:\/\/\S+)/.exec(stdout);
      if (listening) resolve(listening[1]!);
    });
    void exitCode.then(() => resolve(null));
  });
  return {
    url,
    exitCode,
    stdout: () => stdout,
    continuumLines: () => stderr.split("\n").filter((line) => line.startsWith("continuum")),
    kill: () => child.kill("SIGKILL"),
  };
}

async function chat(url: string): Promise<{ status: number; content: unknown }> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 4 }),
  });
  const body = (await response.json()) as { choices?: { message: { content: unknown } }[] };
  return { status: response.status, content: body.choices?.[0]?.message.content };
}

/** With --gpu-layers auto: the one line, then a chat request served on the CPU. With all: the line, exit 1. */
async function assertBadPluginHandled(plugin: string, cause: RegExp): Promise<void> {
  const auto = serve(plugin, "auto");
  const all = serve(plugin, "all");
  try {
    const url = await auto.url;
    assert.ok(url, `serve --gpu-layers auto did not listen: ${auto.continuumLines().join("\n")}`);
    const reply = await chat(url);
    assert.equal(reply.status, 200);
    assert.equal(typeof reply.content, "string");
    const lines = auto.continuumLines();
    assert.equal(lines.length, 1, lines.join("\n"));
    const backend = `continuum: GPU backend cuda \\(${plugin.replaceAll(".", "\\.")}\\) failed its check: `;
    assert.match(
      lines[0]!,
      new RegExp(`^${backend}${cause.source}; serving on the CPU\\. Fix: point CONTINUUM_GPU_PLUGIN at`),
    );

    assert.equal(await all.exitCode, 1);
    assert.doesNotMatch(all.stdout(), /listening/);
    assert.equal(all.continuumLines().length, 1, all.continuumLines().join("\n"));
    assert.match(all.continuumLines()[0]!, new RegExp(`^${backend}${cause.source}\\. Fix: `));
  } finally {
    auto.kill();
    all.kill();
  }
}

describe("continuum serve with a GPU plugin that fails its check", {
  skip: isNativeAvailable() ? false : "no llama.cpp addon",
}, () => {
  let dir = "";
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "continuum-gpu-check-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  test("a file that is not a library", async () => {
    const plugin = join(dir, "libggml-cuda.so");
    await writeFile(plugin, "this text file is not a shared library\n");
    await assertBadPluginHandled(plugin, /the plugin did not load \(.+\)/);
  });

  const cc = spawnSync("cc", ["--version"]).status === 0;
  test("a library that aborts as it loads", {
    skip: cc ? false : "no C compiler (cc) to build it",
  }, async () => {
    const source = join(dir, "abort.c");
    await writeFile(
      source,
      "#include <stdlib.h>\n__attribute__((constructor)) static void die(void) { abort(); }\n",
    );
    await mkdir(join(dir, "aborts"));
    const plugin = join(dir, "aborts", "libggml-cuda.so");
    const built = spawnSync("cc", ["-shared", "-fPIC", "-o", plugin, source]);
    assert.equal(built.status, 0, String(built.stderr));
    await assertBadPluginHandled(plugin, /aborted while loading the plugin/);
  });
});
