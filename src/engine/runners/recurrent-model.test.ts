/**
 * A recurrent (state-space) model keeps one state per sequence, which the engine's KV reuse can neither share
 * by prefix nor cut back: served anyway, the first reused prefix made llama.cpp refuse the decode and the
 * process died. It is refused at load instead, naming why and what to serve.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { isNativeAvailable } from "../native/llama-native.js";
import { writeTinyMambaGguf } from "../test-support/mamba-gguf.js";
import { LlamaModelRunner } from "./llama-model-runner.js";

const supported = process.platform === "linux" && process.arch === "x64" && isNativeAvailable();

test("a recurrent model (Mamba) is refused at load with the reason and what to serve instead", {
  skip: supported ? false : "no llama.cpp addon",
}, async () => {
  const dir = await mkdtemp(join(tmpdir(), "continuum-mamba-"));
  try {
    const modelPath = join(dir, "tiny-mamba.gguf");
    await writeTinyMambaGguf(modelPath);
    await assert.rejects(
      LlamaModelRunner.open({ modelPath, kvCells: 1024, maxSeqs: 4, batchTokens: 64, threads: 1 }),
      /tiny-mamba\.gguf is a recurrent model \(architecture mamba\).*cannot be shared by prefix.*attention-only model/,
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
