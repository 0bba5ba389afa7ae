import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { LlamaModelRunner } from "../../engine/runners/llama-model-runner.js";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { TINY_GGUF_SPEC } from "../../engine/test-support/template-gguf.js";
import { generateLlamaGguf, readGgufInfo } from "../index.js";
import { buildBpeVocab } from "./bpe-vocab.js";
import { TokenType } from "./vocab.js";

describe("byte-level BPE vocabulary", () => {
  const vocab = buildBpeVocab(8192);

  test("every merge joins two earlier tokens into the next one, and the vocabulary is exactly its size", () => {
    assert.equal(vocab.tokens.length, 8192);
    assert.equal(new Set(vocab.tokens).size, vocab.tokens.length);
    const ids = new Map(vocab.tokens.map((t, i) => [t, i]));
    vocab.merges.forEach((merge, rank) => {
      const [left, right, ...rest] = merge.split(" ");
      assert.equal(rest.length, 0, merge);
      const id = 256 + rank;
      assert.equal(vocab.tokens[id], `${left}${right}`);
      assert.ok((ids.get(left as string) as number) < id && (ids.get(right as string) as number) < id, merge);
    });
    assert.equal(vocab.merges.length, 8192 - 256 - 7);
  });

  test("special tokens: control ones for the chat template, user-defined ones for tool calls and thinking", () => {
    const typeOf = (text: string) => vocab.types[vocab.tokens.indexOf(text)];
    for (const text of ["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
      assert.equal(typeOf(text), TokenType.CONTROL);
    for (const text of ["<tool_call>", "</tool_call>", "<think>", "</think>"]) {
      assert.equal(typeOf(text), TokenType.USER_DEFINED);
    }
    assert.ok(!vocab.mutedIds.includes(vocab.imEndId), "the end of a turn stays reachable");
    assert.ok(vocab.mutedIds.includes(vocab.imStartId));
  });
});

describe("byte-level BPE vocabulary in llama.cpp", { skip: llamaSkip }, () => {
  let dir: string;
  let runner: LlamaModelRunner;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "continuum-bpe-"));
    const modelPath = join(dir, "bpe.gguf");
    await generateLlamaGguf(modelPath, { ...TINY_GGUF_SPEC, tokenizer: "bpe" });
    const info = await readGgufInfo(modelPath);
    assert.equal(info.metadata.get("tokenizer.ggml.model")?.value, "gpt2");
    runner = await LlamaModelRunner.open({ modelPath, kvCells: 256, maxSeqs: 1, threads: 1 });
  });

  after(async () => {
    await runner?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const pieces = (text: string) =>
    Array.from(runner.tokenize(text), (id) => Buffer.from(runner.templatePiece(id)).toString("latin1"));

  test("tokenizes as Qwen's pre-tokenizer splits: a space goes with the word after it, digits one by one", () => {
    assert.deepEqual(pieces(" the quick brown"), [" the", " quick", " brown"]);
    assert.deepEqual(pieces("x = 42"), ["x", " =", " ", "4", "2"]);
    assert.equal(runner.tokenize("<|im_start|>user\n").length, 3, "no BOS, the control token whole");
    assert.equal(runner.tokenize("<tool_call>").length, 1);
  });

  test("any text comes back byte for byte, characters of several bytes included", () => {
    for (const text of [
      "naïve café — “quoted”",
      "日本語のテキスト",
      "emoji 😀👍🏽 end",
      "tabs\tand\r\nnewlines\n\n",
    ]) {
      assert.equal(runner.detokenize(runner.tokenize(text)), text);
    }
    const tokens = runner.tokenize("😀");
    assert.ok(tokens.length > 1, "a character without a token of its own is spelled in bytes");
    const bytes = Buffer.concat(Array.from(tokens, (id) => runner.tokenPiece(id)));
    assert.equal(bytes.toString("utf8"), "😀");
  });
});
