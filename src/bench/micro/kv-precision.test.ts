import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { type LlamaModel, loadModel } from "../../engine/native/llama-native.js";
import { ensureBuiltinModel } from "../../gguf/index.js";
import { klDivergence, measureKvPrecision, promptSet } from "./kv-precision.js";

// The engine is linux-x64 only; there the addon must have been built by `npm ci` (prepare script).
const supported = process.platform === "linux" && process.arch === "x64";

describe("KL divergence", () => {
  it("is 0 for equal distributions and positive otherwise", () => {
    const p = Float64Array.from([0.5, 0.25, 0.25].map(Math.log));
    const q = Float64Array.from([0.25, 0.5, 0.25].map(Math.log));
    assert.equal(klDivergence(p, p), 0);
    // 0.5 ln 2 + 0.25 ln 0.5
    assert.ok(Math.abs(klDivergence(p, q) - 0.25 * Math.log(2)) < 1e-12);
  });
});

describe("KV precision on the real engine", {
  skip: supported ? false : "llama.cpp engine is linux-x64 only",
}, () => {
  let model: LlamaModel;

  before(async () => {
    model = await loadModel(await ensureBuiltinModel({ preset: "tiny" }));
  });

  after(() => {
    model?.free();
  });

  it("draws the same prompts from the same seed", () => {
    const [a, b] = [promptSet(model, 2, 48, 7), promptSet(model, 2, 48, 7)];
    assert.deepEqual(a, b);
    assert.equal(a[0]?.length, 48);
    assert.notDeepEqual(a[0], a[1]);
  });

  it("finds f16 against itself exactly equal, and q8_0 off by a small finite KL", async () => {
    const rows = await measureKvPrecision(model, {
      types: ["f16", "q8_0"],
      prompts: 2,
      promptTokens: 64,
      chunkTokens: 16,
      threads: 1,
      seed: 1,
    });
    const [f16, q8] = rows;
    assert.equal(f16?.positions, 128);
    assert.equal(f16?.meanKl, 0);
    assert.equal(f16?.maxKl, 0);
    assert.equal(f16?.top1Agreement, 1);
    assert.ok(q8 && q8.meanKl > 0 && Number.isFinite(q8.maxKl), JSON.stringify(q8));
    assert.ok(q8.maxKl >= q8.meanKl && q8.maxKl < 1, JSON.stringify(q8));
    assert.ok(q8.kvBytesPerToken !== null && f16.kvBytesPerToken !== null);
    assert.ok(q8.kvBytesPerToken < f16.kvBytesPerToken);
  });
});
