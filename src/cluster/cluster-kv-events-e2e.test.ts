/**
 * `continuum cluster --kv-events-endpoint 'tcp://*:P'` with two replicas of the built-in tiny model: each
 * replica publishes on a port of its own (P, P + 1) with a topic of its own, `kv@<host>-r<N>@<model>`, which
 * llm-d reads as the pod, and its own data-parallel rank; each one's replay socket resends its own batches.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { hostname, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, test } from "node:test";
import { KvEventSubscriber, requestReplay } from "../engine/test-support/kv-event-subscriber.js";
import { llamaSkip } from "../engine/test-support/llama-skip.js";
import { haproxyMissing, startCluster } from "./cluster.js";

const skip = llamaSkip || haproxyMissing("haproxy") || false;

function listens(port: number): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.once("error", () => done(false));
    server.listen(port, () => server.close(() => done(true)));
  });
}

/** A port P with P + 1 free too (the two replicas bind P + index). */
async function freePortPair(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((done) => {
      const server = createServer().listen(0, () => {
        const { port } = server.address() as { port: number };
        server.close(() => done(port));
      });
    });
    if (port < 65535 && (await listens(port)) && (await listens(port + 1))) return port;
  }
}

describe("continuum cluster: KV events per replica", { skip }, () => {
  test("two replicas publish different topics and ranks, each replayable from its own socket", async () => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-cluster-kv-"));
    const events = await freePortPair();
    const replay = await freePortPair();
    const balancer = await freePortPair();
    const lines: string[] = [];
    const cluster = await startCluster({
      replicas: 2,
      remote: [],
      replicaHost: "127.0.0.1",
      port: balancer - 1,
      host: "127.0.0.1",
      serveArgs: [
        "--builtin-model",
        "tiny",
        "--threads",
        "1",
        "--kv-events-endpoint",
        `tcp://*:${events}`,
        "--kv-events-replay-endpoint",
        `tcp://*:${replay}`,
      ],
      haproxy: "haproxy",
      configDir: dir,
      devices: [],
      command: [process.execPath, "--import", "tsx", resolve("src/cli/main.ts")],
      log: (line) => lines.push(line),
      maxConnections: 256,
      startTimeoutMs: 120_000,
      stopTimeoutMs: 20_000,
      drainTimeoutMs: 10_000,
    });
    const subscribers = [0, 1].map((i) => KvEventSubscriber.connect(`tcp://127.0.0.1:${events + i}`));
    try {
      await Promise.all(subscribers.map((s) => s.joined()));
      const pod = process.env["POD_IP"] || hostname();
      for (const [i, replica] of cluster.started.entries()) {
        const response = await fetch(`${replica.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            model: "continuum-tiny",
            messages: [
              { role: "user", content: `Replica ${i}: ${"list the files in the repository ".repeat(6)}` },
            ],
            max_tokens: 4,
          }),
        });
        assert.equal(response.status, 200);
        await response.arrayBuffer();
      }
      const topics: string[] = [];
      for (const [i, subscriber] of subscribers.entries()) {
        assert.ok(await subscriber.until(() => subscriber.batches.length > 0, 10_000), `r${i + 1} published`);
        const expected = `kv@${pod}-r${i + 1}@continuum-tiny`;
        for (const batch of subscriber.batches) {
          assert.equal(batch.topic, expected);
          assert.equal(batch.podId, `${pod}-r${i + 1}`, "llm-d's pod");
          assert.equal(batch.dataParallelRank, i);
        }
        topics.push(expected);
        const replayed = await requestReplay(`tcp://127.0.0.1:${replay + i}`, 0n);
        assert.deepEqual(
          replayed.map((b) => [b.topic, b.sequence]),
          subscriber.batches.map((b) => [b.topic, b.sequence]),
          `r${i + 1}'s replay resends what it published`,
        );
      }
      assert.notEqual(topics[0], topics[1]);
      assert.ok(
        lines.some(
          (line) =>
            line.startsWith("[r2]") &&
            line.includes(`on tcp://*:${events + 1}, topic ${topics[1]}, data-parallel rank 1`),
        ),
        "r2's banner names its endpoint, topic and rank",
      );
    } finally {
      await cluster.stop();
      for (const subscriber of subscribers) await subscriber.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
