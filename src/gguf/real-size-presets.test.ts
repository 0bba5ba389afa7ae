import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { DecodeBatch, type LlamaModel, loadModel } from "../engine/native/llama-native.js";
import { renderChatML } from "./chat-template.js";
import { metaString, readGgufInfo } from "./format/gguf-reader.js";
import { GgmlType } from "./format/gguf-types.js";
import { BUILTIN_PRESETS, type BuiltinPreset } from "./index.js";
import { generateLlamaGguf, type LlamaSpec, llamaGgufLayout, planLlamaTensors } from "./llama-model.js";
import { LLAMA_3_1_ROPE_SCALING, llama3RopeFactors } from "./llama3-rope.js";
import { SpmTokenizer } from "./vocab/spm-tokenizer.js";
import { buildVocab } from "./vocab/vocab.js";

// The engine is linux-x64 only; there the addon must have been built by `npm ci` (prepare script).
const engine = process.platform === "linux" && process.arch === "x64";

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "continuum-real-size-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

function dimsByName(preset: BuiltinPreset): Map<string, { dims: number[]; type: GgmlType }> {
  const p = BUILTIN_PRESETS[preset];
  return new Map(planLlamaTensors(p, p.weightType).map((t) => [t.name, t]));
}

describe("real-size built-in presets", () => {
  it("llama-3.1-8b has Llama-3.1-8B's tensors, parameter count and file sizes", () => {
    const t = dimsByName("llama-3.1-8b-q8_0");
    assert.equal(t.size, 4 + 9 * 32);
    assert.deepEqual(t.get("token_embd.weight")?.dims, [4096, 128256]);
    assert.deepEqual(t.get("output.weight")?.dims, [4096, 128256]);
    assert.deepEqual(t.get("rope_freqs.weight")?.dims, [64]);
    assert.deepEqual(t.get("blk.0.attn_q.weight")?.dims, [4096, 4096]);
    assert.deepEqual(t.get("blk.0.attn_k.weight")?.dims, [4096, 1024]);
    assert.deepEqual(t.get("blk.0.attn_v.weight")?.dims, [4096, 1024]);
    assert.deepEqual(t.get("blk.0.attn_output.weight")?.dims, [4096, 4096]);
    assert.deepEqual(t.get("blk.0.ffn_gate.weight")?.dims, [4096, 14336]);
    assert.deepEqual(t.get("blk.0.ffn_up.weight")?.dims, [4096, 14336]);
    assert.deepEqual(t.get("blk.0.ffn_down.weight")?.dims, [14336, 4096]);
    assert.ok(t.has("blk.31.ffn_down.weight") && !t.has("blk.32.attn_norm.weight"));
    assert.equal(t.get("blk.0.ffn_down.weight")?.type, GgmlType.Q8_0);
    assert.equal(t.get("blk.0.attn_norm.weight")?.type, GgmlType.F32);
    assert.equal(BUILTIN_PRESETS["llama-3.1-8b-f16"].params, 8_030_261_248); // Meta's count
    const q8 = llamaGgufLayout({ ...BUILTIN_PRESETS["llama-3.1-8b-q8_0"], seed: 1 }).fileSize;
    const f16 = llamaGgufLayout({ ...BUILTIN_PRESETS["llama-3.1-8b-f16"], seed: 1 }).fileSize;
    assert.ok(q8 > 8.5e9 && q8 < 8.6e9, `q8_0: ${q8} bytes`);
    assert.ok(f16 > 16.0e9 && f16 < 16.1e9, `f16: ${f16} bytes`);
    const bf16 = llamaGgufLayout({ ...BUILTIN_PRESETS["llama-3.1-8b-bf16"], seed: 1 }).fileSize;
    assert.equal(bf16, f16);
    assert.equal(dimsByName("llama-3.1-8b-bf16").get("blk.0.ffn_down.weight")?.type, GgmlType.BF16);
  });

  it("qwen3-8b has Qwen3-8B's tensors (per-head query/key norms), parameter count and file sizes", () => {
    const t = dimsByName("qwen3-8b-f16");
    assert.equal(t.size, 3 + 11 * 36);
    assert.deepEqual(t.get("token_embd.weight")?.dims, [4096, 151936]);
    assert.deepEqual(t.get("output.weight")?.dims, [4096, 151936]);
    assert.deepEqual(t.get("blk.35.attn_q_norm.weight")?.dims, [128]);
    assert.deepEqual(t.get("blk.35.attn_k_norm.weight")?.dims, [128]);
    assert.deepEqual(t.get("blk.0.attn_k.weight")?.dims, [4096, 1024]);
    assert.deepEqual(t.get("blk.0.ffn_down.weight")?.dims, [12288, 4096]);
    assert.ok(!t.has("rope_freqs.weight") && !t.has("blk.0.attn_q.bias"));
    assert.equal(t.get("blk.0.ffn_down.weight")?.type, GgmlType.F16);
    assert.equal(BUILTIN_PRESETS["qwen3-8b-q8_0"].params, 8_190_735_360); // Qwen's count
    const q8 = llamaGgufLayout({ ...BUILTIN_PRESETS["qwen3-8b-q8_0"], seed: 1 }).fileSize;
    assert.ok(q8 > 8.7e9 && q8 < 8.8e9, `q8_0: ${q8} bytes`);
  });

  it("llama-3.1's RoPE factors keep high frequencies and slow low ones 8x", () => {
    const f = llama3RopeFactors(128, 500000, LLAMA_3_1_ROPE_SCALING);
    assert.equal(f.length, 64);
    assert.equal(f[0], 1);
    assert.equal(f[63], 8);
    for (let i = 1; i < f.length; i++) assert.ok(f[i]! >= f[i - 1]!);
    assert.ok(
      f.some((x) => x > 1 && x < 8),
      "a smooth band between",
    );
  });
});

/**
 * The real layouts (same architecture, tensor names, block count, GQA ratio, RoPE settings) at a
 * width and vocabulary a CPU test can afford; 16384 tokens is past what merge training fills, so the
 * compound pieces of the big vocabularies are in play.
 */
function reduced(preset: BuiltinPreset): LlamaSpec {
  return {
    ...BUILTIN_PRESETS[preset],
    embeddingLength: 128,
    headCount: 4,
    headCountKv: 1,
    feedForwardLength: 384,
    vocabSize: 16384,
    seed: 1,
  };
}

for (const preset of ["llama-3.1-8b-q8_0", "llama-3.1-8b-bf16", "qwen3-8b-f16"] as const) {
  describe(`${preset}, reduced in width`, () => {
    let path: string;
    before(async () => {
      path = join(dir, `${preset}.gguf`);
      await generateLlamaGguf(path, reduced(preset));
    });

    it("keeps the full model's tensor names, in order", async () => {
      const info = await readGgufInfo(path);
      const full = BUILTIN_PRESETS[preset];
      assert.equal(metaString(info, "general.architecture"), full.arch);
      assert.deepEqual(
        info.tensors.map((t) => t.name),
        planLlamaTensors(full, full.weightType).map((t) => t.name),
      );
      assert.deepEqual(
        info.tensors.map((t) => [t.name, t.dims, t.type]),
        planLlamaTensors(reduced(preset), full.weightType).map((t) => [t.name, t.dims, t.type]),
      );
    });

    describe("in llama.cpp", { skip: engine ? false : "llama.cpp engine is linux-x64 only" }, () => {
      let model: LlamaModel;
      before(async () => {
        model = await loadModel(path);
      });
      after(() => model?.free());

      it("loads with the real depth and decodes a chat prompt to finite, spread logits", async () => {
        const full = BUILTIN_PRESETS[preset];
        assert.equal(model.info.nLayer, full.blockCount);
        assert.equal(model.info.nVocab, 16384);
        assert.equal(model.info.nCtxTrain, full.contextLength);
        assert.equal(model.meta("general.architecture"), full.arch);
        const ctx = await model.createContext({ nCtx: 256, nSeqMax: 1, nBatch: 64, threads: 1 });
        try {
          const prompt = renderChatML(
            [{ role: "user", content: "How do I list the files in a folder?" }],
            true,
          );
          const tokens = model.tokenize(prompt, { addSpecial: true, parseSpecial: true });
          const batch = new DecodeBatch(64).addSequence(tokens, 0, 0);
          const r = await ctx.decode(batch, { sample: false, returnLogits: true });
          const logits = r.outputs[0]!.logits!;
          assert.ok(logits.every(Number.isFinite));
          const mean = logits.reduce((a, b) => a + b, 0) / logits.length;
          const std = Math.sqrt(logits.reduce((a, b) => a + (b - mean) ** 2, 0) / logits.length);
          assert.ok(std > 1 && std < 4, `logit std ${std}`);
        } finally {
          ctx.free();
        }
      });

      it("tokenizes like our SPM tokenizer, compound pieces included", () => {
        const vocab = buildVocab({ size: 16384 });
        const compounds = vocab.tokens.slice(-200).map((piece) => piece.replace("▁", ""));
        const text = `${compounds.join(" ")}. The services moved to a new data center last spring.`;
        const ours = new SpmTokenizer(vocab).tokenize(text);
        assert.deepEqual([...model.tokenize(text)], ours);
        const compoundIds = new Set(vocab.tokens.map((_, id) => id).slice(-200));
        assert.ok(ours.filter((id) => compoundIds.has(id)).length > 100);
      });
    });
  });
}
