/**
 * The disk KV tier kept across restarts (`serve --disk-offload-persist`): a program's next turn after a
 * restart reloads its KV from disk instead of computing it again, and only where the states were saved with
 * the same model and KV settings; a process killed keeps what its index named; a state file whose bytes are not
 * the ones saved is named and not used; one server per directory.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { TokenIdContent } from "../../core/kv/token-content.js";
import type { Engine } from "../engine.js";
import { chat, request, run } from "../test-support/engine-helpers.js";
import { createFakeEngine, defaultFakeReply } from "../test-support/fake-model-runner.js";
import { CorruptStateError, PersistentTierDir } from "./kv-tier-persistence.js";
import { KvTierStore } from "./kv-tier-store.js";

let dir = "";
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "continuum-persist-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

function persistentEngine(
  tierDir: string,
  identity: string,
  {
    diskBytes = 64 << 20,
    report = () => {},
  }: { diskBytes?: number; report?: (message: string) => void } = {},
): Engine {
  return createFakeEngine({
    policy: "vllm",
    kvCells: 4096,
    maxSeqs: 4,
    maxNumSeqs: 2,
    tiers: { cpuBytes: 8 << 20, diskBytes, diskDir: tierDir, persistIdentity: identity, report },
  });
}

/** The state files in the tier's directory. */
function stateFiles(kvDir: string): string[] {
  return readdirSync(kvDir).filter((f) => f.endsWith(".state"));
}

/** The state files the tier's index names now. */
function indexedFiles(kvDir: string): string[] {
  try {
    const index = JSON.parse(readFileSync(join(kvDir, "index.json"), "utf8")) as {
      states: { file: string }[];
    };
    return index.states.map((s) => s.file);
  } catch {
    return [];
  }
}

async function until(done: () => boolean, timeoutMs = 5_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return true;
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

  test("kill -9 after a clean restart keeps the earlier states: the index is kept, and rewritten as states change", async () => {
    const tierDir = join(dir, "crash");
    const { reply, tokens } = await firstLife(tierDir, "model-A");
    const kvDir = join(tierDir, "continuum-kv");
    // the second life takes the states, saves one more to disk and is killed: it never closes
    const killed = new KvTierStore({
      cpuBytes: 0,
      diskBytes: 64 << 20,
      diskDir: tierDir,
      persistIdentity: "model-A",
    });
    assert.equal(killed.restored?.states, 1);
    const content = new TokenIdContent(
      Array.from({ length: 64 }, (_, i) => 9000 + i),
      16,
    );
    const entry = {
      id: 7,
      content,
      length: 64,
      owner: "job-b",
      bytes: 4096,
      tier: "disk" as const,
      lastUse: 1,
    };
    killed.describeEntries((id) => (id === entry.id ? entry : undefined));
    const before = stateFiles(kvDir);
    await killed.save(entry.id, "disk", async (take) => take(4096).fill(7));
    const newFile = stateFiles(kvDir).find((f) => !before.includes(f)) ?? "";
    assert.ok(
      await until(() => indexedFiles(kvDir).includes(newFile)),
      "the index names the new state without a shutdown",
    );
    writeFileSync(join(kvDir, "lock"), "999999999"); // the killed process's pid, no process's now
    const engine = persistentEngine(tierDir, "model-A");
    try {
      assert.match(engine.kvSummary, /kept across restarts \(2 states \(/);
      const { second } = await secondTurn(engine, reply);
      assert.ok(
        second.done.usage.cachedTokens > tokens - 16,
        `${second.done.usage.cachedTokens} of ${tokens}`,
      );
    } finally {
      await engine.shutdown();
    }
  });

  test("a state file overwritten with other bytes is named when read and not used; its program computes again", async () => {
    const tierDir = join(dir, "corrupt");
    const { reply, tokens } = await firstLife(tierDir, "model-A");
    const kvDir = join(tierDir, "continuum-kv");
    const [file] = readdirSync(kvDir).filter((f) => f.endsWith(".state"));
    assert.ok(file);
    const size = statSync(join(kvDir, file)).size;
    writeFileSync(join(kvDir, file), randomBytes(size));
    const reports: string[] = [];
    const engine = persistentEngine(tierDir, "model-A", { report: (message) => reports.push(message) });
    try {
      // its size is the one written: found at start, refused when read
      assert.match(engine.kvSummary, /1 state \(.*\) restored/);
      const { prompt, second } = await secondTurn(engine, reply);
      assert.deepEqual(reports, [
        `disk KV tier: ${join(kvDir, file)} does not match the checksum it was saved with; its state is not used`,
      ]);
      assert.ok(second.done.usage.cachedTokens < tokens - 16, `${second.done.usage.cachedTokens} cached`);
      assert.equal(engine.kvStats().restoredTokens, 0, "nothing restored from the corrupted file");
      assert.equal(second.done.text, defaultFakeReply(prompt));
      assert.ok(await until(() => !indexedFiles(kvDir).includes(file)), "the index drops it");
    } finally {
      await engine.shutdown();
    }
    assert.ok(!existsSync(join(kvDir, file)), "and its file is deleted");
  });

  test("a truncated state file is named at start and not used", async () => {
    const tierDir = join(dir, "truncated");
    const { reply } = await firstLife(tierDir, "model-A");
    const kvDir = join(tierDir, "continuum-kv");
    const [file] = readdirSync(kvDir).filter((f) => f.endsWith(".state"));
    assert.ok(file);
    const size = statSync(join(kvDir, file)).size;
    truncateSync(join(kvDir, file), 100);
    const engine = persistentEngine(tierDir, "model-A");
    assert.ok(!existsSync(join(kvDir, file)), "its file is deleted at start");
    try {
      assert.match(
        engine.kvSummary,
        new RegExp(`no states found; not used: ${file} is 100 bytes, not the ${size} written \\(truncated`),
      );
      const { second } = await secondTurn(engine, reply);
      assert.ok(second.done.usage.cachedTokens < 16, `${second.done.usage.cachedTokens} cached`);
    } finally {
      await engine.shutdown();
    }
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
    const oneFits = persistentEngine(tierDir, "model-A", { diskBytes: Math.max(...sizes) });
    assert.match(oneFits.kvSummary, /\(1 state \(/);
    assert.equal(oneFits.sequences.tiers?.all()[0]?.owner, newest);
    await oneFits.shutdown();
  });

  test("a byte changed anywhere in a large state file is caught (the checksum covers it chunk by chunk)", async () => {
    const kvDir = join(dir, "large", "continuum-kv");
    const reports: string[] = [];
    const { dir: tier } = PersistentTierDir.open(
      kvDir,
      "model-A",
      () => [{ file: "seq-1.state", lastUse: 1 }],
      (m) => reports.push(m),
    );
    const data = Buffer.alloc(40 << 20, 7);
    const record = { tokens: "", rootHash: 1, length: 16, owner: null, bytes: data.length };
    await tier.writeState("seq-1.state", data, record);
    assert.equal((await tier.readState("seq-1.state")).length, data.length);
    const path = join(kvDir, "seq-1.state");
    const changed = readFileSync(path);
    changed[(36 << 20) + 5] = 8; // past the first two chunks
    writeFileSync(path, changed);
    await assert.rejects(tier.readState("seq-1.state"), CorruptStateError);
    assert.equal(reports.length, 1);
    assert.match(reports[0] ?? "", /seq-1\.state does not match the checksum it was saved with/);
    await tier.close();
  });
});
