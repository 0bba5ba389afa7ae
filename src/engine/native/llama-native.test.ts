import assert from "node:assert/strict";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { ensureBuiltinModel, renderChatML } from "../../gguf/index.js";
import {
  allocPinnedBuffer,
  DecodeBatch,
  devices,
  isLlamaError,
  type LlamaContext,
  type LlamaModel,
  loadBackends,
  loadModel,
  measureHostCopyBandwidth,
  setLogLevel,
  versionInfo,
} from "./llama-native.js";

// The engine is linux-x64 only; there the addon must have been built by `npm ci` (prepare script).
const supported = process.platform === "linux" && process.arch === "x64";

/** Greedy-generates `steps` tokens for every prompt (seq id = index), all sequences in one batch per step. */
async function generate(
  ctx: LlamaContext,
  prompts: Int32Array[],
  steps: number,
  firstSeq = 0,
  stepsOnThisThread = false,
): Promise<number[][]> {
  const batch = new DecodeBatch(ctx.info.nBatch);
  prompts.forEach((p, i) => {
    batch.addSequence(p, 0, firstSeq + i);
  });
  let r = await ctx.decode(batch);
  const out: number[][] = prompts.map(() => []);
  const pos = prompts.map((p) => p.length);
  for (let step = 0; step < steps; step++) {
    batch.clear();
    for (const o of r.outputs) {
      const i = o.seqId - firstSeq;
      out[i]!.push(o.token);
      batch.add(o.token, pos[i]!++, o.seqId, true);
    }
    r = stepsOnThisThread ? ctx.decodeSync(batch) : await ctx.decode(batch);
  }
  return out;
}

/** Logits after feeding `tokens` at `startPos` into seqId (no sampling). */
async function logitsAfter(ctx: LlamaContext, tokens: ArrayLike<number>, startPos: number, seqId: number) {
  const batch = new DecodeBatch(Math.max(tokens.length, 1)).addSequence(tokens, startPos, seqId);
  const r = await ctx.decode(batch, { sample: false, returnLogits: true });
  assert.equal(r.outputs.length, 1);
  return r.outputs[0]!.logits!;
}

function argmax(a: Float32Array): number {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i]! > a[best]!) best = i;
  return best;
}

describe("llama native addon", { skip: supported ? false : "llama.cpp engine is linux-x64 only" }, () => {
  let model: LlamaModel;
  let ctx: LlamaContext;
  let tmp: string;

  before(async () => {
    const path = await ensureBuiltinModel({ preset: "tiny" });
    model = await loadModel(path);
    ctx = await model.createContext({ nCtx: 4096, nSeqMax: 8, nBatch: 512, threads: 1 });
    tmp = await mkdtemp(join(tmpdir(), "continuum-native-"));
  });

  after(async () => {
    ctx?.free();
    model?.free();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  test("headers and libraries are the same llama.cpp release; CPU backend loaded", () => {
    const v = versionInfo();
    assert.ok(
      v.libLlamaVersion.startsWith(v.headerLlamaVersion),
      `${v.libLlamaVersion} vs ${v.headerLlamaVersion}`,
    );
    assert.equal(v.libGgmlVersion, v.headerGgmlVersion);
    assert.ok(v.maxParallelSequences >= 256);
    const b = loadBackends();
    // the prebuilt package's variants, or the backend `continuum build-cpu` compiled here; it says which
    const native = b.cpu.startsWith("built for this CPU");
    assert.ok(native ? b.dir.endsWith(".cache/cpu-backend") : b.dir.endsWith("bins/linux-x64"), b.dir);
    assert.match(b.cpu, /^(built for this CPU \(.*libggml-cpu-native\.so\)|prebuilt)/);
    assert.ok(devices().some((d) => d.type === "cpu"));
  });

  test("without a GPU backend there is no page-locked memory to hand out and no GPU copy to time", () => {
    assert.equal(allocPinnedBuffer(1 << 20), null);
    assert.equal(measureHostCopyBandwidth(1 << 20, 1), null);
  });

  test("model info matches the built-in tiny preset", () => {
    const i = model.info;
    assert.equal(i.nVocab, 8192);
    assert.equal(i.nLayer, 4);
    assert.equal(i.nEmbd, 128);
    assert.equal(i.nHead, 4);
    assert.equal(i.nHeadKv, 2);
    assert.equal(i.nCtxTrain, 4096);
    assert.ok(i.chatTemplate?.includes("<|im_start|>"));
    assert.equal(typeof i.bos, "number");
    assert.equal(typeof i.eos, "number");
    assert.ok(model.isEog(i.eos!));
    // K and V: 4 layers x 2 kv heads x 32 dims x 2 bytes (f16) each
    assert.equal(i.kvBytesPerTokenF16, 4 * 2 * 32 * 2 * 2);
    assert.equal(model.kvBytesPerToken("q8_0"), 4 * 2 * (64 / 32) * 34);
    assert.equal(model.meta("general.architecture"), "llama");
    assert.equal(model.meta("no.such.key"), null);
    assert.equal(ctx.info.nSeqMax, 8);
    assert.equal(ctx.info.kvUnified, true);
    assert.equal(ctx.info.nCtxSeq, ctx.info.nCtx, "unified pool: every sequence may use all cells");
    assert.equal(ctx.info.threadpool, true);
  });

  test("tokenizeAsync gives tokenize's tokens and leaves the event loop running meanwhile", async () => {
    const text = "the quick brown fox jumps over the lazy dog; ".repeat(6000);
    let timerRuns = 0;
    const ticker = setInterval(() => timerRuns++, 0);
    let timerRunsWhenDone = -1;
    const ids = await model.tokenizeAsync(text, { addSpecial: true, parseSpecial: true }).then((tokens) => {
      timerRunsWhenDone = timerRuns;
      return tokens;
    });
    clearInterval(ticker);
    assert.deepEqual(ids, model.tokenize(text, { addSpecial: true, parseSpecial: true }));
    // Tokenized on the calling thread, the promise would settle before any timer could run.
    assert.ok(timerRunsWhenDone > 0, "timers ran while the prompt was tokenized");
  });

  test("tokenize/detokenize round trip", () => {
    const spacePrefix = model.meta("tokenizer.ggml.add_space_prefix") === "true" ? " " : "";
    for (const text of [
      "Hello world, this is a test.",
      " leading space",
      "ünïcödé 🙂 ok",
      "a\nb\tc",
      '{"k": [1, 2]}',
    ]) {
      const toks = model.tokenize(text);
      assert.ok(toks.length > 0);
      assert.equal(model.detokenize(toks), text);
      // pieces concatenate to the same bytes (a piece may be part of a UTF-8 character)
      // (this SentencePiece vocab has add_space_prefix: the first piece carries a space that detokenize drops)
      const bytes = Buffer.concat([...toks].map((t) => model.tokenToPiece(t)));
      assert.equal(bytes.toString("utf8"), spacePrefix + text);
      // addSpecial prepends BOS (this vocabulary wants one)
      const withBos = model.tokenize(text, { addSpecial: true });
      assert.equal(withBos[0], model.info.bos);
      assert.equal(model.detokenize(withBos.subarray(1)), text);
    }
    // parseSpecial: control tokens are recognised only when asked
    const special = model.tokenize("<|im_start|>user", { parseSpecial: true });
    const plain = model.tokenize("<|im_start|>user");
    assert.ok(special.length < plain.length);
    assert.ok(model.info.chatTemplate && special.length === 2);
    // llama.cpp's SentencePiece tokenizer re-applies the space prefix after a special token
    assert.equal(model.detokenize(special, { unparseSpecial: true }), `<|im_start|>${spacePrefix}user`);
    assert.equal(model.detokenize(special), `${spacePrefix}user`);
    assert.throws(() => model.tokenToPiece(1 << 20), RangeError);
  });

  test("chat template renders ChatML like the generator's reference", () => {
    const messages = [
      { role: "system", content: "You are terse." },
      { role: "user", content: "Hi!" },
      { role: "assistant", content: "Hello." },
      { role: "user", content: "Bye?" },
    ];
    assert.equal(model.applyChatTemplate(messages), renderChatML(messages, true));
    assert.equal(model.applyChatTemplate(messages, { addAssistant: false }), renderChatML(messages, false));
    assert.throws(
      () => model.applyChatTemplate(messages, { template: "definitely not a template" }),
      (e: unknown) => isLlamaError(e, "LLAMA_CHAT_TEMPLATE_UNSUPPORTED"),
    );
  });

  test("two sequences decoded in one batch give the same greedy tokens as each alone", async () => {
    const p1 = model.tokenize("The quick brown fox jumps over", { addSpecial: true });
    const p2 = model.tokenize("Once upon a time, in a land far away, there was", { addSpecial: true });
    ctx.clear();
    const [alone1] = await generate(ctx, [p1], 12);
    ctx.clear();
    const [alone2] = await generate(ctx, [p2], 12);
    ctx.clear();
    // the pair lives in other slots (3 and 4) of the same pool
    const both = await generate(ctx, [p1, p2], 12, 3);
    assert.deepEqual(both[0], alone1);
    assert.deepEqual(both[1], alone2);
    assert.equal(ctx.seqPosMax(3), p1.length + 11);
    assert.equal(ctx.seqPosMax(4), p2.length + 11);
    assert.equal(ctx.seqPosMax(0), -1);
    ctx.clear();
  });

  test("decodeSync gives decode's greedy tokens; its errors are thrown and leave the context usable", async () => {
    const p1 = model.tokenize("The quick brown fox jumps over", { addSpecial: true });
    const p2 = model.tokenize("Once upon a time, in a land far away, there was", { addSpecial: true });
    ctx.clear();
    const onWorker = await generate(ctx, [p1, p2], 12);
    ctx.clear();
    const onThisThread = await generate(ctx, [p1, p2], 12, 0, true);
    assert.deepEqual(onThisThread, onWorker);
    ctx.clear();

    assert.throws(() => ctx.decodeSync(new DecodeBatch(1).addSequence([9999], 0, 0)), RangeError);
    const small = await model.createContext({ nCtx: 256, nSeqMax: 2, nBatch: 256, threads: 1 });
    try {
      small.decodeSync(new DecodeBatch(256).addSequence(new Int32Array(250).fill(7), 0, 0));
      assert.throws(
        () => small.decodeSync(new DecodeBatch(16).addSequence(new Int32Array(10).fill(7), 0, 1)),
        (e: unknown) => isLlamaError(e, "LLAMA_DECODE_NO_KV_SLOT"),
      );
      assert.equal(small.busy, false);
      assert.equal(small.seqRemove(0, 100), true);
      const r = await small.decode(new DecodeBatch(16).addSequence(new Int32Array(10).fill(7), 0, 1));
      assert.equal(r.outputs.length, 1);
      assert.equal(small.seqPosMax(1), 9);
    } finally {
      small.free();
    }
  });

  test("seq state save -> clear -> restore (Buffer and file) yields identical next-token logits", async () => {
    const prompt = model.tokenize("Save me, then bring me back exactly as I was.", { addSpecial: true });
    const probe = model.tokenize(" next")[0]!;
    ctx.clear();
    await logitsAfter(ctx, prompt, 0, 2);
    const size = ctx.seqStateSize(2);
    const state = await ctx.saveSeqState(2);
    assert.equal(state.length, size);
    // the KV payload dominates: n tokens x bytes per token (+ small headers)
    const kv = prompt.length * ctx.info.kvBytesPerToken!;
    assert.ok(size >= kv && size < kv + 4096, `state ${size} B for ${prompt.length} tokens`);
    // the same bytes written into a caller's (larger) buffer; one too small is refused
    const target = Buffer.alloc(size + 100, 0xee);
    const into = await ctx.saveSeqStateInto(2, (bytes) => {
      assert.equal(bytes, size);
      return target;
    });
    assert.equal(into.buffer, target.buffer);
    assert.ok(into.equals(state));
    await assert.rejects(
      ctx.saveSeqStateInto(2, () => Buffer.alloc(size - 1)),
      (e: unknown) => isLlamaError(e, "LLAMA_STATE_SAVE_FAILED"),
    );
    const path = join(tmp, "seq2.state");
    const written = await ctx.saveSeqStateFile(2, path, prompt);
    assert.equal((await stat(path)).size, written);

    const reference = await logitsAfter(ctx, [probe], prompt.length, 2);
    const refToken = argmax(reference);

    ctx.clear();
    assert.equal(ctx.seqPosMax(2), -1);
    assert.equal(await ctx.restoreSeqState(2, state), state.length);
    assert.equal(ctx.seqPosMin(2), 0);
    assert.equal(ctx.seqPosMax(2), prompt.length - 1);
    assert.deepEqual(await logitsAfter(ctx, [probe], prompt.length, 2), reference);

    // restore into a different slot of a cleared pool: same cells content, same result
    ctx.clear();
    await ctx.restoreSeqState(5, state);
    const moved = await logitsAfter(ctx, [probe], prompt.length, 5);
    assert.deepEqual(moved, reference);
    assert.equal(argmax(moved), refToken);

    // disk tier
    ctx.clear();
    const loaded = await ctx.loadSeqStateFile(6, path);
    assert.equal(loaded.bytes, written);
    assert.deepEqual([...loaded.tokens], [...prompt]);
    const fromDisk = await logitsAfter(ctx, [probe], prompt.length, 6);
    assert.deepEqual(fromDisk, reference);
    assert.equal(argmax(fromDisk), refToken);

    // a corrupt state is refused, not loaded
    await assert.rejects(ctx.restoreSeqState(1, Buffer.from("not a state")), (e: unknown) =>
      isLlamaError(e, "LLAMA_STATE_LOAD_FAILED"),
    );
    ctx.clear();
  });

  test("remove-range then re-decode equals a fresh decode of the edited sequence", async () => {
    const a = model.tokenize("The agent called the search tool and got three results back.", {
      addSpecial: true,
    });
    const edit = model.tokenize(" The tool failed with a timeout.");
    const keep = 6;
    ctx.clear();
    await logitsAfter(ctx, a, 0, 1);
    assert.equal(ctx.seqPosMax(1), a.length - 1);
    assert.equal(ctx.seqRemove(1, keep), true);
    assert.equal(ctx.seqPosMax(1), keep - 1);
    const edited = await logitsAfter(ctx, edit, keep, 1);

    ctx.clear();
    await logitsAfter(ctx, a.subarray(0, keep), 0, 1);
    const fresh = await logitsAfter(ctx, edit, keep, 1);
    assert.deepEqual(edited, fresh);
    assert.equal(argmax(edited), argmax(fresh));
    ctx.clear();
  });

  test("seqCopy shares a prefix; seqKeep drops the others", async () => {
    const prefix = model.tokenize("Shared system prompt for every agent.", { addSpecial: true });
    const probe = model.tokenize(" go");
    ctx.clear();
    await logitsAfter(ctx, prefix, 0, 0);
    ctx.seqCopy(0, 1);
    ctx.seqCopy(0, 2);
    assert.equal(ctx.seqPosMax(1), prefix.length - 1);
    const l0 = await logitsAfter(ctx, probe, prefix.length, 0);
    const l1 = await logitsAfter(ctx, probe, prefix.length, 1);
    assert.deepEqual(l0, l1);
    ctx.seqKeep(1);
    assert.equal(ctx.seqPosMax(0), -1);
    assert.equal(ctx.seqPosMax(2), -1);
    assert.equal(ctx.seqPosMax(1), prefix.length + probe.length - 1);
    ctx.clear();
  });

  test("under a grammar, a token the grammar allows is drawn as it would be without one", async () => {
    // a grammar that allows any text: every first draw stands, so greedy is plain greedy and a seed draws
    // what it draws without a grammar (llama.cpp's chain, which samples the refused ones, draws differently)
    const anyText = "root ::= [^\\x00]*";
    const prompt = model.tokenize("Write anything:", { addSpecial: true });
    for (const params of [{}, { temperature: 1, seed: 11 }, { temperature: 0.7, seed: 12 }]) {
      ctx.clear();
      ctx.setSampler(3, Object.keys(params).length === 0 ? null : params);
      const [plain] = await generate(ctx, [prompt], 12, 3);
      ctx.clear();
      ctx.setSampler(3, { ...params, grammar: anyText });
      const [constrained] = await generate(ctx, [prompt], 12, 3);
      assert.deepEqual(constrained, plain, JSON.stringify(params));
    }
    ctx.setSampler(3, null);
    ctx.clear();
  });

  test("grammar-constrained sampling produces text the grammar accepts, then EOG", async () => {
    const grammar = 'root ::= "{\\"n\\": " [0-9] [0-9]? [0-9]? ", \\"ok\\": " ("true" | "false") "}"';
    const prompt = model.tokenize("Answer in JSON:", { addSpecial: true });
    for (const seed of [1, 2, 3]) {
      ctx.clear();
      ctx.setSampler(7, { grammar, temperature: 1.0, topK: 64, seed });
      const batch = new DecodeBatch(64).addSequence(prompt, 0, 7);
      let pos = prompt.length;
      const toks: number[] = [];
      let eog = false;
      for (let i = 0; i < 40 && !eog; i++) {
        const r = await ctx.decode(batch);
        const o = r.outputs[0]!;
        if (o.isEog) eog = true;
        else toks.push(o.token);
        batch.clear().add(o.token, pos++, 7, true);
      }
      const text = model.detokenize(toks);
      assert.match(text, /^\{"n": [0-9]{1,3}, "ok": (true|false)\}$/);
      assert.ok(eog, `no EOG after ${JSON.stringify(text)}`);
    }
    // a token the grammar does not allow here is refused (llama.cpp itself would abort the process on
    // an early EOG), and the grammar state is untouched: sampling still yields exactly "ab" then EOG
    ctx.clear();
    ctx.setSampler(7, { grammar: 'root ::= "ab"' });
    assert.throws(
      () => ctx.acceptToken(7, model.info.eos!),
      (e: unknown) => isLlamaError(e, "LLAMA_SAMPLER_REJECTED"),
    );
    const [ab] = await generate(ctx, [prompt], 6, 7);
    const end = ab!.findIndex((t) => model.isEog(t));
    assert.ok(end > 0, "grammar must end in EOG");
    assert.equal(model.detokenize(ab!.slice(0, end)), "ab");
    ctx.setSampler(7, null);
    setLogLevel("none"); // the parser logs its complaint; keep the test output clean
    try {
      assert.throws(
        () => ctx.setSampler(7, { grammar: "root ::= (" }),
        (e: unknown) => isLlamaError(e, "LLAMA_GRAMMAR_INVALID"),
      );
    } finally {
      setLogLevel("warn");
    }
    ctx.clear();
  });

  test("seeded sampling is reproducible and resetSampler rewinds it", async () => {
    const prompt = model.tokenize("Roll the dice:", { addSpecial: true });
    const run = async () => {
      ctx.clear();
      ctx.resetSampler(3);
      return (await generate(ctx, [prompt], 8, 3))[0];
    };
    ctx.setSampler(3, { temperature: 1.5, topK: 200, topP: 0.95, minP: 0.01, seed: 42 });
    const a = await run();
    const b = await run();
    assert.deepEqual(a, b);
    ctx.setSampler(3, { temperature: 1.5, topK: 200, topP: 0.95, minP: 0.01, seed: 43 });
    assert.notDeepEqual(await run(), a);
    ctx.setSampler(3, null);
    ctx.clear();
  });

  test("sequences sampled together on several threads each follow their own seed", async () => {
    // 16 rows of an 8192-token vocabulary: enough work for two sampling threads
    const wide = await model.createContext({ nCtx: 2048, nSeqMax: 16, nBatch: 512, threads: 2 });
    try {
      const prompt = model.tokenize("Pick a card:", { addSpecial: true });
      const seqs = Array.from({ length: 16 }, (_, s) => s);
      const run = async (seedOf: (s: number) => number) => {
        wide.clear();
        for (const s of seqs) wide.setSampler(s, { temperature: 1, seed: seedOf(s) });
        return generate(
          wide,
          seqs.map(() => prompt),
          6,
        );
      };
      // one seed for all: every row draws what the first draws
      const same = await run(() => 7);
      for (const tokens of same) assert.deepEqual(tokens, same[0]);
      // a seed each: the rows differ, and the same seeds draw the same tokens again
      const own = await run((s) => 100 + s);
      assert.ok(new Set(own.map((t) => t.join())).size > 8, "different seeds draw different tokens");
      assert.deepEqual(await run((s) => 100 + s), own);
    } finally {
      wide.free();
    }
  });

  test("logprobs: the sampled token's and the top tokens' log-softmax of the raw logits", async () => {
    const prompt = model.tokenize("The capital of", { addSpecial: true });
    ctx.clear();
    ctx.setSampler(0, { logprobs: 4 }); // greedy
    ctx.setSampler(1, { temperature: 1, seed: 3, logprobs: 20 });
    ctx.setSampler(2, { logitBias: [{ token: 5, bias: 100 }], logprobs: 0 }); // biased to token 5
    ctx.setSampler(3, null);
    const batch = new DecodeBatch(4 * prompt.length);
    for (let s = 0; s < 4; s++) batch.addSequence(prompt, 0, s);
    const r = await ctx.decode(batch, { sample: true, returnLogits: true });
    const bySeq = new Map(r.outputs.map((o) => [o.seqId, o]));
    for (const [seq, top] of [
      [0, 4],
      [1, 20],
      [2, 0],
    ] as const) {
      const out = bySeq.get(seq)!;
      const logits = out.logits!;
      let max = -Infinity;
      for (const l of logits) max = Math.max(max, l);
      let sum = 0;
      for (const l of logits) sum += Math.exp(l - max);
      const logZ = max + Math.log(sum);
      assert.ok(Math.abs(out.logprobs!.logprob - (logits[out.token]! - logZ)) < 1e-4, `seq ${seq}`);
      const ranked = Array.from(logits.keys()).sort((a, b) => logits[b]! - logits[a]! || a - b);
      assert.deepEqual(
        out.logprobs!.top.map((t) => t.token),
        ranked.slice(0, top),
      );
      for (const t of out.logprobs!.top) assert.ok(Math.abs(t.logprob - (logits[t.token]! - logZ)) < 1e-4);
    }
    assert.equal(bySeq.get(0)!.token, bySeq.get(0)!.logprobs!.top[0]!.token, "greedy takes the top token");
    assert.equal(bySeq.get(2)!.token, 5);
    assert.ok(bySeq.get(2)!.logprobs!.logprob < -1, "the logprob is the model's, not the biased row's");
    assert.equal(bySeq.get(3)!.logprobs, undefined);
    assert.throws(() => ctx.setSampler(0, { logprobs: 21 }), RangeError);
    assert.throws(() => ctx.setSampler(0, { logprobs: 1.5 }), RangeError);
    for (let s = 0; s < 4; s++) ctx.setSampler(s, null);
    ctx.clear();
  });

  test("scored rows: each prompt row's next token's log-softmax, not sampled; the last row still sampled", async () => {
    const prompt = model.tokenize("The capital of France is", { addSpecial: true });
    ctx.clear();
    ctx.setSampler(0, { temperature: 1, seed: 5 });
    // the reference: every row's raw logits
    const plain = new DecodeBatch(prompt.length);
    prompt.forEach((token, pos) => {
      plain.add(token, pos, 1, true);
    });
    const reference = await ctx.decode(plain, { sample: false, returnLogits: true });
    const logSoftmax = (logits: Float32Array, token: number) => {
      let max = -Infinity;
      for (const l of logits) max = Math.max(max, l);
      let sum = 0;
      for (const l of logits) sum += Math.exp(l - max);
      return logits[token]! - (max + Math.log(sum));
    };
    const batch = new DecodeBatch(prompt.length);
    prompt.forEach((token, pos) => {
      const last = pos === prompt.length - 1;
      batch.add(token, pos, 0, last, last ? null : { target: prompt[pos + 1]!, top: pos % 3 });
    });
    const r = await ctx.decode(batch);
    assert.equal(r.outputs.length, prompt.length);
    for (const out of r.outputs.slice(0, -1)) {
      const pos = out.batchIndex;
      assert.equal(out.scored, true);
      assert.equal(out.token, prompt[pos + 1]);
      const logits = reference.outputs[pos]!.logits!;
      assert.ok(Math.abs(out.logprobs!.logprob - logSoftmax(logits, out.token)) < 1e-3, `row ${pos}`);
      // 1 + the tokens above it (the two decodes may round apart: a margin either way)
      const above = (margin: number) => logits.filter((l) => l > logits[out.token]! + margin).length + 1;
      assert.ok(out.rank! <= above(-1e-4) && out.rank! >= above(1e-4), `row ${pos}'s rank ${out.rank}`);
      const ranked = Array.from(logits.keys()).sort((a, b) => logits[b]! - logits[a]! || a - b);
      assert.deepEqual(
        out.logprobs!.top.map((t) => t.token),
        ranked.slice(0, pos % 3),
      );
    }
    const sampled = r.outputs.at(-1)!;
    assert.equal(sampled.scored, undefined);
    assert.equal(sampled.logprobs, undefined, "the sequence asked for no logprobs of its samples");
    const tooMany = new DecodeBatch(1);
    tooMany.add(prompt[0]!, 0, 2, false, { target: 1, top: 21 });
    assert.throws(() => ctx.decodeSync(tooMany), RangeError, "at most 20 alternatives");
    ctx.setSampler(0, null);
    ctx.clear();
  });

  test("greedy without a sampler chain picks llama.cpp's greedy token", async () => {
    const prompt = model.tokenize("The capital of", { addSpecial: true });
    ctx.clear();
    ctx.setSampler(0, null); // no chain: the decode's own argmax
    ctx.setSampler(1, { logitBias: [{ token: 0, bias: 0 }] }); // a chain ending in llama.cpp's greedy sampler
    const [fast, chained] = await generate(ctx, [prompt, prompt], 16);
    assert.deepEqual(fast, chained);
    ctx.setSampler(1, null);
    ctx.clear();
  });

  test("errors: busy context, full pool, oversized batch, bad ids", async () => {
    const prompt = model.tokenize("busy busy busy", { addSpecial: true });
    ctx.clear();
    const pending = ctx.decode(new DecodeBatch(16).addSequence(prompt, 0, 0));
    assert.equal(ctx.busy, true);
    assert.throws(
      () => ctx.seqRemove(0),
      (e: unknown) => isLlamaError(e, "LLAMA_CONTEXT_BUSY"),
    );
    assert.throws(
      () => ctx.free(),
      (e: unknown) => isLlamaError(e, "LLAMA_CONTEXT_BUSY"),
    );
    await pending;
    assert.equal(ctx.busy, false);
    assert.equal(ctx.seqPosMax(0), prompt.length - 1);
    ctx.clear();

    await assert.rejects(
      ctx.decode(new DecodeBatch(600).addSequence(new Int32Array(600).fill(5), 0, 0)),
      RangeError,
    );
    await assert.rejects(ctx.decode(new DecodeBatch(1).addSequence([5], 0, 8)), RangeError);
    await assert.rejects(ctx.decode(new DecodeBatch(1).addSequence([9999], 0, 0)), RangeError);
    assert.throws(() => ctx.seqPosMax(99), RangeError);

    // a small pool (llama.cpp rounds nCtx up to a multiple of 256): fill seq 0 to 6 cells short of
    // full, then seq 1 cannot get 10
    const small = await model.createContext({ nCtx: 256, nSeqMax: 2, nBatch: 256, threads: 1 });
    try {
      const cells = small.info.nCtx;
      assert.equal(cells, 256);
      await small.decode(new DecodeBatch(256).addSequence(new Int32Array(cells - 6).fill(7), 0, 0));
      await assert.rejects(
        small.decode(new DecodeBatch(16).addSequence(new Int32Array(10).fill(7), 0, 1)),
        (e: unknown) => isLlamaError(e, "LLAMA_DECODE_NO_KV_SLOT"),
      );
      // nothing was half-applied: seq 1 is still empty, and freeing cells makes room again
      assert.equal(small.seqPosMax(1), -1);
      assert.equal(small.seqRemove(0, 100), true);
      await small.decode(new DecodeBatch(16).addSequence(new Int32Array(10).fill(7), 0, 1));
      assert.equal(small.seqPosMax(1), 9);
    } finally {
      small.free();
    }
    assert.throws(
      () => model.free(),
      (e: unknown) => isLlamaError(e, "LLAMA_MODEL_IN_USE"),
    );
  });
});
