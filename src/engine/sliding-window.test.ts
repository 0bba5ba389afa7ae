/**
 * Models with sliding-window attention layers (Gemma 2/3, gpt-oss, Cohere 2): llama.cpp's cache for those
 * layers keeps only a sequence's last window unless told to keep everything. The engine reuses any cached
 * prefix (another request's, or a shorter one of a program's own), so a prefix whose last window had been
 * overwritten would run on missing keys: the test below read 0.42 nats off at the first token (-2.38
 * against -2.79) before the runner asked llama.cpp for full-size caches.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { Engine } from "./engine.js";
import type { OutputLogprob } from "./engine-api.js";
import { generateLlamaGguf } from "./gguf/llama-model.js";
import { LlamaModelRunner } from "./llama-model-runner.js";
import { isNativeAvailable } from "./native/llama-native.js";
import { request, run } from "./test-support/engine-helpers.js";

const supported = process.platform === "linux" && process.arch === "x64" && isNativeAvailable();
const WINDOW = 32;

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

  async function engine(): Promise<Engine> {
    const runner = await LlamaModelRunner.open({
      modelPath,
      kvCells: 4096,
      maxSeqs: 8,
      batchTokens: 256,
      threads: 1,
    });
    return new Engine({ runner, policy: "vllm", maxNumSeqs: 4, maxNumBatchedTokens: 256 });
  }

  test("a prefix cached by a longer request runs as it would from scratch", async () => {
    const words = Array.from({ length: 700 }, (_, i) => `w${(i * 7919) % 1000}`).join(" ");
    const long = `${words} and the first request goes on past its shared part`;
    const shared = `${words.slice(0, Math.floor(words.length * 0.5))} then the second one diverges`;
    const sampling = { maxTokens: 6, logprobs: 2 };
    const warm = await engine();
    const fresh = await engine();
    try {
      assert.equal((warm.runner as LlamaModelRunner).model.info.nSwa, WINDOW);
      const first = await run(warm, request("long", long, { sampling: { maxTokens: 2 } }));
      const reused = await run(warm, request("shared", shared, { sampling }));
      const scratch = await run(fresh, request("scratch", shared, { sampling }));
      const cached = reused.done.usage.cachedTokens;
      assert.ok(
        cached > 16 * WINDOW && first.done.usage.promptTokens - cached > 16 * WINDOW,
        `the shared prefix (${cached} tokens) ends windows before the cached sequence (${first.done.usage.promptTokens})`,
      );
      const [x, y] = [reused.done.logprobs ?? [], scratch.done.logprobs ?? []];
      assert.equal(x.length, 6);
      for (let i = 0; i < x.length; i++) {
        const [a0, a1] = (x[i] as OutputLogprob).top;
        const [b0, b1] = (y[i] as OutputLogprob).top;
        assert.ok(a0 && a1 && b0 && b1);
        assert.ok(Math.abs(a0.logprob - b0.logprob) < 0.01, `token ${i}: ${a0.logprob} vs ${b0.logprob}`);
        // past a near tie the two runs may take different tokens
        if (a0.logprob - a1.logprob < 0.01 || b0.logprob - b1.logprob < 0.01) break;
      }
    } finally {
      await Promise.all([warm.shutdown(), fresh.shutdown()]);
    }
  });
});
