import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { TraceProgram } from "../../workload/trace.js";
import { summarizeReplay } from "../bench-metrics.js";
import { normalizeBaseUrl, ReplayHttpClient } from "./replay-client.js";
import { type ReplayOptions, runReplay } from "./replay-runner.js";
import { CharsTokenCounter } from "./replay-tokens.js";
import { SandboxTools, SleepTools, sandboxCommand } from "./replay-tools.js";

interface Seen {
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
}

type Behaviour = (body: Record<string, unknown>, seen: Seen[]) => "ok" | "hang" | number;

/** A tiny OpenAI-like server on 127.0.0.1: replies `reply-<job>-<n>` and records every request. */
async function fakeServer(behaviour: Behaviour = () => "ok") {
  const seen: Seen[] = [];
  const server: Server = createServer((req, res) => {
    let text = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => {
      text += d;
    });
    req.on("end", () => {
      if (req.method === "GET") {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ object: "list", data: [{ id: "fake-model", object: "model" }] }));
        return;
      }
      const body = JSON.parse(text) as Record<string, unknown>;
      seen.push({ path: req.url ?? "", headers: req.headers, body });
      const what = behaviour(body, seen);
      if (what === "hang") return;
      if (typeof what === "number") {
        res.statusCode = what;
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ error: { message: "boom", type: "server_error" } }));
        return;
      }
      const n = seen.filter((s) => s.body["job_id"] === body["job_id"]).length;
      const reply = `reply-${String(body["job_id"])}-${n}`;
      const usage = {
        prompt_tokens: 100,
        completion_tokens: 4,
        // a program's first turn finds nothing cached, its later ones half their prompt
        prompt_tokens_details: { cached_tokens: n === 1 ? 0 : 50 },
      };
      const chat = req.url === "/v1/chat/completions";
      if (body["stream"] === true) {
        res.setHeader("content-type", "text/event-stream");
        const chunk = (choices: unknown[], extra = {}) =>
          `data: ${JSON.stringify({ choices, ...extra })}\n\n`;
        const piece = (t: string) => (chat ? { index: 0, delta: { content: t } } : { index: 0, text: t });
        res.write(chunk([chat ? { index: 0, delta: { role: "assistant", content: "" } } : piece("")]));
        res.write(chunk([piece(reply.slice(0, 5))]));
        res.write(chunk([piece(reply.slice(5))]));
        res.write(chunk([], { usage }));
        res.end("data: [DONE]\n\n");
      } else {
        res.setHeader("content-type", "application/json");
        const choice = chat
          ? { index: 0, message: { role: "assistant", content: reply } }
          : { index: 0, text: reply };
        res.end(JSON.stringify({ choices: [{ ...choice, finish_reason: "length" }], usage }));
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function program(id: string, turns: number, toolS = 0.01): TraceProgram {
  return {
    id,
    turns: Array.from({ length: turns }, (_, i) => ({
      input: 40 + 30 * i,
      cached: i === 0 ? 0 : 10 + 30 * i,
      output: 4,
      tool: i === turns - 1 ? null : ["ls", "grep", "python"][i % 3]!,
      toolS: i === turns - 1 ? null : toolS,
    })),
  };
}

function options(url: string, overrides: Partial<ReplayOptions> = {}): ReplayOptions {
  return {
    client: new ReplayHttpClient(url),
    api: "chat",
    model: "fake-model",
    programs: [program("a", 3), program("b", 3)],
    arrivalsS: [0, 0.02],
    seed: 1,
    counter: new CharsTokenCounter(4),
    tools: new SleepTools(),
    stream: true,
    requestTimeoutS: 5,
    drainTimeoutS: 5,
    programPrefix: "run1-",
    ...overrides,
  };
}

const info = { label: "t", url: "u", api: "chat", model: null, jps: 1, seed: 1, settings: [] };

describe("replay client and runner (fake server)", () => {
  let server: Awaited<ReturnType<typeof fakeServer>>;
  before(async () => {
    server = await fakeServer();
  });
  after(async () => {
    await server.close();
  });

  test("sends job_id, program_id, X-Program-Id, is_last_step and this_func_call; carries replies forward", async () => {
    server.seen.length = 0;
    const records = await runReplay(options(server.url));
    assert.equal(server.seen.length, 6);
    for (const id of ["run1-a", "run1-b"]) {
      const mine = server.seen.filter((s) => s.body["job_id"] === id);
      assert.equal(mine.length, 3);
      mine.forEach((s, i) => {
        assert.equal(s.path, "/v1/chat/completions");
        assert.equal(s.body["program_id"], id);
        assert.equal(s.headers["x-program-id"], id);
        assert.equal(s.body["is_last_step"], i === 2);
        assert.equal(s.body["this_func_call"], i === 2 ? undefined : ["ls", "grep"][i]);
        assert.equal(s.body["max_tokens"], 4);
        assert.equal(s.body["ignore_eos"], true);
        assert.equal(s.body["model"], "fake-model");
        assert.equal(s.body["stream"], true);
        assert.deepEqual(s.body["stream_options"], { include_usage: true });
        const messages = s.body["messages"] as { role: string; content: string }[];
        if (i > 0) {
          // the previous turn's messages, then the reply the server returned, then a new observation
          const prev = server.seen.filter((x) => x.body["job_id"] === id)[i - 1]!.body[
            "messages"
          ] as unknown[];
          assert.deepEqual(messages.slice(0, prev.length), prev);
          assert.deepEqual(messages[prev.length], { role: "assistant", content: `reply-${id}-${i}` });
          assert.equal(messages.length, prev.length + 2);
        }
      });
    }
    const run = summarizeReplay(info, records);
    assert.equal(run.completed, 2);
    assert.equal(run.programs, 2);
    assert.equal(run.ttft.count, 6);
    assert.equal(run.cached_token_ratio, 200 / 600);
    assert.equal(run.later_turns_cached_ratio, 0.5);
    assert.equal(run.tool_calls, 4);
    assert.deepEqual(run.errors, {});
    assert.ok(run.jct.mean > 0.02, "two tool sleeps at least");
    assert.equal(run.program_results!.filter((p) => p.jct_s !== null).length, 2);
  });

  test("completions API without streaming: a ChatML prompt string, the text reply", async () => {
    server.seen.length = 0;
    const records = await runReplay(
      options(server.url, {
        api: "completions",
        stream: false,
        model: null,
        programs: [program("c", 2)],
        arrivalsS: [0],
      }),
    );
    assert.equal(server.seen.length, 2);
    const [first, second] = server.seen;
    assert.equal(first!.path, "/v1/completions");
    assert.equal(first!.body["model"], undefined);
    assert.equal(first!.body["stream"], undefined);
    assert.match(String(first!.body["prompt"]), /^<\|im_start\|>system\n/);
    assert.ok(String(second!.body["prompt"]).includes("<|im_start|>assistant\nreply-run1-c-1<|im_end|>"));
    assert.ok(String(second!.body["prompt"]).startsWith(String(first!.body["prompt"])));
    const run = summarizeReplay(info, records);
    assert.equal(run.completed, 1);
    assert.equal(run.ttft.count, 0);
  });

  test("--duration-s stops starting programs; the rest are counted as not started", async () => {
    const programs = Array.from({ length: 20 }, (_, i) => program(`d${i}`, 2, 0));
    const arrivalsS = programs.map((_, i) => i * 0.05);
    const records = await runReplay(options(server.url, { programs, arrivalsS, durationS: 0.22 }));
    const run = summarizeReplay(info, records);
    assert.ok(run.programs >= 4 && run.programs <= 6, `${run.programs} started`);
    assert.equal(run.not_started, 20 - run.programs);
    assert.equal(run.completed, run.programs);
  });

  test("many programs in flight at once print no listener-leak warning", async () => {
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on("warning", onWarning);
    try {
      const programs = Array.from({ length: 16 }, (_, i) => program(`w${i}`, 2, 0.2));
      const records = await runReplay(options(server.url, { programs, arrivalsS: programs.map(() => 0) }));
      assert.equal(summarizeReplay(info, records).completed, 16);
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(warnings, []);
    } finally {
      process.off("warning", onWarning);
    }
  });

  test("the drain timeout abandons programs stuck on the server or in a tool", async () => {
    const hanging = await fakeServer((body) => (body["job_id"] === "run1-stuck" ? "hang" : "ok"));
    try {
      const start = performance.now();
      const records = await runReplay(
        options(hanging.url, {
          programs: [program("stuck", 2), program("slow-tool", 2, 60), program("quick", 1)],
          arrivalsS: [0, 0, 0],
          durationS: 0.05,
          drainTimeoutS: 0.3,
        }),
      );
      assert.ok(performance.now() - start < 3000);
      const byId = new Map(records.programs.map((p) => [p.traceId, p]));
      assert.equal(byId.get("stuck")!.status, "abandoned");
      assert.equal(byId.get("slow-tool")!.status, "abandoned");
      assert.equal(byId.get("slow-tool")!.turnsDone, 1);
      assert.equal(byId.get("quick")!.status, "completed");
      const run = summarizeReplay(info, records);
      assert.equal(run.abandoned, 2);
      assert.deepEqual(run.errors, { abandoned: 1 });
    } finally {
      await hanging.close();
    }
  });

  test("timeouts and HTTP errors fail the program with their kind and stop its turns", async () => {
    const failing = await fakeServer((body, seen) => {
      if (body["job_id"] === "run1-slow") return "hang";
      if (body["job_id"] === "run1-err" && seen.filter((s) => s.body["job_id"] === "run1-err").length === 2)
        return 500;
      return "ok";
    });
    try {
      const records = await runReplay(
        options(failing.url, {
          programs: [program("slow", 2), program("err", 4)],
          arrivalsS: [0, 0],
          requestTimeoutS: 0.2,
        }),
      );
      const run = summarizeReplay(info, records);
      assert.equal(run.failed, 2);
      assert.deepEqual(run.errors, { timeout: 1, http_500: 1 });
      assert.equal(failing.seen.filter((s) => s.body["job_id"] === "run1-err").length, 2);
      const err = records.programs.find((p) => p.traceId === "err")!;
      assert.equal(err.error, "http_500");
      assert.equal(err.turnsDone, 1);
    } finally {
      await failing.close();
    }
  });

  test("a connection refused is an error of its own kind", async () => {
    const closed = await fakeServer();
    const url = closed.url;
    await closed.close();
    const records = await runReplay(options(url, { programs: [program("x", 2)], arrivalsS: [0] }));
    assert.equal(records.programs[0]!.error, "connection_refused");
  });

  test("--run-tools runs harmless commands inside the sandbox directory", async () => {
    const dir = await mkdtemp(join(tmpdir(), "bench-tools-"));
    try {
      await writeFile(join(dir, "a.py"), "def f():\n    return 1\n");
      const tools = new SandboxTools(dir, 5);
      const records = await runReplay(
        options(server.url, { tools, programs: [program("t", 4)], arrivalsS: [0] }),
      );
      assert.equal(records.tools.length, 3);
      for (const t of records.tools) assert.equal(t.error, null, `${t.tool}: ${t.error}`);
      assert.deepEqual(sandboxCommand("python"), { file: "python3", args: ["-c", "pass"] });
      assert.equal(sandboxCommand("grep").file, "grep");
      assert.equal(sandboxCommand("str_replace_editor").file, "ls");
      assert.equal(sandboxCommand(null).file, "ls");
      assert.throws(() => new SandboxTools(join(dir, "missing"), 5), /does not exist/);
      assert.throws(() => new SandboxTools("/", 5), /refusing/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("a kept-alive connection the server dropped is retried on a new one (llama-server does this)", async () => {
    // This server drops every connection when its second request arrives, without answering.
    const perSocket = new WeakMap<object, number>();
    const dropping = createServer((req, res) => {
      const n = (perSocket.get(req.socket) ?? 0) + 1;
      perSocket.set(req.socket, n);
      if (n > 1) {
        req.socket.destroy();
        return;
      }
      req.resume();
      req.on("end", () => {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ choices: [{ index: 0, message: { content: "ok" } }] }));
      });
    });
    await new Promise<void>((resolve) => dropping.listen(0, "127.0.0.1", resolve));
    const client = new ReplayHttpClient(`http://127.0.0.1:${(dropping.address() as AddressInfo).port}`);
    try {
      for (let i = 0; i < 4; i++) {
        const reply = await client.complete({ api: "chat", body: {}, timeoutMs: 2000 });
        assert.equal(reply.text, "ok");
      }
    } finally {
      client.close();
      dropping.closeAllConnections();
      await new Promise<void>((resolve) => dropping.close(() => resolve()));
    }
  });

  test("base URLs with or without /v1 resolve to the same endpoints", () => {
    assert.equal(normalizeBaseUrl("http://127.0.0.1:8000/v1/").href, "http://127.0.0.1:8000/");
    assert.equal(new ReplayHttpClient("http://h:1/v1").endpoint("/v1/models").href, "http://h:1/v1/models");
    assert.equal(new ReplayHttpClient("http://h:1/x").endpoint("/v1/models").href, "http://h:1/x/v1/models");
    assert.throws(() => normalizeBaseUrl("ftp://h"), /http/);
  });
});
