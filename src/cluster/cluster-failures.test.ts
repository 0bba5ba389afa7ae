/**
 * `continuum cluster` (HAProxy and the supervisor) in front of replicas that fail the way hosts do, played
 * by FakeReplica (no model, so it runs in seconds): a balancer whose replicas are not up yet answers 503
 * in the APIs' error format until one is; a request on a replica that goes silent (its host cut off) is
 * retried on another within seconds, and ends with the API's error when none is left; meanwhile the fleet's
 * /metrics and /dashboard/state answer within 0.5 s and say which replica is down and why, with the
 * requests it lost and those retried elsewhere; stopping the cluster lets the requests in flight finish
 * (or cuts them at the drain timeout, and says so).
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { haproxyMissing, type RemoteReplica, type RunningCluster, startCluster } from "./cluster.js";
import type { FleetState } from "./fleet.js";
import { runContinuum } from "./test-support/cluster-cli.js";
import { FakeReplica } from "./test-support/fake-replica.js";

const skip = haproxyMissing("haproxy") || false;

/** A port nothing listens on now (the kernel's pick, released). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", done));
  const { port } = server.address() as { port: number };
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

async function fronting(
  remote: readonly RemoteReplica[],
  lines: string[],
  drainTimeoutMs = 10_000,
): Promise<{ cluster: RunningCluster; dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), "continuum-cluster-failures-"));
  const cluster = await startCluster({
    replicas: 0,
    remote,
    replicaHost: "127.0.0.1",
    port: await freePort(),
    host: "127.0.0.1",
    serveArgs: [],
    haproxy: "haproxy",
    configDir: dir,
    devices: [],
    command: [process.execPath],
    log: (line) => lines.push(line),
    maxConnections: 256,
    startTimeoutMs: 10_000,
    drainTimeoutMs,
    stopTimeoutMs: 10_000,
  });
  return { cluster, dir };
}

function chat(url: string, program: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-program-id": program },
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
  }).then(async (response) => ({
    status: response.status,
    body: (await response.json()) as Record<string, unknown>,
  }));
}

/** A GET of the fleet view, timed. */
async function timedGet(url: string): Promise<{ seconds: number; text: string }> {
  const started = performance.now();
  const text = await (await fetch(url)).text();
  return { seconds: (performance.now() - started) / 1000, text };
}

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("continuum cluster when replicas fail (HAProxy, fake replicas)", { skip }, () => {
  test("a balancer whose replica is not up yet starts and answers 503 in the APIs' error format until it is", async () => {
    const port = await freePort();
    const lines: string[] = [];
    const started = Date.now();
    const { cluster, dir } = await fronting([{ host: "127.0.0.1", port }], lines);
    let replica: FakeReplica | null = null;
    try {
      assert.ok(Date.now() - started < 10_000, "it does not wait for the replica");
      assert.ok(lines.some((l) => /r1 \(.*\) does not answer \/health yet/.test(l)));
      const early = await chat(cluster.url, "p");
      assert.equal(early.status, 503);
      assert.deepEqual(early.body, {
        type: "error",
        error: {
          type: "api_error",
          message: "no replica is up to serve this request; send it again shortly",
          code: "no_replica",
          param: null,
        },
      });
      replica = await FakeReplica.start("late", port);
      await until("the replica serves", async () => (await chat(cluster.url, "p")).status === 200, 10_000);
    } finally {
      await cluster.stop();
      await replica?.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("a replica gone silent mid-request: the request is retried on another within seconds, the fleet view answers in time and says why it is down", async (t) => {
    const replicas = [await FakeReplica.start("a"), await FakeReplica.start("b")];
    const lines: string[] = [];
    const { cluster, dir } = await fronting(
      replicas.map((r) => ({ host: "127.0.0.1", port: r.port })),
      lines,
    );
    try {
      await until(
        "both replicas up",
        async () => {
          const fleet = JSON.parse((await timedGet(`${cluster.url}/dashboard/state`)).text) as FleetState;
          return fleet.replicas.every((r) => r.balancer?.status === "UP");
        },
        10_000,
      );
      for (const r of replicas) r.holding = true;
      const answer = chat(cluster.url, "agent-1");
      await until("the request reached a replica", () => replicas.some((r) => r.chats.length > 0), 5_000);
      const victim = replicas.find((r) => r.chats.length > 0) as FakeReplica;
      const other = replicas.find((r) => r !== victim) as FakeReplica;
      const victimName = replicas.indexOf(victim) === 0 ? "r1" : "r2";
      other.release();
      const cutAt = performance.now();
      victim.goSilent();

      const views: number[] = [];
      let answered = false;
      void answer.then(() => {
        answered = true;
      });
      while (!answered && performance.now() - cutAt < 15_000) {
        for (const path of ["/metrics", "/dashboard/state"]) {
          views.push((await timedGet(`${cluster.url}${path}`)).seconds);
        }
      }
      const { status, body } = await answer;
      const retriedAfterS = (performance.now() - cutAt) / 1000;
      assert.equal(status, 200);
      assert.equal(body["replica"], other.name, "answered by the replica still up");
      assert.ok(retriedAfterS < 10, `answered ${retriedAfterS.toFixed(1)} s after its replica went silent`);
      assert.ok(
        Math.max(...views) < 0.5,
        `fleet view answered in ${Math.max(...views).toFixed(3)} s at most`,
      );

      // the fleet view says which replica is down and why, and that it had a request retried elsewhere
      await until(
        "the victim shows as down",
        async () => {
          const fleet = JSON.parse((await timedGet(`${cluster.url}/dashboard/state`)).text) as FleetState;
          return fleet.replicas.some((r) => r.name === victimName && !r.up);
        },
        10_000,
      );
      const fleet = JSON.parse((await timedGet(`${cluster.url}/dashboard/state`)).text) as FleetState;
      const down = fleet.replicas.find((r) => r.name === victimName);
      assert.ok(down);
      assert.equal(down.balancer?.status, "DOWN");
      assert.match(down.balancer?.check ?? "", /Layer7 timeout/);
      assert.match(down.error ?? "", /no answer/);
      assert.equal(down.balancer?.retried, 1);
      const metrics = (await timedGet(`${cluster.url}/metrics`)).text;
      assert.match(
        metrics,
        new RegExp(`^continuum:cluster_replica_up\\{replica="${victimName}",.*\\} 0$`, "m"),
      );
      assert.match(
        metrics,
        new RegExp(`^continuum:cluster_replica_retried_total\\{replica="${victimName}"\\} 1$`, "m"),
      );
      assert.match(metrics, /^continuum:fake_chats_total\{replica="r\d"\} 1$/m, "the live replica's samples");

      // the last replica goes silent too with a request on it: the client gets the API's error
      other.holding = true;
      const last = chat(cluster.url, "agent-1");
      await until("the request reached the last replica", () => other.chats.length === 2, 5_000);
      other.goSilent();
      const lost = await last;
      assert.equal(lost.status, 503);
      assert.equal((lost.body["error"] as { code: string }).code, "no_replica");
      t.diagnostic(
        `retried on the other replica ${retriedAfterS.toFixed(1)} s after its replica went silent; ` +
          `${views.length} fleet views meanwhile, the slowest ${Math.max(...views).toFixed(3)} s`,
      );
    } finally {
      await cluster.stop();
      for (const r of replicas) await r.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("stopping lets the requests in flight finish and takes no new ones; exit clean", async () => {
    const replica = await FakeReplica.start("a");
    const lines: string[] = [];
    const { cluster, dir } = await fronting([{ host: "127.0.0.1", port: replica.port }], lines);
    try {
      await until("the replica serves", async () => (await chat(cluster.url, "p")).status === 200, 10_000);
      replica.holding = true;
      const inFlight = chat(cluster.url, "p");
      await until("the request reached the replica", () => replica.chats.length === 2, 5_000);
      const stopped = cluster.stop();
      await until(
        "the balancer takes no new request",
        async () => {
          return fetch(`${cluster.url}/health`).then(
            () => false,
            () => true,
          );
        },
        5_000,
      );
      replica.release();
      assert.equal((await inFlight).status, 200);
      assert.equal(await stopped, true);
    } finally {
      await cluster.stop();
      await replica.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("stopping cuts what is still in flight at the drain timeout, and says so", async () => {
    const replica = await FakeReplica.start("a");
    const { cluster, dir } = await fronting([{ host: "127.0.0.1", port: replica.port }], [], 500);
    try {
      await until("the replica serves", async () => (await chat(cluster.url, "p")).status === 200, 10_000);
      replica.holding = true;
      const inFlight = chat(cluster.url, "p").catch(() => null);
      await until("the request reached the replica", () => replica.chats.length === 2, 5_000);
      assert.equal(await cluster.stop(), false);
      assert.equal(await inFlight, null, "the request was cut");
    } finally {
      await replica.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("a supervisor killed outright (SIGKILL, no exit handler) takes its HAProxy with it: the port is free within seconds", async () => {
    const replica = await FakeReplica.start("a");
    const dir = await mkdtemp(join(tmpdir(), "continuum-cluster-killed-"));
    const port = await freePort();
    const cluster = runContinuum([
      "cluster",
      "--replicas",
      "0",
      "--replica",
      replica.url,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--config-dir",
      dir,
    ]);
    try {
      await cluster.waitFor(/^ {2}fleet view: /, 60_000);
      await until(
        "the replica serves",
        async () => (await chat(`http://127.0.0.1:${port}`, "p")).status === 200,
        10_000,
      );
      // the supervisor alone, as the OOM killer or `kill -9 <pid>` would
      process.kill(cluster.child.pid as number, "SIGKILL");
      await until(
        "nothing listens on the balancer's port",
        () =>
          fetch(`http://127.0.0.1:${port}/health`).then(
            () => false,
            () => true,
          ),
        5_000,
      );
    } finally {
      cluster.kill();
      await replica.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
