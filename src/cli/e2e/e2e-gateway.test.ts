/**
 * `continuum gateway` end to end, in front of real engines and never a mock: llama.cpp's own llama-server
 * (built from the pinned source by scripts/build-llama-server.mjs), and `continuum serve --scheduling-policy
 * vllm` as a vLLM-protocol backend (its `vllm:` metrics and KV events, the gateway told `--engine vllm`).
 * Two backends each: agent programs keep their turns on one backend and report cached prompt tokens on their
 * later turns; a backend killed between turns leaves its programs to continue on the other one.
 */
import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { freePort, type Server, startServer, stopServer } from "../../bench/compare/processes.js";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { ensureBuiltinModel } from "../../gguf/index.js";
import { type RunningGateway, runGateway } from "../serving/gateway-command.js";
import { GatewayPrograms } from "../test-support/gateway-programs.js";
import { type LlamaServer, startLlamaServer } from "../test-support/llama-server.js";
import { llamaServerBinary } from "../test-support/llama-server-binary.js";

const PROGRAMS = ["alpha", "beta", "gamma", "delta"];

async function startGateway(backends: string[], extra: { engine?: "vllm" } = {}): Promise<RunningGateway> {
  return runGateway(
    {
      backend: backends,
      ...extra,
      schedulingPolicy: "cachettl-adaptive",
      host: "127.0.0.1",
      port: 0,
      servedModelName: [],
      apiKey: [],
    },
    { log: () => {}, handleSignals: false },
  );
}

function metricValue(text: string, name: string, backend: string): number {
  const line = text.split("\n").find((l) => l.startsWith(`${name}{backend="${backend}"`));
  return line ? Number(line.split(" ").at(-1)) : Number.NaN;
}

/** Every program's turns so far on one backend, and its later turns' prompts partly cached there. */
function assertSticky(programs: GatewayPrograms): void {
  for (const name of programs.names) {
    const backends = programs.backendsOf(name);
    assert.equal(new Set(backends).size, 1, `${name} moved between backends: ${backends.join(", ")}`);
    for (const r of programs.results.filter((x) => x.program === name && x.turn > 0)) {
      assert.ok(r.cachedTokens > 0, `${name} turn ${r.turn} on ${r.backend} reported no cached tokens`);
    }
  }
}

/** Kills the backend of the first program, runs two more turns: all answered, its programs moved once and cached again. */
async function killAndContinue(
  programs: GatewayPrograms,
  kill: (backend: string) => Promise<void>,
): Promise<void> {
  const victim = programs.backendsOf(PROGRAMS[0] as string).at(-1) as string;
  const moved = PROGRAMS.filter((name) => programs.backendsOf(name).at(-1) === victim);
  await kill(victim);
  const afterKill = await programs.turn(3);
  for (const r of afterKill) {
    if (moved.includes(r.program))
      assert.notEqual(r.backend, victim, `${r.program} was sent to the killed backend`);
  }
  const next = await programs.turn(4);
  for (const r of next) {
    assert.ok(r.cachedTokens > 0, `${r.program} turn 4 on ${r.backend} reported no cached tokens`);
    assert.equal(
      r.backend,
      afterKill.find((x) => x.program === r.program)?.backend,
      `${r.program} moved again`,
    );
  }
}

describe("continuum gateway in front of llama.cpp's llama-server", { skip: llamaSkip }, () => {
  let binary: Awaited<ReturnType<typeof llamaServerBinary>>;
  const servers: Server[] = [];
  let dir = "";
  let gateway: RunningGateway | null = null;

  before(async () => {
    binary = await llamaServerBinary();
    dir = await mkdtemp(join(tmpdir(), "continuum-gateway-llama-"));
  });

  after(async () => {
    await gateway?.close();
    for (const server of servers) await stopServer(server);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test("programs stay on their slot's server, cached; a killed server's programs continue on the other", async (t) => {
    if ("skip" in binary) {
      t.skip(binary.skip);
      return;
    }
    const model = await ensureBuiltinModel({ preset: "tiny" });
    for (const name of ["l1", "l2"]) {
      const port = await freePort();
      const argv = [
        "-m",
        model,
        "-t",
        "1",
        "-c",
        "8192",
        "-np",
        "2",
        "--host",
        "127.0.0.1",
        "--port",
        String(port),
      ];
      argv.push("--cache-prompt", "--cache-ram", "64", "--slot-save-path", dir, "--no-webui", "--no-warmup");
      servers.push(await startServer(name, binary.path, argv, port, dir));
    }
    gateway = await startGateway(servers.map((s) => s.url));
    assert.equal(gateway.gateway.upBackends.length, 2);
    assert.deepEqual(
      gateway.gateway.backends.map((b) => [b.info?.engine, b.info?.slots, b.info?.capacityTokens]),
      [
        ["llama-server", 2, 8192],
        ["llama-server", 2, 8192],
      ],
      "the engine detected, its slots and KV read from /props",
    );
    const programs = new GatewayPrograms(gateway.url, PROGRAMS);
    for (let turn = 0; turn < 3; turn++) await programs.turn(turn);
    assertSticky(programs);
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
    const slotHits =
      metricValue(metrics, "continuum:gateway_slot_hits_total", "b1") +
      metricValue(metrics, "continuum:gateway_slot_hits_total", "b2");
    assert.ok(slotHits >= PROGRAMS.length, `returning turns went to their program's slot (${slotHits})`);
    const overflow = await post(gateway.url, "/v1/chat/completions", {
      messages: [{ role: "user", content: "word ".repeat(6000) }],
    });
    assert.equal(overflow.status, 400, "llama-server's exceed_context_size_error, as OpenAI's overflow");
    assert.equal((overflow.body["error"] as { code: string }).code, "context_length_exceeded");
    assert.match(
      (overflow.body["error"] as { message: string }).message,
      /maximum context length is 4096 tokens/,
    );
    const byName = new Map<string, Server>(servers.map((s, i) => [`b${i + 1}`, s]));
    await killAndContinue(programs, async (backend) => {
      const child = (byName.get(backend) as Server).child as ChildProcess;
      child.kill("SIGKILL");
      await new Promise((resolve) => child.once("exit", resolve));
    });
  });

  test("in front of a server of one slot, the next turn is sent ahead for llama-server to queue: every turn answered, later turns cached", async (t) => {
    if ("skip" in binary) {
      t.skip(binary.skip);
      return;
    }
    const port = await freePort();
    const argv = ["-m", await ensureBuiltinModel({ preset: "tiny" }), "-t", "1", "-c", "4096", "-np", "1"];
    argv.push("--host", "127.0.0.1", "--port", String(port), "--cache-prompt", "--cache-ram", "64");
    const server = await startServer(
      "one-slot",
      binary.path,
      [...argv, "--no-webui", "--no-warmup"],
      port,
      dir,
    );
    servers.push(server);
    const oneSlot = await startGateway([server.url]);
    try {
      const programs = new GatewayPrograms(oneSlot.url, PROGRAMS);
      for (let turn = 0; turn < 3; turn++) await programs.turn(turn);
      assertSticky(programs);
      const metrics = await (await fetch(`${oneSlot.url}/metrics`)).text();
      const ahead = metricValue(metrics, "continuum:gateway_turns_sent_ahead_total", "b1");
      assert.ok(ahead > 0, `four programs at once on one slot: some turns were sent ahead (${ahead})`);
    } finally {
      await oneSlot.close();
    }
  });
});

async function post(
  url: string,
  path: string,
  body: object,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}${path}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

describe("continuum gateway: bad input", { skip: llamaSkip }, () => {
  test("a backend down at start is reported and answered 503 until it is up; a prompt over its context is each API's overflow", async () => {
    const port = await freePort();
    const lines: string[] = [];
    const gateway = await runGateway(
      {
        backend: [`http://127.0.0.1:${port}`],
        schedulingPolicy: "cachettl-adaptive",
        host: "127.0.0.1",
        port: 0,
        servedModelName: [],
        apiKey: [],
      },
      { log: (line) => lines.push(line), handleSignals: false },
    );
    let replica: LlamaServer | null = null;
    try {
      assert.ok(
        lines.some((line) => line.includes(`http://127.0.0.1:${port}`) && line.includes("not available")),
        lines.join("\n"),
      );
      const health = await fetch(`${gateway.url}/health`);
      assert.equal(health.status, 503);
      const refused = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
      });
      assert.equal(refused.status, 503);
      assert.ok(refused.headers.get("retry-after"), "503 with Retry-After");
      assert.equal(((await refused.json()) as { error: { code: string } }).error.code, "no_backend");
      replica = await startLlamaServer(["--port", String(port), "--scheduling-policy", "vllm"]);
      const deadline = Date.now() + 15_000;
      while ((await fetch(`${gateway.url}/health`)).status !== 200) {
        assert.ok(Date.now() < deadline, "the backend was not taken in within 15 s of starting");
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const served = await post(gateway.url, "/v1/chat/completions", {
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 2,
      });
      assert.equal(served.status, 200);
      // the replica's context is 4096 tokens
      const long = "word ".repeat(6000);
      const chat = await post(gateway.url, "/v1/chat/completions", {
        messages: [{ role: "user", content: long }],
      });
      assert.equal(chat.status, 400);
      assert.equal((chat.body["error"] as { code: string }).code, "context_length_exceeded");
      assert.match(
        (chat.body["error"] as { message: string }).message,
        /maximum context length is 4096 tokens/,
      );
      const messages = await post(gateway.url, "/v1/messages", {
        max_tokens: 4,
        messages: [{ role: "user", content: long }],
      });
      assert.equal(messages.status, 400);
      assert.deepEqual(Object.keys(messages.body), ["type", "error"], "Anthropic's error shape");
      assert.match(
        (messages.body["error"] as { message: string }).message,
        /^prompt is too long: \d+ tokens > 4095 maximum$/,
      );
      const responses = await post(gateway.url, "/v1/responses", { input: long });
      assert.equal(responses.status, 400);
      assert.equal((responses.body["error"] as { code: string }).code, "context_length_exceeded");
    } finally {
      await gateway.close();
      await replica?.close();
    }
  });
});

describe("continuum gateway: tenants", { skip: llamaSkip }, () => {
  test("a key is a tenant: a prompt another tenant sent is not found cached, one's own is", async () => {
    const replica = await startLlamaServer(["--scheduling-policy", "vllm"]);
    const gateway = await runGateway(
      {
        backend: [replica.server.url],
        engine: "vllm",
        schedulingPolicy: "cachettl-adaptive",
        host: "127.0.0.1",
        port: 0,
        servedModelName: [],
        apiKey: ["key-one", "key-two"],
      },
      { log: () => {}, handleSignals: false },
    );
    try {
      const ask = async (key: string) => {
        const response = await fetch(`${gateway.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
          body: JSON.stringify({
            messages: [{ role: "user", content: `shared context ${"lorem ipsum ".repeat(80)}` }],
            max_tokens: 2,
          }),
        });
        assert.equal(response.status, 200);
        return ((await response.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } })
          .usage.prompt_tokens_details.cached_tokens;
      };
      assert.equal(await ask("key-one"), 0);
      assert.equal(await ask("key-two"), 0, "the other tenant's prefix is not shared");
      assert.ok((await ask("key-one")) > 0, "the tenant's own prefix is");
      const anonymous = await fetch(`${gateway.url}/v1/chat/completions`, { method: "POST", body: "{}" });
      assert.equal(anonymous.status, 401);
    } finally {
      await gateway.close();
      await replica.close();
    }
  });
});

describe("continuum gateway in front of continuum serve --scheduling-policy vllm (vLLM protocol)", {
  skip: llamaSkip,
}, () => {
  const replicas: LlamaServer[] = [];
  let gateway: RunningGateway | null = null;

  after(async () => {
    await gateway?.close();
    for (const replica of replicas) await replica.close();
  });

  test("KV events followed, vllm: metrics summed; programs sticky and cached; a stopped replica's programs move", async () => {
    const backends: string[] = [];
    for (let i = 0; i < 2; i++) {
      const eventsPort = await freePort();
      replicas.push(
        await startLlamaServer([
          "--scheduling-policy",
          "vllm",
          "--kv-events-endpoint",
          `tcp://*:${eventsPort}`,
        ]),
      );
      backends.push(`${replicas[i]!.server.url}?kv-events=tcp://127.0.0.1:${eventsPort}`);
    }
    gateway = await startGateway(backends, { engine: "vllm" });
    assert.deepEqual(
      gateway.gateway.backends.map((b) => [b.info?.engine, b.info?.capacityTokens]),
      replicas.map((r) => ["vllm", r.engine.scheduler.numKvBlocks * 16]),
      "KV capacity read from vllm:cache_config_info",
    );
    const programs = new GatewayPrograms(gateway.url, PROGRAMS);
    for (let turn = 0; turn < 3; turn++) {
      await programs.turn(turn);
      // a tool call's time: the gateway reads a turn's blocks from the events that came up to 200 ms after
      // its reply, and a returning turn sent sooner has no blocks of its program to look for yet
      await new Promise((resolve) => setTimeout(resolve, 300));
    }
    assertSticky(programs);
    // the last turns' events are on their way: give them a moment
    await new Promise((resolve) => setTimeout(resolve, 500));
    const metrics = await (await fetch(`${gateway.url}/metrics`)).text();
    for (const backend of ["b1", "b2"]) {
      assert.ok(
        metricValue(metrics, "continuum:gateway_kv_event_batches_total", backend) > 0,
        `${backend}: no KV events`,
      );
      assert.ok(
        metricValue(metrics, "continuum:gateway_kv_event_resident_blocks", backend) > 0,
        `${backend}: no blocks`,
      );
    }
    const attributed =
      metricValue(metrics, "continuum:gateway_kv_event_attributed_turns_total", "b1") +
      metricValue(metrics, "continuum:gateway_kv_event_attributed_turns_total", "b2");
    assert.ok(attributed > 0, "turns found in the KV events");
    const returning =
      metricValue(metrics, "continuum:gateway_returning_resident_tokens_total", "b1") +
      metricValue(metrics, "continuum:gateway_returning_resident_tokens_total", "b2");
    assert.ok(returning > 0, "returning turns found their previous turn's blocks still held");
    const summed = Number(/^vllm:prompt_tokens_total\{[^}]*\} (\S+)$/m.exec(metrics)?.[1]);
    const own = await Promise.all(replicas.map((r) => r.metrics()));
    assert.equal(
      summed,
      own.reduce((sum, m) => sum + (m["vllm:prompt_tokens_total"] ?? 0), 0),
      "vllm:prompt_tokens_total summed",
    );
    const byName = new Map<string, LlamaServer>(replicas.map((r, i) => [`b${i + 1}`, r]));
    await killAndContinue(programs, async (backend) => {
      await (byName.get(backend) as LlamaServer).server.close({ drainTimeoutMs: 1000 });
    });
  });
});
