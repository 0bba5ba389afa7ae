/**
 * `serve --disk-offload-persist` on llama.cpp (the built-in tiny model): a state saved by one process's
 * context restores into the next process's, and the turn runs as if computed from scratch; a start with other
 * KV settings does not take the states, nor a state file whose bytes are not the ones saved.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readdirSync, statSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Engine } from "../engine.js";
import { createLlamaEngine, type LlamaEngineOptions } from "../engine-factory.js";
import { isNativeAvailable } from "../native/llama-native.js";
import { chat, request, run } from "../test-support/engine-helpers.js";

const supported = process.platform === "linux" && process.arch === "x64" && isNativeAvailable();

describe("a persistent disk KV tier on llama.cpp", { skip: supported ? false : "no llama.cpp addon" }, () => {
  let dir = "";
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "continuum-persist-llama-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const options = (extra: Partial<LlamaEngineOptions> = {}): LlamaEngineOptions => ({
    builtinModel: "tiny",
    policy: "vllm",
    maxNumSeqs: 2,
    kvCacheTokens: 2048,
    threads: 1,
    cpuOffloadGb: 0.25,
    diskOffloadDir: dir,
    diskOffloadGb: 1,
    diskOffloadPersist: true,
    ...extra,
  });
  const turn1 = chat(`list the files of ${"the repository ".repeat(30)}`);
  const logprobs = { maxTokens: 6, logprobs: 0 };

  async function secondTurn(engine: Engine, reply: string) {
    const prompt = engine.renderChat([
      ...turn1,
      { role: "assistant", content: reply },
      { role: "tool", content: "README.md src" },
    ]);
    return run(engine, request("t2", prompt, { programId: "job", isLastStep: true, sampling: logprobs }));
  }

  test("the next process reloads a program's KV and decodes as from scratch", async () => {
    const first = await createLlamaEngine(options());
    const turn = await run(
      first,
      request("t1", first.renderChat(turn1), { programId: "job", sampling: { maxTokens: 6 } }),
    );
    const promptTokens = turn.done.usage.promptTokens;
    await first.shutdown();

    const second = await createLlamaEngine(options());
    const restored = await secondTurn(second, turn.done.text).finally(() => second.shutdown());
    assert.match(second.kvSummary, /kept across restarts \(1 state /);
    assert.ok(
      restored.done.usage.cachedTokens > promptTokens - 16,
      `${restored.done.usage.cachedTokens} of ${promptTokens} cached`,
    );
    assert.ok(second.kvStats().restoredTokens > 0);

    const fresh = await createLlamaEngine(options({ diskOffloadDir: join(dir, "fresh") }));
    const computed = await secondTurn(fresh, turn.done.text).finally(() => fresh.shutdown());
    assert.equal(computed.done.usage.cachedTokens, 0);
    assert.equal(restored.done.text, computed.done.text);
    assert.equal(restored.done.logprobs?.length, restored.done.usage.completionTokens);
    for (const [i, entry] of (restored.done.logprobs ?? []).entries()) {
      const other = computed.done.logprobs?.[i];
      assert.ok(other && Math.abs(entry.logprob - other.logprob) < 0.01, `token ${i}`);
    }
  });

  test("a state file overwritten with random bytes is named and not used: the turn is computed", async (t) => {
    const tierDir = join(dir, "random");
    const first = await createLlamaEngine(options({ diskOffloadDir: tierDir }));
    const turn = await run(
      first,
      request("t1", first.renderChat(turn1), { programId: "job", sampling: { maxTokens: 6 } }),
    );
    await first.shutdown();
    const kvDir = join(tierDir, "continuum-kv");
    const files = readdirSync(kvDir).filter((f) => f.endsWith(".state"));
    assert.equal(files.length, 1);
    const path = join(kvDir, files[0] as string);
    writeFileSync(path, randomBytes(statSync(path).size));

    const stderr: string[] = [];
    t.mock.method(process.stderr, "write", (chunk: string | Uint8Array) => {
      stderr.push(String(chunk));
      return true;
    });
    const second = await createLlamaEngine(options({ diskOffloadDir: tierDir }));
    const next = await secondTurn(second, turn.done.text).finally(() => second.shutdown());
    t.mock.restoreAll();
    assert.match(second.kvSummary, /kept across restarts \(1 state /);
    assert.ok(
      stderr.some((line) => line.includes(`${path} does not match the checksum it was saved with`)),
      stderr.join(""),
    );
    assert.equal(next.done.usage.cachedTokens, 0, "the random bytes were not restored");
    assert.equal(second.kvStats().restoredTokens, 0);
  });

  test("it needs a disk tier", async () => {
    await assert.rejects(
      createLlamaEngine({ builtinModel: "tiny", diskOffloadPersist: true }),
      /--disk-offload-persist needs a disk tier: --disk-offload-dir and --disk-offload-gb/,
    );
  });

  test("a start with another KV cache type does not take the states", async () => {
    const tierDir = join(dir, "dtype");
    const first = await createLlamaEngine(options({ diskOffloadDir: tierDir }));
    const turn = await run(
      first,
      request("t1", first.renderChat(turn1), { programId: "job", sampling: { maxTokens: 6 } }),
    );
    await first.shutdown();
    const second = await createLlamaEngine(options({ diskOffloadDir: tierDir, kvCacheType: "q8_0" }));
    const next = await secondTurn(second, turn.done.text).finally(() => second.shutdown());
    assert.match(
      second.kvSummary,
      /not used: it was written for another model, llama.cpp build or KV setting/,
    );
    assert.equal(next.done.usage.cachedTokens, 0);
  });
});
