import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { OffloadTiers, tierConfigs } from "../../core/kv/offload-tiers.js";
import { getProfile, getRooflineModel } from "./profiles.js";
import type { StepChunk } from "./step-latency.js";

const BLOCK_TOKENS = 16;

function decodeStep(sequences: number, contextTokens: number): StepChunk[] {
  return Array.from({ length: sequences }, () => ({ numTokens: 1, contextTokens }));
}

describe("--kv-cache-dtype fp8 in the simulator", () => {
  const bf16 = getProfile("h100", "llama-3.1-8b");
  const fp8 = getProfile("h100", "llama-3.1-8b", "fp8");

  it("halves KV bytes per token, so the same memory holds twice the pool", () => {
    assert.equal(fp8.kvBytesPerToken * 2, bf16.kvBytesPerToken);
    assert.ok(Math.abs(fp8.kvCapacityTokens - 2 * bf16.kvCapacityTokens) <= 1, `${fp8.kvCapacityTokens}`);
    assert.equal(fp8.maxContextTokens, bf16.maxContextTokens, "the model's window still binds");
    assert.equal(fp8.id, "h100/llama-3.1-8b/kv-fp8");
    assert.equal(getProfile("h100", "llama-3.1-8b", "bf16"), bf16, "bf16 is the default profile");
  });

  it("holds twice the tokens in an offload tier of the same bytes", () => {
    const held = (kvBytesPerToken: number) => {
      const tiers = new OffloadTiers(
        tierConfigs({
          cpuBytes: 10 * BLOCK_TOKENS * bf16.kvBytesPerToken,
          diskBytes: 0,
          cpuBandwidthBps: bf16.cpuOffloadBandwidthBps,
          diskBandwidthBps: bf16.diskBandwidthBps,
        }),
        kvBytesPerToken * BLOCK_TOKENS,
      );
      tiers.store(Array.from({ length: 20 }, (_, i) => i + 1));
      return (
        tiers.findPrefix((i) => i + 11, 0, 10).numBlocks + tiers.findPrefix((i) => i + 1, 0, 10).numBlocks
      );
    };
    assert.equal(held(bf16.kvBytesPerToken), 10, "bf16: the newest 10 blocks");
    assert.equal(held(fp8.kvBytesPerToken), 20, "fp8: all 20");
  });

  it("makes a long-context decode step cheaper by at most half its KV reads, and leaves compute alone", () => {
    const bf16Model = getRooflineModel("h100", "llama-3.1-8b");
    const fp8Model = getRooflineModel("h100", "llama-3.1-8b", "fp8");
    const spec = bf16Model.spec;
    for (const [sequences, contextTokens] of [
      [4, 32768],
      [16, 16384],
      [128, 2048],
    ] as const) {
      const step = decodeStep(sequences, contextTokens);
      const before = bf16Model.breakdown(step);
      const after = fp8Model.breakdown(step);
      for (const part of ["overheadS", "linearS", "elementwiseS", "lmHeadS", "allReduceS"] as const) {
        assert.equal(after[part], before[part], `${sequences} x ${contextTokens}: ${part} unchanged`);
      }
      const kvReadS =
        (sequences * (contextTokens + 1) * spec.layers * spec.kvBytesPerTokenLayer) /
        (spec.hbmBandwidthBps * spec.kvReadEfficiency);
      const savedS = before.decodeAttentionS - after.decodeAttentionS;
      assert.ok(savedS >= 0, `${sequences} x ${contextTokens}: never slower`);
      assert.ok(
        savedS <= kvReadS / 2 + 1e-12,
        `${sequences} x ${contextTokens}: saves ${savedS} of ${kvReadS}`,
      );
      if (sequences <= 16)
        assert.ok(savedS > 0.2 * kvReadS, `${sequences} x ${contextTokens}: KV-bound, cheaper`);
      else assert.equal(savedS, 0, `${sequences} x ${contextTokens}: its padded query tiles bind, not KV`);
    }
  });

  it("keeps the bf16 step model the fidelity tests hold against measured GPU steps", () => {
    assert.equal(getRooflineModel("h100", "llama-3.1-8b", "bf16").spec.kvBytesPerTokenLayer, 4096);
    assert.equal(getRooflineModel("h100", "llama-3.1-8b", "fp8").spec.kvBytesPerTokenLayer, 2048);
  });
});
