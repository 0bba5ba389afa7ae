import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, open, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { CHATML_TEMPLATE } from "./chat-template.js";
import { type GgufInfo, metaArray, metaNumber, metaString, readGgufInfo } from "./format/gguf-reader.js";
import { GgmlType, LlamaFileType } from "./format/gguf-types.js";
import { float16BitsToFloat32 } from "./format/gguf-writer.js";
import { BUILTIN_PRESETS } from "./index.js";
import { countLlamaParams, generateLlamaGguf, type LlamaSpec, planLlamaTensors } from "./llama-model.js";
import { buildVocab } from "./vocab/vocab.js";

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), "continuum-llama-"));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const TINY: LlamaSpec = { ...BUILTIN_PRESETS.tiny, seed: 1, name: "continuum-tiny" };

async function sha256(path: string): Promise<string> {
  return createHash("sha256")
    .update(await readFile(path))
    .digest("hex");
}

/** Reads tensor `name` of an F16/F32 model as floats. */
async function readTensor(path: string, info: GgufInfo, name: string): Promise<Float32Array> {
  const t = info.tensors.find((x) => x.name === name);
  assert.ok(t, name);
  const buf = Buffer.alloc(t.size);
  const fh = await open(path, "r");
  try {
    await fh.read(buf, 0, t.size, info.dataOffset + t.offset);
  } finally {
    await fh.close();
  }
  const n = t.dims.reduce((a, b) => a * b, 1);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = t.type === GgmlType.F16 ? float16BitsToFloat32(buf.readUInt16LE(2 * i)) : buf.readFloatLE(4 * i);
  }
  return out;
}

function stats(xs: Float32Array): { mean: number; std: number; finite: boolean } {
  let sum = 0;
  let sq = 0;
  let finite = true;
  for (const x of xs) {
    if (!Number.isFinite(x)) finite = false;
    sum += x;
    sq += x * x;
  }
  const mean = sum / xs.length;
  return { mean, std: Math.sqrt(sq / xs.length - mean * mean), finite };
}

describe("llama tensor plan", () => {
  it("uses llama.cpp's names and GGUF dimension order", () => {
    const plan = planLlamaTensors(TINY);
    const byName = new Map(plan.map((t) => [t.name, t]));
    assert.equal(plan.length, 3 + 9 * 4);
    assert.deepEqual(byName.get("token_embd.weight")?.dims, [128, 8192]);
    assert.deepEqual(byName.get("output.weight")?.dims, [128, 8192]);
    assert.deepEqual(byName.get("output_norm.weight")?.dims, [128]);
    assert.deepEqual(byName.get("blk.3.attn_q.weight")?.dims, [128, 128]);
    assert.deepEqual(byName.get("blk.3.attn_k.weight")?.dims, [128, 64]); // 2 kv heads of 32
    assert.deepEqual(byName.get("blk.3.attn_v.weight")?.dims, [128, 64]);
    assert.deepEqual(byName.get("blk.3.attn_output.weight")?.dims, [128, 128]);
    assert.deepEqual(byName.get("blk.0.ffn_gate.weight")?.dims, [128, 384]);
    assert.deepEqual(byName.get("blk.0.ffn_up.weight")?.dims, [128, 384]);
    assert.deepEqual(byName.get("blk.0.ffn_down.weight")?.dims, [384, 128]);
    assert.equal(byName.get("blk.0.attn_norm.weight")?.type, GgmlType.F32);
    assert.equal(byName.get("blk.0.ffn_norm.weight")?.type, GgmlType.F32);
    assert.equal(byName.get("blk.0.attn_q.weight")?.type, GgmlType.F16);
    assert.equal(planLlamaTensors(TINY, "q8_0")[0]?.type, GgmlType.Q8_0);
  });

  it("presets have the intended parameter counts", () => {
    const tiny = countLlamaParams(BUILTIN_PRESETS.tiny);
    const small = countLlamaParams(BUILTIN_PRESETS.small);
    const medium = countLlamaParams(BUILTIN_PRESETS.medium);
    assert.ok(tiny >= 1e6 && tiny <= 3e6, `tiny ${tiny}`);
    assert.ok(small >= 20e6 && small <= 30e6, `small ${small}`);
    assert.ok(medium >= 50e6 && medium <= 70e6, `medium ${medium}`);
    assert.equal(BUILTIN_PRESETS.tiny.params, tiny);
    // hand count for tiny: embeddings + output + norms + 4 blocks
    const d = 128;
    const block = 2 * d + d * 128 + 2 * d * 64 + 128 * d + 3 * d * 384;
    assert.equal(tiny, 2 * 8192 * d + d + 4 * block);
    for (const p of [BUILTIN_PRESETS.tiny, BUILTIN_PRESETS.small, BUILTIN_PRESETS.medium]) {
      assert.equal(p.embeddingLength % p.headCount, 0);
      assert.equal(p.headCount % p.headCountKv, 0);
      assert.ok(p.headCountKv < p.headCount, "presets use grouped-query attention");
      assert.equal(planLlamaTensors(p, p.weightType).length, 3 + 9 * p.blockCount);
    }
  });

  it("rejects inconsistent shapes", () => {
    assert.throws(() => planLlamaTensors({ ...TINY, headCount: 3 }), /headCount/);
    assert.throws(() => planLlamaTensors({ ...TINY, headCountKv: 3 }), /headCountKv/);
    assert.throws(() => planLlamaTensors({ ...TINY, feedForwardLength: 100 }, "q8_0"), /q8_0/);
    assert.throws(() => planLlamaTensors({ ...TINY, blockCount: 0 }), /blockCount/);
    assert.throws(() => planLlamaTensors({ ...TINY, slidingWindow: 32 }), /slidingWindow/);
    assert.throws(() => planLlamaTensors({ ...TINY, arch: "gemma3", slidingWindow: 0 }), /slidingWindow/);
  });

  it("gemma3 adds per-head query and key norms and a norm after attention and after the MLP", () => {
    const names = planLlamaTensors({ ...TINY, arch: "gemma3", blockCount: 1 }).map((t) => t.name);
    for (const norm of ["attn_q_norm", "attn_k_norm", "post_attention_norm", "post_ffw_norm"]) {
      assert.ok(names.includes(`blk.0.${norm}.weight`), norm);
    }
    assert.equal(names.length, 3 + 13);
  });
});

describe("generateLlamaGguf", () => {
  it("writes the llama metadata, tokenizer and tensors llama.cpp expects", async () => {
    const path = join(dir, "tiny.gguf");
    const layout = await generateLlamaGguf(path, TINY);
    const info = await readGgufInfo(path);
    assert.equal(info.fileSize, layout.fileSize);
    assert.equal(metaString(info, "general.architecture"), "llama");
    assert.equal(metaString(info, "general.name"), "continuum-tiny");
    assert.equal(metaNumber(info, "general.file_type"), LlamaFileType.MOSTLY_F16);
    assert.equal(metaNumber(info, "general.alignment"), 32);
    assert.equal(metaNumber(info, "llama.context_length"), 4096);
    assert.equal(metaNumber(info, "llama.embedding_length"), 128);
    assert.equal(metaNumber(info, "llama.block_count"), 4);
    assert.equal(metaNumber(info, "llama.feed_forward_length"), 384);
    assert.equal(metaNumber(info, "llama.attention.head_count"), 4);
    assert.equal(metaNumber(info, "llama.attention.head_count_kv"), 2);
    assert.equal(metaNumber(info, "llama.rope.dimension_count"), 32);
    assert.equal(metaNumber(info, "llama.rope.freq_base"), 10000);
    assert.ok(Math.abs(metaNumber(info, "llama.attention.layer_norm_rms_epsilon") - 1e-5) < 1e-10);
    const vocab = buildVocab();
    assert.equal(metaString(info, "tokenizer.ggml.model"), "llama");
    assert.deepEqual(metaArray(info, "tokenizer.ggml.tokens"), vocab.tokens);
    assert.deepEqual(metaArray(info, "tokenizer.ggml.token_type"), vocab.types);
    assert.equal(metaArray(info, "tokenizer.ggml.scores").length, vocab.tokens.length);
    assert.equal(metaNumber(info, "tokenizer.ggml.bos_token_id"), vocab.bosId);
    assert.equal(metaNumber(info, "tokenizer.ggml.eos_token_id"), vocab.imEndId);
    assert.equal(info.metadata.get("tokenizer.ggml.add_bos_token")?.value, true);
    assert.equal(metaString(info, "tokenizer.chat_template"), CHATML_TEMPLATE);
    assert.ok(CHATML_TEMPLATE.includes("<|im_start|>"));
    assert.deepEqual(
      info.tensors.map((t) => [t.name, t.dims, t.type]),
      planLlamaTensors(TINY).map((t) => [t.name, t.dims, t.type]),
    );

    // weights: finite, norms at 1, embeddings N(0, 1), muted output rows zero
    const norm = await readTensor(path, info, "blk.2.ffn_norm.weight");
    assert.ok(norm.every((x) => x === 1));
    const embd = stats(await readTensor(path, info, "token_embd.weight"));
    assert.ok(
      embd.finite && Math.abs(embd.mean) < 0.01 && Math.abs(embd.std - 1) < 0.01,
      JSON.stringify(embd),
    );
    const q = stats(await readTensor(path, info, "blk.1.attn_q.weight"));
    assert.ok(q.finite && Math.abs(q.std - 1 / Math.sqrt(128)) < 0.005, JSON.stringify(q));
    const output = await readTensor(path, info, "output.weight");
    const row = (id: number) => output.subarray(id * 128, (id + 1) * 128);
    assert.ok(row(vocab.bosId).every((x) => x === 0));
    assert.ok(row(vocab.imStartId).every((x) => x === 0));
    assert.ok(row(vocab.byteBase + 0xff).every((x) => x === 0));
    assert.ok(row(vocab.imEndId).some((x) => x !== 0));
    assert.ok(row(vocab.byteBase + 0x0a).some((x) => x !== 0));
    assert.ok(row(5000).some((x) => x !== 0));
  });

  it("is deterministic: same seed gives a byte-identical file, another seed another file", async () => {
    const a = join(dir, "a.gguf");
    const b = join(dir, "b.gguf");
    const c = join(dir, "c.gguf");
    await generateLlamaGguf(a, TINY);
    await generateLlamaGguf(b, TINY);
    await generateLlamaGguf(c, { ...TINY, seed: 2 });
    const [ha, hb, hc] = await Promise.all([sha256(a), sha256(b), sha256(c)]);
    assert.equal(ha, hb);
    assert.notEqual(ha, hc);
    // Pinned: if this changes, generated bytes changed. Bump GENERATOR_VERSION (so cached models are
    // rebuilt) and update the hash.
    assert.equal(ha, TINY_SHA256);
  });

  it("writes q8_0, bf16 and f32 variants", async () => {
    const shape = { ...TINY, blockCount: 1, vocabSize: 4096 };
    for (const [weightType, type, fileType] of [
      ["q8_0", GgmlType.Q8_0, LlamaFileType.MOSTLY_Q8_0],
      ["bf16", GgmlType.BF16, LlamaFileType.MOSTLY_BF16],
      ["f32", GgmlType.F32, LlamaFileType.ALL_F32],
    ] as const) {
      const path = join(dir, `${weightType}.gguf`);
      await generateLlamaGguf(path, { ...shape, weightType });
      const info = await readGgufInfo(path);
      assert.equal(metaNumber(info, "general.file_type"), fileType);
      assert.equal(info.tensors.find((t) => t.name === "blk.0.ffn_up.weight")?.type, type);
      assert.equal(info.tensors.find((t) => t.name === "output_norm.weight")?.type, GgmlType.F32);
      assert.equal(metaArray(info, "tokenizer.ggml.tokens").length, 4096);
      const last = info.tensors[info.tensors.length - 1]!;
      assert.equal(info.fileSize, info.dataOffset + Math.ceil((last.offset + last.size) / 32) * 32);
    }
  });
});

const TINY_SHA256 = "2e591c5add9922cd246590b5b01e37d5761deda4ec3023a881103447afa9d5d0";
