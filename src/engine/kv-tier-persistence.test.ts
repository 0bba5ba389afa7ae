/**
 * The disk KV tier kept across restarts (`serve --disk-offload-persist`): a program's next turn after a
 * restart reloads its KV from disk instead of computing it again, and only where the states were saved with
 * the same model and KV settings; a crash leaves nothing a later start trusts; one server per directory.
 */
import assert from "node:assert/strict";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Engine } from "./engine.js";
import { createFakeEngine, defaultFakeReply } from "./fake-model-runner.js";
import { KvTierStore } from "./kv-tier-store.js";
import { chat, request, run } from "./test-support/engine-helpers.js";

let dir = "";
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "continuum-persist-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

function persistentEngine(tierDir: string, identity: string, diskBytes = 64 << 20): Engine {
  return createFakeEngine({
    policy: "vllm",
    kvCells: 4096,
    maxSeqs: 4,
    maxNumSeqs: 2,
    tiers: { cpuBytes: 8 << 20, diskBytes, diskDir: tierDir, persistIdentity: identity },
  });
}

const turn1 = chat(`inspect ${"the repository ".repeat(40)}`);

/** Serves a program's first turn, shuts down; returns the first turn's prompt and reply. */
async function firstLife(tierDir: string, identity: string) {
  const engine = persistentEngine(tierDir, identity);
  const prompt = engine.renderChat(turn1);
  const first = await run(engine, request("a1", prompt, { programId: "job-a" }));
  await engine.shutdown();
  return { prompt, reply: first.done.text, tokens: engine.countTokens(prompt) };
}

async function secondTurn(engine: Engine, reply: string) {
  const prompt = engine.renderChat([
    ...turn1,
    { role: "assistant", content: reply },
    { role: "tool", content: "ok" },
  ]);
  const second = await run(engine, request("a2", prompt, { programId: "job-a", isLastStep: true }));
  return { prompt, second };
}

describe("a persistent disk KV tier", () => {
  test("a program's next turn after a restart reloads its KV from disk", async () => {
    const tierDir = join(dir, "same");
    const { reply, tokens } = await firstLife(tierDir, "model-A");
    const engine = persistentEngine(tierDir, "model-A");
    try {
      assert.match(engine.kvSummary, /kept across restarts \(1 state \(.* MiB\) restored\)/);
      const { prompt, second } = await secondTurn(engine, reply);
      assert.ok(
        second.done.usage.cachedTokens > tokens - 16,
        `${second.done.usage.cachedTokens} of ${tokens}`,
      );
      assert.ok(engine.kvStats().restoredTokens > 0, JSON.stringify(engine.kvStats()));
      assert.equal(second.done.text, defaultFakeReply(prompt));
    } finally {
      await engine.shutdown();
    }
  });

  test("states saved for another model are not used, and their files go", async () => {
    const tierDir = join(dir, "other");
    const { reply } = await firstLife(tierDir, "model-A");
    const engine = persistentEngine(tierDir, "model-B");
    try {
      assert.match(engine.kvSummary, /not used: it was written for another model/);
      const { second } = await secondTurn(engine, reply);
      assert.equal(second.done.usage.cachedTokens, 0);
      assert.deepEqual(
        readdirSync(join(tierDir, "continuum-kv")).filter((f) => f.endsWith(".state")),
        [],
        "model-A's state files are deleted",
      );
    } finally {
      await engine.shutdown();
    }
  });

  test("after a crash (no index written at shutdown) nothing is reused and leftover files are deleted", async () => {
    const tierDir = join(dir, "crash");
    await firstLife(tierDir, "model-A");
    const kvDir = join(tierDir, "continuum-kv");
    // the next life took the index at start and died before writing one
    const crashed = new KvTierStore({
      cpuBytes: 0,
      diskBytes: 64 << 20,
      diskDir: tierDir,
      persistIdentity: "model-A",
    });
    assert.equal(crashed.restored?.states, 1);
    writeFileSync(join(kvDir, "lock"), "999999999"); // a pid no process has
    const store = new KvTierStore({
      cpuBytes: 0,
      diskBytes: 64 << 20,
      diskDir: tierDir,
      persistIdentity: "model-A",
    });
    assert.deepEqual(store.restored, { states: 0, bytes: 0, discarded: null });
    assert.deepEqual(readdirSync(kvDir), ["lock"]);
    await store.close([]);
    assert.ok(existsSync(join(kvDir, "index.json")), "an empty index is written at a clean shutdown");
  });

  test("a directory in use by another live server is refused", async () => {
    const tierDir = join(dir, "busy");
    const first = persistentEngine(tierDir, "model-A");
    try {
      writeFileSync(join(tierDir, "continuum-kv", "lock"), String(process.ppid));
      assert.throws(
        () => persistentEngine(tierDir, "model-A"),
        /in use by process \d+; give each server its own --disk-offload-dir/,
      );
    } finally {
      writeFileSync(join(tierDir, "continuum-kv", "lock"), String(process.pid));
      await first.shutdown();
    }
  });

  test("a smaller disk at restart keeps the most recently used states that fit", async () => {
    const tierDir = join(dir, "smaller");
    const first = persistentEngine(tierDir, "model-A");
    for (const [i, words] of [40, 41, 42].entries()) {
      await run(
        first,
        request(`p${i}`, first.renderChat(chat(`task ${i} ${"word ".repeat(words * 4)}`)), {
          programId: `job-${i}`,
        }),
      );
    }
    await first.shutdown();
    const full = persistentEngine(tierDir, "model-A");
    const saved = full.sequences.tiers?.all() ?? [];
    const sizes = saved.map((e) => e.bytes);
    const newest = saved.at(-1)?.owner;
    await full.shutdown();
    assert.equal(sizes.length, 3);
    const oneFits = persistentEngine(tierDir, "model-A", Math.max(...sizes));
    assert.match(oneFits.kvSummary, /\(1 state \(/);
    assert.equal(oneFits.sequences.tiers?.all()[0]?.owner, newest);
    await oneFits.shutdown();
  });
});
