/**
 * Models with sliding-window attention layers (Gemma 2/3, gpt-oss, Cohere 2): llama.cpp keeps, for those
 * layers, only each sequence's last window (older cells are taken by any sequence that needs room, even with
 * full-size caches, and a saved state leaves them out). A prefix reused from another request's longer
 * sequence, or restored from the tier and cut back, attended over keys that were gone: the first test read
 * 0.42 nats off a fresh run at its first token (-2.38 against -2.79), the second the same. The scheduler
 * offers such a prefix only where a sequence can give it whole (core/kv/sequences/sequence-map.ts), so the cached
 * tokens reported are the ones not computed again.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { SchedulingPolicy } from "../core/policy.js";
import { generateLlamaGguf } from "../gguf/llama-model.js";
import { Engine } from "./engine.js";
import type { OutputLogprob } from "./engine-api.js";
import type { EngineTierOptions } from "./engine-setup.js";
import { isNativeAvailable } from "./native/llama-native.js";
import { LlamaModelRunner } from "./runners/llama-model-runner.js";
import { type DoneEvent, fixedTtlPolicy, request, run, sleep } from "./test-support/engine-helpers.js";

const supported = process.platform === "linux" && process.arch === "x64" && isNativeAvailable();
const WINDOW = 32;
const BLOCK = 16;

describe("a sliding-window model (gemma3 arch, tiny) over llama.cpp", {
  skip: supported ? false : "no llama.cpp addon",
}, () => {
  let dir: string;
  let modelPath: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "continuum-swa-"));
    modelPath = join(dir, "gemma3-swa.gguf");
    await generateLlamaGguf(modelPath, {
      arch: "gemma3",
      seed: 7,
      contextLength: 8192,
      embeddingLength: 128,
      blockCount: 6,
      feedForwardLength: 256,
      headCount: 4,
      headCountKv: 1,
      vocabSize: 4096,
      slidingWindow: WINDOW,
      weightType: "f32",
    });
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function engine(
    policy: string | SchedulingPolicy = "vllm",
    tiers: EngineTierOptions = {},
    kvLayout: "unified" | "streams" = "unified",
    kvRunningOnly = false,
  ): Promise<Engine> {
    const runner = await LlamaModelRunner.open({
      modelPath,
      // streams: each of the 8 sequences gets kvCells / 8 cells, as many as the unified pool holds in all
      kvCells: kvLayout === "streams" ? 8 * 4096 : 4096,
      kvLayout,
      maxSeqs: 8,
      batchTokens: 256,
      threads: 1,
    });
    return new Engine({ runner, policy, maxNumSeqs: 4, maxNumBatchedTokens: 256, tiers, kvRunningOnly });
  }

  const words = Array.from({ length: 700 }, (_, i) => `w${(i * 7919) % 1000}`).join(" ");
  const long = `${words} and the first request goes on past its shared part`;
  const shared = `${words.slice(0, Math.floor(words.length * 0.5))} then the second one diverges`;
  const sampling = { maxTokens: 6, logprobs: 2 };

  /** Two greedy runs agree to float rounding: top logprobs within 0.01, up to the first near tie. */
  function assertSameRun(a: DoneEvent, b: DoneEvent): void {
    const [x, y] = [a.logprobs ?? [], b.logprobs ?? []];
    assert.equal(x.length, 6);
    for (let i = 0; i < x.length; i++) {
      const [a0, a1] = (x[i] as OutputLogprob).top;
      const [b0, b1] = (y[i] as OutputLogprob).top;
      assert.ok(a0 && a1 && b0 && b1);
      assert.ok(Math.abs(a0.logprob - b0.logprob) < 0.01, `token ${i}: ${a0.logprob} vs ${b0.logprob}`);
      // past a near tie the two runs may take different tokens
      if (a0.logprob - a1.logprob < 0.01 || b0.logprob - b1.logprob < 0.01) break;
    }
  }

  test("a prefix of another request's longer sequence is recomputed, and runs as it would from scratch", async () => {
    const warm = await engine();
    const fresh = await engine();
    try {
      assert.equal((warm.runner as LlamaModelRunner).slidingWindow, WINDOW);
      await run(warm, request("long", long, { sampling: { maxTokens: 2 } }));
      const reused = await run(warm, request("shared", shared, { sampling }));
      assert.equal(reused.done.usage.cachedTokens, 0, "nothing reported cached that was computed again");
      assertSameRun(reused.done, (await run(fresh, request("scratch", shared, { sampling }))).done);
    } finally {
      await Promise.all([warm.shutdown(), fresh.shutdown()]);
    }
  });

  for (const layout of ["unified", "streams"] as const)
    test(`the second request's recomputed prefix is kept whole for the third (${layout})`, async () => {
      const warm = await engine("vllm", {}, layout);
      const fresh = await engine("vllm", {}, layout);
      try {
        const third = `${words.slice(0, Math.floor(words.length * 0.5))} so a third one goes its own way`;
        await run(warm, request("long", long, { sampling: { maxTokens: 2 } }));
        const second = await run(warm, request("shared", shared, { sampling }));
        assert.match(warm.kvSummary, /sliding window of 32: a prefix programs share is kept as a checkpoint/);
        assert.equal(second.done.usage.cachedTokens, 0, "the second computes the prefix again");
        const kept = warm.kvStats().checkpointTokens;
        assert.ok(kept >= 256, `a checkpoint of the shared prefix: ${kept} tokens`);
        const reused = await run(warm, request("third", third, { sampling }));
        assert.equal(reused.done.usage.cachedTokens, kept, "the third takes it whole");
        assert.equal(warm.kvStats().copiedTokens, kept);
        assertSameRun(reused.done, (await run(fresh, request("scratch", third, { sampling }))).done);
      } finally {
        await Promise.all([warm.shutdown(), fresh.shutdown()]);
      }
    });

  test("the same prefix saved in the CPU tier is recomputed, and runs as it would from scratch", async () => {
    // only running sequences stay in the pool: the first request's goes to the tier
    const tiered = await engine(fixedTtlPolicy(30), { cpuBytes: 256 << 20 }, "unified", true);
    const fresh = await engine();
    try {
      await run(tiered, request("long", long, { programId: "job", sampling: { maxTokens: 2 } }));
      const restored = await run(tiered, request("shared", shared, { sampling }));
      assert.equal(tiered.kvStats().savedToTier, 1);
      assert.equal(
        tiered.kvStats().restoredTokens,
        0,
        "a saved state is restored only to be continued whole",
      );
      assert.equal(restored.done.usage.cachedTokens, 0);
      assertSameRun(restored.done, (await run(fresh, request("scratch", shared, { sampling }))).done);
    } finally {
      await Promise.all([tiered.shutdown(), fresh.shutdown()]);
    }
  });

  /** A first turn ending 8 positions past its last block (prompt and 9 generated tokens), and the next turn's ids. */
  async function twoTurns(e: Engine) {
    const words = (n: number) => Array.from({ length: n }, (_, i) => `w${(i * 7919) % 1000}`).join(" ");
    let n = 300;
    while ((e.runner.tokenize(words(n)).length + 9) % BLOCK !== 8) n++;
    const sampling9 = { maxTokens: 9, ignoreEos: true };
    const first = await run(
      e,
      request("t1", words(n), { programId: "job", sampling: sampling9, returnTokenIds: true }),
    );
    // the model's own tokens go on: the prompt's, the generated ones, then the tool's answer
    const said = [...(first.done.tokenIds?.prompt ?? []), ...(first.done.tokenIds?.output ?? [])];
    assert.equal(said.length % BLOCK, 8);
    const next = [...said, ...e.runner.tokenizeContinuation(" and then the tool said: 3 tests failed")];
    return { turn2: request("t2", "", { programId: "job", promptTokenIds: next, sampling }), said };
  }

  for (const via of ["its pinned sequence", "the CPU tier"] as const)
    test(`a program's next turn goes on from its whole sequence (from ${via}), and runs as it would from scratch`, async () => {
      const tiered = via === "the CPU tier";
      // with the tier, only running sequences stay in the pool: the pinned one waits in the tier
      const pinned = await engine(
        fixedTtlPolicy(30),
        tiered ? { cpuBytes: 256 << 20 } : {},
        "unified",
        tiered,
      );
      const fresh = await engine();
      try {
        const { turn2, said } = await twoTurns(pinned);
        const continued = await run(pinned, turn2);
        // the whole sequence, past its last whole block, is continued: every position the first turn
        // computed (all it said but its last token, sampled and never computed) is not computed again
        assert.equal(continued.done.usage.cachedTokens, said.length - 1);
        const kv = pinned.kvStats();
        assert.equal(tiered ? kv.restoredTokens : kv.takenOverTokens, said.length - 1);
        if (tiered) assert.equal(kv.savedToTier, 1);
        const scratch = await run(fresh, { ...turn2, requestId: "scratch" });
        assert.equal(scratch.done.usage.cachedTokens, 0);
        assertSameRun(continued.done, scratch.done);
      } finally {
        await Promise.all([pinned.shutdown(), fresh.shutdown()]);
      }
    });

  test("programs sharing a prefix run side by side in one unified pool, each copy counted (none runs out of cells)", async () => {
    const e = await engine();
    try {
      const words = (n: number) => Array.from({ length: n }, (_, i) => `w${(i * 7919) % 1000}`).join(" ");
      let n = 300;
      while (e.runner.tokenize(words(n)).length < 1100) n += 20;
      const prefix = words(n);
      // the first still decodes while the others arrive: they hit the prefix it holds
      const first = run(
        e,
        request("p0", `${prefix} task 0`, { sampling: { maxTokens: 60, ignoreEos: true } }),
      );
      while (e.kvStats().poolCellsUsed < 1100) await sleep(5);
      const others = [1, 2, 3].map((p) =>
        run(e, request(`p${p}`, `${prefix} task ${p}`, { sampling: { maxTokens: 4, ignoreEos: true } })),
      );
      // four copies of 1100+ tokens do not fit 4096 cells at once: one waits, none fails
      for (const { done } of await Promise.all([first, ...others]))
        assert.equal(done.finishReason, "length", JSON.stringify(done));
    } finally {
      await e.shutdown();
    }
  });
});
