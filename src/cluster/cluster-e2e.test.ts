/**
 * `continuum cluster` end to end: 3 replicas of the built-in tiny model behind HAProxy on 127.0.0.1.
 * 12 agent programs of 4 turns (half name their program by header, half by the body's job_id): every
 * returning turn finds its program's KV on the replica that served the previous turn; then one replica
 * is killed while turns are in flight: its programs finish on the others, every request gets exactly
 * one answer, and the cluster stops cleanly. And Responses API conversations that name no program find their
 * responses on the replica that kept them; a replica told to stop finishes its requests in flight while
 * new programs go elsewhere, then stops by itself; a drained replica's programs find their KV after its
 * restart with a persistent disk tier.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, test } from "node:test";
import { llamaSkip } from "../engine/test-support/llama-skip.js";
import { haproxyMissing, type RunningCluster, startCluster } from "./cluster.js";
import type { FleetState } from "./fleet.js";

const skip = llamaSkip || haproxyMissing("haproxy") || false;
const PROGRAMS = 12;
const PORT = 18400 + (process.pid % 500) * 24;

interface Turn {
  readonly status: number;
  readonly cachedTokens: number;
  readonly text: string;
}

async function turn(
  cluster: RunningCluster,
  program: number,
  messages: object[],
  last: boolean,
  maxTokens = 6,
): Promise<Turn> {
  const byHeader = program % 2 === 0;
  const id = `agent-${program}`;
  const response = await fetch(`${cluster.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(byHeader ? { "X-Program-Id": id } : {}) },
    body: JSON.stringify({
      model: "continuum-tiny",
      messages,
      max_tokens: maxTokens,
      ...(maxTokens > 6 ? { ignore_eos: true } : {}),
      temperature: 0,
      is_last_step: last,
      ...(byHeader ? {} : { job_id: id }),
    }),
  });
  const body = (await response.json()) as {
    choices?: { message: { content: string } }[];
    usage?: { prompt_tokens_details?: { cached_tokens?: number } };
  };
  return {
    status: response.status,
    cachedTokens: body.usage?.prompt_tokens_details?.cached_tokens ?? 0,
    text: body.choices?.[0]?.message.content ?? "",
  };
}

async function threeReplicas(
  port: number,
  dir: string,
  lines: string[],
  extraServeArgs: readonly string[] = [],
): Promise<RunningCluster> {
  return startCluster({
    replicas: 3,
    remote: [],
    replicaHost: "127.0.0.1",
    port,
    host: "127.0.0.1",
    serveArgs: [
      "--builtin-model",
      "tiny",
      "--threads",
      "1",
      "--cpu-offload-gb",
      "0",
      "--drain-timeout",
      "60",
      ...extraServeArgs,
    ],
    haproxy: "haproxy",
    configDir: dir,
    devices: [],
    command: [process.execPath, "--import", "tsx", resolve("src/cli/main.ts")],
    log: (line) => lines.push(line),
    maxConnections: 4096,
    startTimeoutMs: 120_000,
    drainTimeoutMs: 60_000,
    stopTimeoutMs: 20_000,
  });
}

/** Requests a replica runs or queues now, from its own /metrics. */
async function inFlightOn(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^vllm:num_requests_(?:running|waiting)\{[^}]*\} (\S+)$/gm))
    n += Number(m[1]);
  return n;
}

/** Requests a replica finished, from its own /metrics. */
async function finishedOn(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  let n = 0;
  for (const m of text.matchAll(/^continuum:request_success_total\{[^}]*\} (\S+)$/gm)) n += Number(m[1]);
  return n;
}

/**
 * Responses API conversations that name no program, as OpenAI's docs write them (`previous_response_id`
 * alone), and a background response polled and cancelled by its id: each request finds the response on
 * the replica that answered it, though the balancer spreads what names no program over all three.
 */
async function respondedConversations(cluster: RunningCluster): Promise<void> {
  const post = async (path: string, body?: object) => {
    const response = await fetch(`${cluster.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, body: (await response.json()) as { id: string; status: string } };
  };
  const statuses: number[] = [];
  await Promise.all(
    [0, 1, 2, 3, 4, 5].map(async (c) => {
      let previous: string | null = null;
      for (let t = 0; t < 4; t++) {
        const created = await post("/v1/responses", {
          model: "continuum-tiny",
          input: `Conversation ${c}, step ${t}.`,
          max_output_tokens: 4,
          ...(previous ? { previous_response_id: previous } : {}),
        });
        statuses.push(created.status);
        previous = created.body.id;
        const got = await fetch(`${cluster.url}/v1/responses/${previous}`);
        await got.arrayBuffer();
        statuses.push(got.status);
      }
      const background = await post("/v1/responses", {
        model: "continuum-tiny",
        input: "Count to a thousand.",
        max_output_tokens: 200,
        background: true,
      });
      statuses.push(background.status);
      // found: cancelled (200), or a 400 when it ended before the cancel came (the tiny model is quick)
      const cancel = await post(`/v1/responses/${background.body.id}/cancel`);
      statuses.push(cancel.status === 400 ? 200 : cancel.status);
      const removed = await fetch(`${cluster.url}/v1/responses/${background.body.id}`, { method: "DELETE" });
      await removed.arrayBuffer();
      statuses.push(removed.status);
    }),
  );
  assert.deepEqual(
    statuses.filter((status) => status !== 200),
    [],
    "every request found its response",
  );
}

/**
 * Conversations of the Conversations API, created on whichever replica is least loaded: each later request
 * (responses naming the conversation by id and as `{ id }`, its items, its delete) finds it there, and the
 * conversation holds every turn.
 */
async function keptConversations(cluster: RunningCluster): Promise<void> {
  const call = async (method: string, path: string, body?: object) => {
    const response = await fetch(`${cluster.url}${path}`, {
      method,
      headers: { "content-type": "application/json" },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, body: (await response.json()) as { id: string; data: unknown[] } };
  };
  const statuses: number[] = [];
  const itemCounts = await Promise.all(
    [0, 1, 2, 3, 4, 5].map(async (c) => {
      const created = await call("POST", "/v1/conversations", { metadata: { c: String(c) } });
      statuses.push(created.status);
      const { id } = created.body;
      for (let t = 0; t < 3; t++) {
        const turn = await call("POST", "/v1/responses", {
          model: "continuum-tiny",
          input: `Conversation ${c}, step ${t}.`,
          max_output_tokens: 4,
          conversation: t % 2 === 0 ? id : { id },
        });
        statuses.push(turn.status);
      }
      const items = await call("GET", `/v1/conversations/${id}/items?limit=100`);
      statuses.push(items.status);
      statuses.push((await call("DELETE", `/v1/conversations/${id}`)).status);
      return items.body.data?.length;
    }),
  );
  assert.deepEqual(
    statuses.filter((status) => status !== 200),
    [],
    "every request found its conversation",
  );
  assert.deepEqual(itemCounts, [6, 6, 6, 6, 6, 6], "each conversation holds its three inputs and outputs");
}

describe("continuum cluster behind HAProxy (real engine, tiny model)", { skip }, () => {
  test("program-sticky turns, failover when a replica dies, exactly one answer each, clean stop", async () => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-cluster-"));
    const lines: string[] = [];
    const cluster = await threeReplicas(PORT, dir, lines);
    try {
      const conversations = Array.from({ length: PROGRAMS }, (_, p) => [
        { role: "system", content: `You are agent ${p}. Reply with a bash block.` },
        { role: "user", content: `Task ${p}: list the files of project ${p * 7}.` },
      ]);
      const results: Turn[][] = conversations.map(() => []);
      const runTurn = async (p: number, t: number) => {
        const messages = conversations[p] as object[];
        const answer = await turn(cluster, p, messages, t === 3);
        (results[p] as Turn[]).push(answer);
        messages.push({ role: "assistant", content: answer.text });
        messages.push({ role: "user", content: `Output of turn ${t}: ok. Next step.` });
      };
      for (const t of [0, 1]) await Promise.all(conversations.map((_, p) => runTurn(p, t)));
      // turn 3 goes out, and a replica dies under it
      const third = Promise.all(conversations.map((_, p) => runTurn(p, 2)));
      const victim = cluster.started[1];
      assert.ok(victim);
      victim.process.kill("SIGKILL");
      const victimExited = victim.exited;
      await third;
      await Promise.all(conversations.map((_, p) => runTurn(p, 3)));

      for (const [p, turns] of results.entries()) {
        assert.deepEqual(
          turns.map((r) => r.status),
          [200, 200, 200, 200],
          `program ${p}: one answer per request`,
        );
        assert.ok((turns[1] as Turn).cachedTokens > 0, `program ${p}: turn 2 reused turn 1's KV`);
        assert.ok((turns[3] as Turn).cachedTokens > 0, `program ${p}: turn 4 reused turn 3's KV`);
      }
      assert.equal(await victimExited, null, "the victim was killed");
    } finally {
      await cluster.stop();
      await rm(dir, { recursive: true, force: true });
    }
    for (const replica of cluster.started.filter((r) => r.name !== "r2")) {
      assert.equal(
        await replica.exited,
        0,
        `${replica.name} drained and exited cleanly: ${lines.join("\n")}`,
      );
    }
  });

  test("Responses API chains and conversations naming no program find their state on the replica that kept it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-cluster-"));
    const cluster = await threeReplicas(PORT + 16, dir, []);
    try {
      await respondedConversations(cluster);
      await keptConversations(cluster);
    } finally {
      await cluster.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("a replica told to stop finishes its requests in flight, sends new programs elsewhere meanwhile, and stops once they are done", async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-cluster-"));
    const lines: string[] = [];
    const cluster = await threeReplicas(PORT + 8, dir, lines);
    try {
      const conversation = (p: number) => [
        { role: "system", content: `You are agent ${p}. Reply with a bash block.` },
        { role: "user", content: `Task ${p}: find the failing test in module ${p * 11}.` },
      ];
      const old = Array.from({ length: 9 }, (_, p) => conversation(p));
      const results: Turn[][] = old.map(() => []);
      const runTurn = async (p: number, t: number, last: boolean, maxTokens?: number) => {
        const messages = old[p] as object[];
        const answer = await turn(cluster, p, messages, last, maxTokens);
        (results[p] as Turn[]).push(answer);
        messages.push({ role: "assistant", content: answer.text });
        messages.push({ role: "user", content: `Output of step ${t}: 1 failed. Go on.` });
      };
      for (const t of [0, 1]) await Promise.all(old.map((_, p) => runTurn(p, t, false)));

      // long third turns go out; r1 is told to stop while it runs some of them
      const third = Promise.all(old.map((_, p) => runTurn(p, 2, false, 400)));
      const drained = cluster.started[0];
      assert.ok(drained);
      let inFlight = 0;
      while (inFlight === 0) {
        inFlight = await inFlightOn(drained.url);
        await new Promise((r) => setTimeout(r, 20));
      }
      const signalledAt = Date.now();
      drained.process.kill("SIGTERM");
      const drainedExit = drained.exited.then((code) => ({
        code,
        afterS: (Date.now() - signalledAt) / 1000,
      }));
      const freshIds = Array.from({ length: 6 }, (_, i) => 100 + i);
      const fresh = await Promise.all(freshIds.map((p) => turn(cluster, p, conversation(p), true)));
      assert.deepEqual(
        fresh.map((r) => r.status),
        freshIds.map(() => 200),
      );
      // the new programs were served by the others: each one is listed (finished) by r2 or r3
      const fleet = (await (await fetch(`${cluster.url}/dashboard/state`)).json()) as FleetState;
      const holders = freshIds.map((p) =>
        fleet.replicas
          .filter((r) => ((r.state?.programs ?? []) as { id: string }[]).some((q) => q.id === `agent-${p}`))
          .map((r) => r.name),
      );
      for (const holder of holders)
        assert.ok(holder.length === 1 && holder[0] !== "r1", JSON.stringify(holders));

      await third;
      const { code, afterS } = await drainedExit;
      assert.equal(
        code,
        0,
        lines
          .filter((l) => l.includes("r1"))
          .slice(-40)
          .join("\n"),
      );
      assert.ok(afterS < 60, `r1 stopped ${afterS} s after SIGTERM, before its --drain-timeout`);
      assert.ok(
        lines.some((l) => /^\[r1\] continuum serve: SIGTERM, finishing \d+ request\(s\) in flight/.test(l)),
        lines.filter((l) => l.startsWith("[r1]")).join("\n"),
      );
      await Promise.all(old.map((_, p) => runTurn(p, 3, true)));
      for (const turns of results) {
        assert.deepEqual(
          turns.map((r) => r.status),
          [200, 200, 200, 200],
        );
      }
      t.diagnostic(
        `r1 had ${inFlight} request(s) in flight at SIGTERM and stopped ${afterS.toFixed(1)} s later (exit 0); ` +
          `6 new programs meanwhile on ${holders.map((h) => h[0]).join(", ")}; 36/36 turns of the 9 programs answered 200`,
      );
    } finally {
      await cluster.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("a replica restarted with a persistent disk tier reloads its programs' KV from disk", async () => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-cluster-"));
    const lines: string[] = [];
    const kvDir = join(dir, "kv");
    const persistent = ["--disk-offload-dir", kvDir, "--disk-offload-gb", "1", "--disk-offload-persist"];
    const cluster = await threeReplicas(PORT + 16, dir, lines, [...persistent, "--drain-timeout", "1"]);
    try {
      const conversations = Array.from({ length: 6 }, (_, p) => [
        { role: "system", content: `You are agent ${p}. Reply with a bash block.` },
        { role: "user", content: `Task ${p}: read the failing test of package ${p * 5}.` },
      ]);
      const first = await Promise.all(conversations.map((messages, p) => turn(cluster, p, messages, false)));
      const restarted = cluster.started[0];
      assert.ok(restarted);
      assert.ok((await finishedOn(restarted.url)) > 0, "r1 serves some of the programs");
      restarted.process.kill("SIGTERM");
      // back, and up in HAProxy's view (its programs' turns go elsewhere while it is down)
      for (let i = 0; i < 600 && !lines.some((l) => l.includes("by_program/r1 is UP")); i++)
        await new Promise((r) => setTimeout(r, 100));
      assert.ok(
        lines.some((l) =>
          /^\[r1\].*disk tier 1 GiB kept across restarts \(\d+ states? \(.*\) restored\)/.test(l),
        ),
        lines.join("\n"),
      );
      const second = await Promise.all(
        conversations.map((messages, p) =>
          turn(
            cluster,
            p,
            [
              ...messages,
              { role: "assistant", content: first[p]?.text },
              { role: "user", content: "1 failed." },
            ],
            true,
          ),
        ),
      );
      for (const [p, answer] of second.entries()) {
        assert.equal(answer.status, 200);
        assert.ok(answer.cachedTokens > 0, `program ${p}: its KV was kept across r1's restart`);
      }
    } finally {
      await cluster.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
