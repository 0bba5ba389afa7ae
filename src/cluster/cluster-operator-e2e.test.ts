/**
 * `continuum cluster` as an operator runs it (the CLI in a process group of its own, as a terminal's
 * foreground job), 3 replicas of the tiny model: DELETE /v1/programs/{id} through the balancer reaches
 * the program's replica; the balancer's /metrics and /dashboard are the fleet's; a stream whose replica
 * is SIGKILLed ends with an SSE error event, and the replica is restarted, back and serving within 10 s;
 * Ctrl-C (SIGINT to the whole group) with requests in flight lets them finish, takes no new request,
 * and exits 0. Then a second Ctrl-C kills a cluster that is draining.
 */
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { llamaSkip } from "../engine/test-support/llama-skip.js";
import { haproxyMissing } from "./cluster.js";
import type { FleetState } from "./fleet.js";
import {
  type CliProcess,
  chatTurn,
  conversation,
  globalFetch,
  runContinuum,
  TINY_SERVE_FLAGS,
  waitForReplicasUp,
} from "./test-support/cluster-cli.js";

const skip = llamaSkip || haproxyMissing("haproxy") || false;
const PORT = 27000 + (process.pid % 300) * 16;

async function fleetState(url: string): Promise<FleetState> {
  return (await (await fetch(`${url}/dashboard/state`)).json()) as FleetState;
}

/** The replica whose state lists program `id` (running, pinned...), with its pid. */
async function replicaOf(
  url: string,
  id: string,
): Promise<{ name: string; url: string; pid: number | null }> {
  const fleet = await fleetState(url);
  const holder = fleet.replicas.find((r) =>
    ((r.state?.programs ?? []) as { id: string; state: string }[]).some(
      (p) => p.id === id && p.state !== "finished",
    ),
  );
  assert.ok(holder, `no replica holds ${id}`);
  return holder;
}

/** Requests a replica finished, from its own /metrics (0 while it does not answer). */
async function finishedOn(url: string): Promise<number> {
  try {
    const text = await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(1000) })).text();
    let n = 0;
    for (const m of text.matchAll(/^continuum:request_success_total\{[^}]*\} (\S+)$/gm)) n += Number(m[1]);
    return n;
  } catch {
    return 0;
  }
}

describe("continuum cluster, operated (real engine, tiny model)", { skip }, () => {
  let dir = "";
  let cluster: CliProcess;
  let url = "";
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "continuum-cluster-"));
    cluster = runContinuum([
      "cluster",
      "--replicas",
      "3",
      "--port",
      String(PORT),
      "--config-dir",
      dir,
      ...TINY_SERVE_FLAGS,
      "--drain-timeout",
      "30",
    ]);
    await cluster.waitFor(/^ {2}fleet view: /, 120_000);
    url = `http://127.0.0.1:${PORT}`;
    await waitForReplicasUp(url, 3, 120_000);
  });
  after(async () => {
    cluster.kill();
    await rm(dir, { recursive: true, force: true });
  });

  test("DELETE /v1/programs/{id} through the balancer reaches the program's replica, 6 of 6", async (t) => {
    const ids = ["agent-0", "agent 1", "team/agent-2", "agent-3", "ünï-4", "agent-5"];
    const first = await Promise.all(
      ids.map((id, p) =>
        chatTurn(globalFetch, url, id, conversation(p), { last: false, byHeader: p % 2 === 0 }),
      ),
    );
    assert.deepEqual(
      first.map((r) => r.status),
      ids.map(() => 200),
    );
    const holders = await Promise.all(ids.map((id) => replicaOf(url, id)));
    assert.ok(new Set(holders.map((h) => h.name)).size > 1, "the programs are spread over the replicas");
    const deleted = await Promise.all(
      ids.map(async (id) => {
        const response = await fetch(`${url}/v1/programs/${encodeURIComponent(id)}`, { method: "DELETE" });
        return { status: response.status, body: await response.json() };
      }),
    );
    assert.deepEqual(
      deleted.map((d) => d.status),
      ids.map(() => 200),
      JSON.stringify(deleted),
    );
    assert.deepEqual(
      deleted.map((d) => (d.body as { id: string }).id),
      ids,
    );
    t.diagnostic(
      `DELETE through the balancer: ${deleted.filter((d) => d.status === 200).length}/${ids.length} ended on their replica (${holders.map((h, i) => `${ids[i]}@${h.name}`).join(", ")})`,
    );
  });

  test("/metrics and /dashboard on the balancer's port are the fleet's, labelled by replica", async () => {
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.equal(metrics.match(/^# TYPE vllm:num_requests_running gauge$/gm)?.length, 1);
    for (const name of ["r1", "r2", "r3"]) {
      assert.match(metrics, new RegExp(`^vllm:num_requests_running\\{replica="${name}",`, "m"));
      assert.match(
        metrics,
        new RegExp(`^continuum:cluster_replica_up\\{replica="${name}",.*kind="started"\\} 1$`, "m"),
      );
      assert.match(
        metrics,
        new RegExp(`^continuum:cluster_replica_restarts_total\\{replica="${name}"\\} 0$`, "m"),
      );
    }
    for (let poll = 0; poll < 3; poll++) {
      const fleet = await fleetState(url);
      assert.deepEqual(
        fleet.replicas.map((r) => [r.name, r.up, r.state === null]),
        [
          ["r1", true, false],
          ["r2", true, false],
          ["r3", true, false],
        ],
      );
    }
    const page = await fetch(`${url}/dashboard`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<title>Continuum fleet<\/title>/);
  });

  test("a stream whose replica is SIGKILLed ends with an SSE error event; the replica is back and serving within 10 s", async (t) => {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "continuum-tiny",
        messages: conversation(40),
        max_tokens: 4000,
        ignore_eos: true,
        stream: true,
        job_id: "streamer",
      }),
    });
    assert.equal(response.status, 200);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = "";
    while (!text.includes("\n\n")) text += decoder.decode((await reader.read()).value);
    const victim = await replicaOf(url, "streamer");
    assert.ok(victim.pid);
    const killedAt = Date.now();
    process.kill(victim.pid, "SIGKILL");
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    const frames = text.split("\n\n").filter(Boolean);
    assert.equal(frames.at(-1), "data: [DONE]");
    const error = JSON.parse((frames.at(-2) as string).slice("data: ".length));
    assert.equal(error.error.code, "replica_lost", text.slice(-500));
    assert.ok(frames.length > 3, "tokens were streamed before the cut");

    // new programs, three at a time, until one lands on the restarted replica and is served there
    let served = 0;
    for (let i = 0; served === 0 && Date.now() - killedAt < 10_000; i += 3) {
      const answers = await Promise.all(
        [i, i + 1, i + 2].map((k) =>
          chatTurn(globalFetch, url, `after-${k}`, conversation(50 + k), { last: true, byHeader: false }),
        ),
      );
      assert.deepEqual(
        answers.map((a) => a.status),
        [200, 200, 200],
      );
      served = await finishedOn(victim.url);
      if (served === 0) await new Promise((r) => setTimeout(r, 100));
    }
    const backS = (Date.now() - killedAt) / 1000;
    assert.ok(served > 0, `${victim.name} served nothing within 10 s of its SIGKILL`);
    const back = await cluster.waitFor(
      new RegExp(`replica ${victim.name} is back \\(pid \\d+\\), (\\S+) s after`),
      1000,
    );
    const metrics = await (await fetch(`${url}/metrics`)).text();
    assert.match(
      metrics,
      new RegExp(`^continuum:cluster_replica_restarts_total\\{replica="${victim.name}"\\} 1$`, "m"),
    );
    assert.ok(
      cluster.lines.some((l) =>
        l.includes(`replica ${victim.name} (${victim.url}) exited (SIGKILL); restart 1 in 0.5 s`),
      ),
    );
    t.diagnostic(
      `${victim.name}: SIGKILL -> healthy again ${back[1]} s, -> serving a request through the balancer ${backS.toFixed(1)} s`,
    );
  });

  test("Ctrl-C with requests in flight: they finish, the balancer takes no new one, exit 0", async (t) => {
    const programs = [0, 1, 2, 3, 4, 5].map((p) => 60 + p);
    const messages = programs.map((p) => conversation(p));
    const firstTurns = Promise.all(
      programs.map((p, i) =>
        chatTurn(globalFetch, url, `drained-${p}`, messages[i] as object[], {
          last: false,
          byHeader: i % 2 === 0,
          maxTokens: 400,
        }),
      ),
    );
    let answered = false;
    void firstTurns.then(() => {
      answered = true;
    });
    // in flight on the replicas
    for (let running = 0; running === 0 && !answered; await new Promise((r) => setTimeout(r, 50))) {
      const metrics = await (await fetch(`${url}/metrics`)).text();
      for (const m of metrics.matchAll(/^vllm:num_requests_running\{[^}]*\} (\S+)$/gm))
        running += Number(m[1]);
    }
    assert.ok(!answered, "the requests were still in flight at the Ctrl-C");
    const interruptedAt = Date.now();
    cluster.signalGroup("SIGINT");
    await cluster.waitFor(/SIGINT, finishing the requests in flight/, 5000);
    let refused = false;
    for (const deadline = Date.now() + 5000; !refused && Date.now() < deadline; ) {
      refused = await fetch(`${url}/health`).then(
        async (r) => {
          await r.arrayBuffer();
          await new Promise((done) => setTimeout(done, 50));
          return false;
        },
        () => true,
      );
    }
    const first = await firstTurns;
    assert.deepEqual(
      first.map((r) => r.status),
      programs.map(() => 200),
    );
    assert.ok(refused, "the balancer took no new request once stopping");
    const code = await cluster.exited;
    const tookS = (Date.now() - interruptedAt) / 1000;
    assert.equal(code, 0, cluster.lines.slice(-30).join("\n"));
    assert.ok(
      !cluster.lines.some((l) => /^\[r\d\] continuum serve: SIGINT/.test(l)),
      "replicas got no Ctrl-C",
    );
    // the replicas were told to stop once nothing was in flight
    assert.equal(
      cluster.lines.filter((l) => /^\[r\d\] continuum serve: SIGTERM, nothing in flight, stopping/.test(l))
        .length,
      3,
      cluster.lines.slice(-30).join("\n"),
    );
    assert.equal(cluster.lines.filter((l) => /^\[r\d\] continuum serve: stopped$/.test(l)).length, 3);
    t.diagnostic(
      `Ctrl-C: ${first.length}/${first.length} in-flight requests answered 200, new connections refused; exit ${code} after ${tookS.toFixed(1)} s`,
    );
  });
});

/** Whether process `pid` is gone (or a zombie its new parent has yet to reap) within 2 s. */
async function gone(pid: number): Promise<boolean> {
  for (
    const deadline = Date.now() + 2000;
    Date.now() < deadline;
    await new Promise((r) => setTimeout(r, 50))
  ) {
    try {
      const stat = await readFile(`/proc/${pid}/stat`, "utf8");
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) return true;
    } catch {
      return true;
    }
  }
  return false;
}

describe("continuum cluster, a second Ctrl-C (real engine, tiny model)", { skip }, () => {
  test("kills a draining cluster at once: its replica and HAProxy are gone", async (t) => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-cluster-"));
    const port = PORT + 8;
    const cluster = runContinuum([
      "cluster",
      "--replicas",
      "1",
      "--port",
      String(port),
      "--config-dir",
      dir,
      ...TINY_SERVE_FLAGS,
    ]);
    try {
      const [, pid] = (await cluster.waitFor(/^ {2}r1 \S+ \(pid (\d+)\)$/, 120_000)) as unknown as [
        string,
        string,
      ];
      await cluster.waitFor(/^ {2}fleet view: /, 10_000);
      const url = `http://127.0.0.1:${port}`;
      const long = chatTurn(globalFetch, url, "long", conversation(1), {
        last: false,
        byHeader: true,
        maxTokens: 4000,
      }).catch(() => null);
      await new Promise((r) => setTimeout(r, 500));
      cluster.signalGroup("SIGINT");
      await cluster.waitFor(/finishing the requests in flight/, 5000);
      const secondAt = Date.now();
      cluster.signalGroup("SIGINT");
      assert.equal(await cluster.exited, 1);
      const tookS = (Date.now() - secondAt) / 1000;
      assert.ok(tookS < 5, `exited ${tookS} s after the second Ctrl-C`);
      await long;
      assert.ok(await gone(Number(pid)), "the replica was killed");
      await assert.rejects(fetch(`${url}/health`), "HAProxy is gone");
      t.diagnostic(`second Ctrl-C: exit 1 after ${tookS.toFixed(2)} s`);
    } finally {
      cluster.kill();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
