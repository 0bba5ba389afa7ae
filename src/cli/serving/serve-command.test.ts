import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { NO_CHAT_TEMPLATE } from "../../engine/engine-api.js";
import type { LlamaEngineOptions } from "../../engine/engine-factory.js";
import { H100_ALL_LAYERS } from "../../engine/test-support/devices.js";
import { FakeEngine } from "../../server/test-support/fake-engine.js";
import { llamaTemplate } from "../../server/test-support/llama-templates.js";
import { engineOptionsOf, runServe, serveCommand } from "./serve-command.js";

/** The start-up banner of `serve` with these flags over `engine`, line by line (the server stopped again). */
async function bannerOf(argv: readonly string[], engine = new FakeEngine()): Promise<string[]> {
  const command = serveCommand()
    .exitOverride()
    .action(() => {});
  await command.parseAsync([...argv, "--port", "0"], { from: "user" });
  const lines: string[] = [];
  const server = await runServe(command.opts() as never, {
    createEngine: () => engine,
    log: (line) => lines.push(line),
    handleSignals: false,
  });
  await server.close();
  return lines;
}

describe("continuum serve", () => {
  test("a persistent KV tier is scoped to the API keys in order (they name the tenants that salt the cache)", async () => {
    const scope = async (flags: string) => {
      const command = serveCommand();
      let parsed: Record<string, unknown> = {};
      command.exitOverride().action((o: Record<string, unknown>) => {
        parsed = o;
      });
      await command.parseAsync(
        `--disk-offload-dir /tmp/kv --disk-offload-gb 1 --disk-offload-persist ${flags}`.split(" "),
        { from: "user" },
      );
      return engineOptionsOf(parsed as never).kvPersistScope;
    };
    const ab = await scope("--api-key a --api-key b");
    assert.equal(await scope("--api-key a --api-key b"), ab);
    assert.notEqual(await scope("--api-key b --api-key a"), ab, "the same keys in another order");
    assert.notEqual(await scope("--api-key a"), ab);
  });

  test("flags parse vLLM-style and reach the engine factory; the banner names URL, model, device and policy", async () => {
    const command = serveCommand();
    let parsed: Record<string, unknown> = {};
    command.exitOverride().action((o: Record<string, unknown>) => {
      parsed = o;
    });
    const argv = [
      "--model /models/x.gguf --scheduling-policy vllm --max-num-seqs 8 --max-num-batched-tokens 512 --ubatch-size 256",
      "--kv-cache-tokens 16384 --kv-layout streams --cpu-offload-gb 2 --disk-offload-dir /tmp/kv --disk-offload-gb 4 --disk-offload-persist --port 0",
      "--api-key k --record /tmp/rec.jsonl --threads 2 --served-model-name my-model --served-model-name alias",
      "--no-flash-attn --kv-cache-dtype q8_0 --gpu-layers all --max-waiting 50",
    ];
    await command.parseAsync(argv.join(" ").split(" "), { from: "user" });
    assert.equal(parsed["host"], "127.0.0.1");
    assert.equal(parsed["schedulingPolicy"], "vllm");
    assert.equal(parsed["kvCacheTokens"], 16384);
    assert.deepEqual(parsed["servedModelName"], ["my-model", "alias"]);

    let received: LlamaEngineOptions | null = null;
    const lines: string[] = [];
    const engine = new FakeEngine({ device: H100_ALL_LAYERS });
    const server = await runServe(parsed as never, {
      createEngine: (options) => {
        received = options;
        return engine;
      },
      log: (line) => lines.push(line),
      handleSignals: false,
    });
    try {
      const { kvPersistScope, ...rest } = received as unknown as LlamaEngineOptions;
      assert.match(kvPersistScope ?? "", /^[0-9a-f]{64}$/, "the persistent tier's scope: the keys' digest");
      assert.deepEqual(rest, {
        modelPath: "/models/x.gguf",
        builtinModel: "small",
        servedModelName: "my-model",
        policy: "vllm",
        maxNumSeqs: 8,
        maxNumBatchedTokens: 512,
        ubatchTokens: 256,
        kvCacheTokens: 16384,
        kvLayout: "streams",
        cpuOffloadGb: 2,
        diskOffloadDir: "/tmp/kv",
        diskOffloadGb: 4,
        diskOffloadPersist: true,
        threads: 2,
        flashAttn: false,
        kvCacheType: "q8_0",
        gpuLayers: "all",
        recordPath: "/tmp/rec.jsonl",
        maxWaiting: 50,
      });
      assert.match(lines[0]!, /^continuum serve: listening on http:\/\/127\.0\.0\.1:\d+$/);
      assert.match(lines[1]!, /model fake-model .*scheduling policy vllm/);
      assert.equal(
        lines[2],
        "  device: cuda · NVIDIA H100 80GB HBM3 · 79.6 GiB · 32/32 layers on the GPU · KV cache on the GPU",
      );
      assert.equal(lines[3], "  fake KV");
      assert.match(lines[4]!, /TTL cost model: prefill and tier reloads priced from the engine's own steps/);
      assert.equal(lines[5], `  live dashboard at ${server.url}/dashboard`);
      assert.equal((await fetch(`${server.url}/health`)).status, 200);
      const models = await fetch(`${server.url}/v1/models`, { headers: { Authorization: "Bearer k" } });
      const ids = ((await models.json()) as { data: { id: string }[] }).data.map((m) => m.id);
      assert.deepEqual(ids, ["fake-model", "alias"]);
    } finally {
      await server.close();
    }
    assert.equal(engine.shutdownCalls, 1);
  });

  test("a built-in model served under its own name answers to its preset's name too", async () => {
    const command = serveCommand()
      .exitOverride()
      .action(() => {});
    await command.parseAsync(["--builtin-model", "tiny", "--port", "0"], { from: "user" });
    const server = await runServe(command.opts() as never, {
      createEngine: () => new FakeEngine(),
      log: () => {},
      handleSignals: false,
    });
    try {
      const models = await fetch(`${server.url}/v1/models`);
      const ids = ((await models.json()) as { data: { id: string }[] }).data.map((m) => m.id);
      assert.deepEqual(ids, ["fake-model", "tiny"]);
    } finally {
      await server.close();
    }
  });

  test("a quantized KV cache on the CPU is named a trade in the banner (on a GPU it is not)", async () => {
    const lines = await bannerOf(["--kv-cache-dtype", "q8_0"]);
    assert.ok(
      lines.some((line) =>
        /^ {2}KV cache q8_0 on the CPU: fewer bytes per token than f16, slower attention/.test(line),
      ),
    );
  });

  test("on a built-in model the banner says its weights are random and names --logit-bias eos+4 to end replies", async () => {
    const note = (lines: string[]) => lines.filter((line) => /weights are random/.test(line));
    assert.deepEqual(note(await bannerOf([])), [
      "  the built-in model's weights are random: its replies are noise and end only after thousands of " +
        "tokens (or at a request's max_tokens); --logit-bias eos+4 makes them end sooner (~140 tokens on average)",
    ]);
    const withEos = new FakeEngine({ chatTemplate: { ...NO_CHAT_TEMPLATE, eosTokenId: 2 } });
    assert.deepEqual(note(await bannerOf(["--logit-bias", "eos+4"], withEos)), [
      "  the built-in model's weights are random: its replies are noise",
    ]);
    assert.deepEqual(note(await bannerOf(["--model", "/models/x.gguf"])), []);
  });

  test("--help names `continuum policies` for the scheduling policies instead of listing every one", () => {
    const help = serveCommand().helpInformation();
    assert.match(help, /--scheduling-policy <name>\s+scheduling policy: a name `continuum\s+policies` lists/);
    for (const name of ["vllm", "cachettl-adaptive:no-pins", "concur:reusable"]) {
      assert.doesNotMatch(help, new RegExp(`\\b${name}\\b`), name);
    }
  });

  test("a large unified KV pool on a GPU is named in the banner for its host mask; streams or a small pool are not", async () => {
    const banner = async (argv: string[], kvBlocks: number) => {
      const engine = new FakeEngine({
        device: H100_ALL_LAYERS,
        metrics: { kvBlocks, kvBlockSizeTokens: 16 },
      });
      return (await bannerOf(argv, engine)).some((line) => /attention mask on the CPU/.test(line));
    };
    assert.equal(await banner([], 32_768), true, "524,288 cells");
    assert.equal(await banner([], 2_048), false, "32,768 cells");
    assert.equal(await banner(["--kv-layout", "streams"], 32_768), false);
  });

  test("a policy module: imported before the engine starts, given to its factory, named in the banner", async () => {
    const example = fileURLToPath(new URL("../../../examples/policies/tool-pin.mjs", import.meta.url));
    const command = serveCommand()
      .exitOverride()
      .action(() => {});
    await command.parseAsync(["--scheduling-policy", example, "--port", "0"], { from: "user" });
    let received: LlamaEngineOptions | null = null;
    const lines: string[] = [];
    const server = await runServe(command.opts() as never, {
      createEngine: (options) => {
        received = options;
        return new FakeEngine();
      },
      log: (line) => lines.push(line),
      handleSignals: false,
    });
    await server.close();
    assert.equal((received as LlamaEngineOptions | null)?.policy, example);
    assert.match(lines[1]!, new RegExp(`scheduling policy ${example.replaceAll(".", "\\.")}$`));

    const broken = serveCommand()
      .exitOverride()
      .action(() => {});
    await broken.parseAsync(["--scheduling-policy", "./no/such/policy.mjs", "--port", "0"], { from: "user" });
    let created = false;
    await assert.rejects(
      runServe(broken.opts() as never, {
        createEngine: () => {
          created = true;
          return new FakeEngine();
        },
        log: () => {},
        handleSignals: false,
      }),
      /policy module \.\/no\/such\/policy\.mjs \(.*\): file not found/,
    );
    assert.equal(created, false, "no engine is built for a policy that does not load");
  });

  test("unknown policies and KV layouts are refused", async () => {
    for (const [argv, message] of [
      [["--scheduling-policy", "lifo"], /unknown policy/],
      // the simulator's clairvoyant bound needs the future a server never has
      [["--scheduling-policy", "cachettl-adaptive:clairvoyant"], /unknown policy/],
      [["--kv-layout", "paged"], /Allowed choices are unified, streams/],
    ] as const) {
      const command = serveCommand()
        .exitOverride()
        .configureOutput({ writeErr: () => {} });
      await assert.rejects(command.parseAsync([...argv], { from: "user" }), message);
    }
  });
});

test("--max-body-mb bounds request bodies (413 beyond it); the default stays 32 MiB", async () => {
  const serveWith = async (argv: string[]) => {
    let parsed: Record<string, unknown> = {};
    const command = serveCommand()
      .exitOverride()
      .action((o: Record<string, unknown>) => {
        parsed = o;
      });
    await command.parseAsync([...argv, "--port", "0"], { from: "user" });
    const server = await runServe(parsed as never, {
      createEngine: () => new FakeEngine(),
      log: () => {},
      handleSignals: false,
    });
    return { parsed, server };
  };
  const post = (url: string, padding: number) =>
    fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      // An unknown field is ignored: only the body's size matters.
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], padding: "x".repeat(padding) }),
    });

  const small = await serveWith(["--max-body-mb", "0.01"]);
  try {
    const tooLarge = await post(small.server.url, 20_000);
    assert.equal(tooLarge.status, 413);
    const error = ((await tooLarge.json()) as { error: { code: string; message: string } }).error;
    assert.equal(error.code, "request_too_large");
    assert.match(error.message, /at most 10485 bytes/);
    const fits = await post(small.server.url, 5_000);
    assert.equal(fits.status, 200);
    await fits.json();
  } finally {
    await small.server.close();
  }

  const byDefault = await serveWith([]);
  try {
    assert.equal(byDefault.parsed["maxBodyMb"], 32);
    const mib = await post(byDefault.server.url, 1024 * 1024);
    assert.equal(mib.status, 200);
    await mib.json();
  } finally {
    await byDefault.server.close();
  }
  const command = serveCommand()
    .exitOverride()
    .configureOutput({ writeErr: () => {} });
  await assert.rejects(command.parseAsync(["--max-body-mb", "0"], { from: "user" }), /positive number/);
});

test("--chat-template FILE renders chat requests with that template; a missing file stops serve", async () => {
  const dir = await mkdtemp(join(tmpdir(), "continuum-chat-template-"));
  try {
    const file = join(dir, "template.jinja");
    await writeFile(file, "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}<assistant>");
    let parsed: Record<string, unknown> = {};
    const command = serveCommand()
      .exitOverride()
      .action((o: Record<string, unknown>) => {
        parsed = o;
      });
    await command.parseAsync(["--chat-template", file, "--port", "0"], { from: "user" });
    const engine = new FakeEngine();
    const server = await runServe(parsed as never, {
      createEngine: () => engine,
      log: () => {},
      handleSignals: false,
    });
    try {
      const response = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
      });
      assert.equal(response.status, 200);
      await response.json();
      assert.equal(engine.requests[0]!.prompt, "<user>hi<assistant>");
    } finally {
      await server.close();
    }
    await assert.rejects(
      runServe({ ...parsed, chatTemplate: join(dir, "missing.jinja") } as never, {
        createEngine: () => new FakeEngine(),
        log: () => {},
        handleSignals: false,
      }),
      /--chat-template .*missing\.jinja/,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("a thinking template: the banner says chat completions split the thinking, and --reasoning-format none does not", async () => {
  const dir = await mkdtemp(join(tmpdir(), "continuum-serve-"));
  try {
    const file = join(dir, "thinking.jinja");
    await writeFile(file, "{% for m in messages %}{{ m.content }}{% endfor %}<think>\\n</think>");
    for (const [extra, splits] of [
      [[], true],
      [["--reasoning-format", "none"], false],
    ] as const) {
      const lines = await bannerOf(["--chat-template", file, ...extra]);
      assert.equal(
        lines.some((line) => line.includes("reasoning_content")),
        splits,
      );
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("the banner says how chat requests are rendered and read: whose template, the tool calls' format, the thinking", async () => {
  const dir = await mkdtemp(join(tmpdir(), "continuum-serve-"));
  try {
    const file = join(dir, "minimax.jinja");
    await writeFile(file, llamaTemplate("MiniMax-M2"));
    const overridden = await bannerOf(["--chat-template", file]);
    assert.ok(
      overridden.includes(
        "  chat template: --chat-template; tool calls read as minimax; thinking between <think> and </think>",
      ),
      overridden.join("\n"),
    );
    const hermes = new FakeEngine({
      chatTemplate: {
        source: "{% for m in messages %}{{ m.content }}{% endfor %}",
        toolUseSource: llamaTemplate("NousResearch-Hermes-3-Llama-3.1-8B-tool_use"),
        bosToken: "",
        eosToken: "<|im_end|>",
        eosTokenId: 2,
        addsBos: false,
      },
    });
    const own = await bannerOf([], hermes);
    assert.ok(
      own.some((line) =>
        line.startsWith("  chat template: the model's own (its tool_use template for requests with tools)"),
      ),
      own.join("\n"),
    );
    assert.equal(
      (await bannerOf([])).filter((line) => line.includes("chat template")).length,
      0,
      "built-in ChatML",
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

const FIXTURE = fileURLToPath(new URL("../test-support/serve-fixture.ts", import.meta.url));

/** `serve` over a fake engine in a child process, once it listens: its URL, stdout so far, its exit. */
async function serveProcess(args: readonly string[] = []) {
  const child = spawn(process.execPath, ["--import", "tsx", FIXTURE, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const out = { text: "" };
  child.stdout.setEncoding("utf8");
  child.stderr.resume();
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on("data", (data: string) => {
      out.text += data;
      const match = /listening on (http:\/\/\S+)/.exec(out.text);
      if (match) resolve(match[1]!);
    });
    child.once("exit", () => reject(new Error(`server exited early: ${out.text}`)));
  });
  return { child, exited, out, url };
}

function chatRequest(url: string, body: object = {}): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], ...body }),
  });
}

describe("continuum serve process", () => {
  test("SIGTERM lets the in-flight request finish, shuts the engine down, exits 0", async () => {
    const { child, exited, out, url } = await serveProcess();
    try {
      const response = chatRequest(url);
      await new Promise((r) => setTimeout(r, 100));
      child.kill("SIGTERM");
      const body = (await (await response).json()) as { choices: { message: { content: string } }[] };
      assert.equal(body.choices[0]!.message.content, "one two three");
      assert.equal(await exited, 0);
      assert.match(
        out.text,
        /SIGTERM, finishing 1 request\(s\) in flight \(at most 30 s; .*\); Ctrl-C or SIGTERM again stops at once/,
      );
      assert.match(out.text, /engine shutdown after 1 finished request\(s\)/);
      assert.match(out.text, /continuum serve: stopped\n/);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  test("with only programs between turns, SIGTERM stops at once, not after --drain-timeout", async () => {
    const { child, exited, out, url } = await serveProcess(["--drain-timeout", "30"]);
    try {
      for (const program of ["agent-1", "agent-2"]) {
        const turn = await chatRequest(url, { job_id: program, is_last_step: false });
        assert.equal(turn.status, 200);
        await turn.json();
      }
      const signalledAt = Date.now();
      child.kill("SIGTERM");
      assert.equal(await exited, 0);
      const tookS = (Date.now() - signalledAt) / 1000;
      // the drain used to wait for both programs' next turns, the whole 30 s
      assert.ok(tookS < 2, `stopped ${tookS} s after SIGTERM`);
      assert.match(out.text, /SIGTERM, nothing in flight, stopping; Ctrl-C or SIGTERM again stops at once/);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  test("requests still in flight at --drain-timeout are cut, and the exit code says so", async () => {
    const { child, exited, out, url } = await serveProcess(["--drain-timeout", "0.1"]);
    try {
      const response = chatRequest(url).then(
        (r) => r.text(),
        () => null,
      );
      await new Promise((r) => setTimeout(r, 50));
      child.kill("SIGTERM");
      assert.equal(await exited, 1);
      await response;
      assert.match(out.text, /1 request\(s\) still in flight after --drain-timeout 0\.1 s were cut/);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  /**
   * A shell starts the server in the background (`cmd &`), prints its pid, becomes `sleep` (exec: no
   * leftover sleep holding our pipe open after the kill) and is then killed outright; whether the server
   * is still running 3 s later.
   */
  async function outlivesItsShell(args: string): Promise<boolean> {
    const dir = await mkdtemp(join(tmpdir(), "continuum-orphan-"));
    const log = join(dir, "serve.log");
    const shell = spawn(
      "sh",
      [
        "-c",
        `"${process.execPath}" --import tsx "${FIXTURE}" ${args} > "${log}" 2>&1 & echo $!; exec sleep 600`,
      ],
      { stdio: ["ignore", "pipe", "ignore"] },
    );
    const pid = await new Promise<number>((resolve) =>
      shell.stdout.once("data", (data: Buffer) => resolve(Number(String(data).trim()))),
    );
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      // Kill the parent only once the server listens: it learns its parent at start, and on a loaded
      // machine starting takes longer than any fixed wait.
      let listening = false;
      for (let i = 0; i < 600 && !listening && alive(); i++) {
        await new Promise((r) => setTimeout(r, 100));
        listening = (await readFile(log, "utf8").catch(() => "")).includes("listening on");
      }
      assert.ok(listening && alive(), "the server runs");
      shell.kill("SIGKILL");
      // the server looks for its parent once a second
      for (let i = 0; i < 30 && alive(); i++) await new Promise((r) => setTimeout(r, 100));
      return alive();
    } finally {
      if (alive()) process.kill(pid, "SIGKILL");
      if (shell.exitCode === null) shell.kill("SIGKILL");
      shell.stdout.destroy();
      await rm(dir, { recursive: true, force: true });
    }
  }

  test("started with `cmd &` or nohup, it outlives the shell that started it", async () => {
    assert.equal(await outlivesItsShell(""), true);
  });

  test("with --exit-with-parent (as the cluster starts its replicas) it stops when its parent dies", async () => {
    assert.equal(await outlivesItsShell("--exit-with-parent"), false);
  });
});
