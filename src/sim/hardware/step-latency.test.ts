import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { GPUS } from "./gpu-specs.js";
import { GEMMA_3_12B } from "./model-specs.js";
import { getProfile, listProfiles } from "./profiles.js";
import { RooflineLatencyModel } from "./roofline-model.js";
import { rooflineSpecFor } from "./roofline-spec.js";
import { type LatencyModel, type StepChunk, stepAccumulatorFor } from "./step-latency.js";

const decodes = (batch: number, contextTokens: number): StepChunk[] =>
  Array.from({ length: batch }, () => ({ numTokens: 1, contextTokens }));

describe("step time grows with work", () => {
  for (const profile of listProfiles()) {
    test(`${profile.id}: more prefill tokens, longer contexts and bigger batches all take longer`, () => {
      const { latency } = profile;
      let previous = 0;
      for (const numTokens of [1, 2, 16, 128, 512, 2048, 8192]) {
        const s = latency.stepS([{ numTokens, contextTokens: 1000 }]);
        assert.ok(s > previous, `${numTokens} tokens: ${s} <= ${previous}`);
        previous = s;
      }
      previous = 0;
      for (const contextTokens of [0, 500, 4000, 32000, 128000]) {
        const decode = latency.stepS(decodes(8, contextTokens));
        assert.ok(decode > previous, `decode at ${contextTokens} context: ${decode} <= ${previous}`);
        previous = decode;
        const prefill = latency.stepS([{ numTokens: 512, contextTokens }]);
        const fartherPrefill = latency.stepS([{ numTokens: 512, contextTokens: contextTokens + 4096 }]);
        assert.ok(fartherPrefill > prefill, `prefill after ${contextTokens} context`);
      }
      previous = 0;
      for (const batch of [1, 2, 8, 64, 256, 1024]) {
        const s = latency.stepS(decodes(batch, 2000));
        assert.ok(s > previous, `batch ${batch}: ${s} <= ${previous}`);
        previous = s;
      }
    });
  }

  test("a decode batch costs far less than running its sequences one step each", () => {
    const { latency } = getProfile("h100", "llama-3.1-8b");
    assert.ok(latency.stepS(decodes(32, 2000)) < 0.25 * 32 * latency.stepS(decodes(1, 2000)));
  });

  test("an empty step takes no time", () => {
    assert.equal(getProfile("a100", "llama-3.1-8b").latency.stepS([]), 0);
  });
});

describe("prefillS", () => {
  const { latency } = getProfile("a100", "llama-3.1-8b");

  test("is the sum of its chunked steps, each attending to the context before it", () => {
    const expected =
      latency.stepS([{ numTokens: 2048, contextTokens: 0 }]) +
      latency.stepS([{ numTokens: 2048, contextTokens: 2048 }]) +
      latency.stepS([{ numTokens: 904, contextTokens: 4096 }]);
    assert.ok(Math.abs(latency.prefillS(5000, 2048) - expected) < 1e-12);
  });

  test("grows faster than linearly in context (attention is quadratic)", () => {
    const perToken8k = latency.prefillS(8000) / 8000;
    const perToken64k = latency.prefillS(64000) / 64000;
    assert.ok(perToken64k > 1.5 * perToken8k, `${perToken64k} vs ${perToken8k}`);
  });

  test("costs more in smaller chunks (weights are streamed once per step)", () => {
    assert.ok(latency.prefillS(8192, 256) > 1.2 * latency.prefillS(8192, 2048));
  });

  test("rejects a chunk size below one token", () => {
    assert.throws(() => latency.prefillS(100, 0), /chunkTokens/);
  });
});

describe("step accumulator", () => {
  const chunks: StepChunk[] = [
    ...decodes(40, 3000),
    { numTokens: 700, contextTokens: 12000 },
    ...decodes(3, 90),
  ];

  test("gives the same time as stepS on the same chunks", () => {
    const { latency } = getProfile("h200", "llama-3.1-70b");
    const acc = stepAccumulatorFor(latency);
    acc.beginStep();
    for (const chunk of chunks) acc.addChunk(chunk.numTokens, chunk.contextTokens);
    assert.equal(acc.endStepS(), latency.stepS(chunks));
  });

  test("two accumulators on one shared model do not disturb each other", () => {
    const { latency } = getProfile("a100", "gemma-3-12b");
    const first = stepAccumulatorFor(latency);
    const second = stepAccumulatorFor(latency);
    first.beginStep();
    second.beginStep();
    first.addChunk(1, 100);
    for (const chunk of chunks) second.addChunk(chunk.numTokens, chunk.contextTokens);
    latency.stepS(decodes(500, 500));
    assert.equal(first.endStepS(), latency.stepS(decodes(1, 100)));
    assert.equal(second.endStepS(), latency.stepS(chunks));
  });

  test("works for a model without its own accumulator, across steps of different sizes", () => {
    const seen: number[] = [];
    const countingModel: LatencyModel = {
      name: "tokens",
      stepS: (stepChunks) => {
        seen.push(stepChunks.length);
        return stepChunks.reduce((sum, c) => sum + c.numTokens, 0);
      },
      prefillS: () => 0,
    };
    const acc = stepAccumulatorFor(countingModel);
    acc.beginStep();
    acc.addChunk(5, 0);
    acc.addChunk(1, 9);
    assert.equal(acc.endStepS(), 6);
    acc.beginStep();
    acc.addChunk(3, 0);
    assert.equal(acc.endStepS(), 3);
    assert.deepEqual(seen, [2, 1]);
  });
});

test("Gemma-3's sliding-window layers make long-context decode cheaper than full attention would", () => {
  const windowed = getProfile("h100", "gemma-3-12b").latency;
  const fullAttention = new RooflineLatencyModel(
    rooflineSpecFor(GPUS.h100, { ...GEMMA_3_12B, slidingWindowLayers: 0 }, 1),
  );
  const shortContext = decodes(16, 800);
  assert.equal(windowed.stepS(shortContext), fullAttention.stepS(shortContext));
  const longContext = decodes(16, 64000);
  assert.ok(windowed.stepS(longContext) < 0.6 * fullAttention.stepS(longContext));
});
