import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { evalQuadratic } from "../../core/profile/quadratic.js";
import {
  getProfile,
  listProfiles,
  PREFILL_PROFILE_CHUNK_TOKENS,
  PREFILL_PROFILE_TOKENS,
} from "./profiles.js";
import type { StepChunk } from "./step-latency.js";

const KIB = 1024;
const MODELS = ["llama-3.1-8b", "llama-3.1-70b", "gemma-3-12b"];

describe("catalogue", () => {
  test("ships every gpu x model pair once, each found again by getProfile", () => {
    const profiles = listProfiles();
    assert.equal(profiles.length, 12);
    assert.equal(new Set(profiles.map((p) => p.id)).size, 12);
    for (const profile of profiles) assert.equal(getProfile(profile.gpu, profile.model), profile);
  });

  test("an unknown gpu or model names the valid ones", () => {
    assert.throws(() => getProfile("v100", "llama-3.1-8b"), /a100, h100, h200, b200/);
    assert.throws(() => getProfile("h100", "llama-2-7b"), /llama-3\.1-8b, llama-3\.1-70b, gemma-3-12b/);
  });

  test("70B runs at TP4, the others on one GPU", () => {
    assert.equal(getProfile("h100", "llama-3.1-70b").tensorParallel, 4);
    assert.equal(getProfile("h100", "llama-3.1-8b").tensorParallel, 1);
    assert.equal(getProfile("h100", "gemma-3-12b").tensorParallel, 1);
  });
});

describe("KV cache", () => {
  test("bytes per token follow the published shapes (Gemma-3 as a full-attention upper bound)", () => {
    assert.equal(getProfile("a100", "llama-3.1-8b").kvBytesPerToken, 128 * KIB);
    assert.equal(getProfile("a100", "llama-3.1-70b").kvBytesPerToken, 320 * KIB);
    assert.equal(getProfile("a100", "gemma-3-12b").kvBytesPerToken, 384 * KIB);
  });

  test("capacity is 90% of memory minus the weights; 70B at TP4 spreads each token over 4 GPUs", () => {
    // A100 80GB: 0.9 * 85.9 GB - 16.06 GB of bf16 weights = 61.2 GB / 128 KiB
    const a100Llama8b = getProfile("a100", "llama-3.1-8b").kvCapacityTokens;
    assert.ok(a100Llama8b > 460_000 && a100Llama8b < 475_000, `${a100Llama8b}`);
    // per GPU: 77.3 GB - 35.3 GB of weights = 42 GB / 80 KiB
    const a100Llama70b = getProfile("a100", "llama-3.1-70b").kvCapacityTokens;
    assert.ok(a100Llama70b > 505_000 && a100Llama70b < 520_000, `${a100Llama70b}`);
    for (const model of MODELS) {
      const capacity = (gpu: string) => getProfile(gpu, model).kvCapacityTokens;
      assert.ok(capacity("a100") < capacity("h200") && capacity("h200") < capacity("b200"), model);
      assert.ok(Math.abs(capacity("a100") / capacity("h100") - 1) < 0.01, model);
    }
  });

  test("offload moves a 70B token over four PCIe links at once, and disk is slower than CPU", () => {
    const one = getProfile("h100", "llama-3.1-8b");
    const four = getProfile("h100", "llama-3.1-70b");
    assert.equal(one.cpuOffloadBandwidthBps, 40e9);
    assert.equal(four.cpuOffloadBandwidthBps, 4 * one.cpuOffloadBandwidthBps);
    for (const profile of listProfiles())
      assert.ok(profile.diskBandwidthBps < profile.cpuOffloadBandwidthBps);
  });
});

describe("generations", () => {
  const work: Record<string, StepChunk[]> = {
    "batch-1 decode": [{ numTokens: 1, contextTokens: 4000 }],
    "batch-64 decode": Array.from({ length: 64 }, () => ({ numTokens: 1, contextTokens: 8000 })),
    "2048-token prefill chunk": [{ numTokens: 2048, contextTokens: 6000 }],
  };
  for (const model of MODELS) {
    test(`${model}: b200 is faster than h200, h200 than h100, h100 than a100`, () => {
      for (const [name, chunks] of Object.entries(work)) {
        const [a100, h100, h200, b200] = ["a100", "h100", "h200", "b200"].map((gpu) =>
          getProfile(gpu, model).latency.stepS(chunks),
        ) as [number, number, number, number];
        assert.ok(
          b200 < h200 && h200 <= h100 && h100 < a100,
          `${name}: ${[a100, h100, h200, b200].join(" ")}`,
        );
      }
    });
  }
});

test("prefillQuadratic is a least-squares fit of prefillS over the offline profile's lengths", () => {
  for (const profile of listProfiles()) {
    const quadratic = profile.prefillQuadratic;
    assert.equal(profile.prefillQuadratic, quadratic, "fitted once and kept");
    assert.ok(quadratic.a > 0, `${profile.id}: a = ${quadratic.a}`);
    for (const tokens of PREFILL_PROFILE_TOKENS) {
      const measured = profile.latency.prefillS(tokens, PREFILL_PROFILE_CHUNK_TOKENS);
      const fitted = evalQuadratic(quadratic, tokens);
      assert.ok(
        Math.abs(fitted / measured - 1) < 0.1,
        `${profile.id} at ${tokens}: ${fitted} vs ${measured}`,
      );
    }
  }
});
