import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import type { SchedulingPolicy } from "../core/policy.js";
import { MemorySink, Recorder } from "../core/recorder/recorder.js";
import { ensureBuiltinModel } from "../gguf/index.js";
import { Engine, type EngineTierOptions } from "./engine.js";
import {
  type EngineMetrics,
  EngineRejection,
  type OutputLogprob,
  type SamplingParams,
} from "./engine-api.js";
import { createLlamaEngine, defaultKvCells } from "./engine-factory.js";
import { isNativeAvailable } from "./native/llama-native.js";
import { LlamaModelRunner } from "./runners/llama-model-runner.js";
import type { KvLayout } from "./runners/model-runner.js";
import { type EngineStepRecord, type StepLogFile, stepLogFile } from "./step-log.js";
import { chat, type DoneEvent, fixedTtlPolicy, request, run } from "./test-support/engine-helpers.js";

const supported = process.platform === "linux" && process.arch === "x64" && isNativeAvailable();

interface LlamaEngineTestOptions {
  policy?: string | SchedulingPolicy;
  kvCells?: number;
  slots?: number;
  maxNumSeqs?: number;
  tiers?: EngineTierOptions;
  recorder?: Recorder;
  kvLayout?: KvLayout;
  stepLog?: StepLogFile;
  kvRunningOnly?: boolean;
}

// byte-level BPE, as Llama 3 and Qwen tokenize, beside the built-in SentencePiece-style tokenizer
for (const tokenizer of ["spm", "bpe"] as const)
  describe(`engine over llama.cpp (built-in tiny model, ${tokenizer} tokenizer)`, {
    skip: supported ? false : "no llama.cpp addon",
  }, () => {
    let modelPath: string;

    before(async () => {
      modelPath = await ensureBuiltinModel({ preset: "tiny", tokenizer });
    });

    async function engine(options: LlamaEngineTestOptions = {}): Promise<Engine> {
      const runner = await LlamaModelRunner.open({
        modelPath,
        kvCells: options.kvCells ?? 4096,
        maxSeqs: options.slots ?? 8,
        batchTokens: 256,
        threads: 1,
        ...(options.kvLayout ? { kvLayout: options.kvLayout } : {}),
      });
      return new Engine({
        runner,
        policy: options.policy ?? "vllm",
        maxNumSeqs: options.maxNumSeqs ?? 4,
        maxNumBatchedTokens: 256,
        ...(options.tiers ? { tiers: options.tiers } : {}),
        ...(options.recorder ? { recorder: options.recorder } : {}),
        ...(options.stepLog ? { stepLog: options.stepLog } : {}),
        ...(options.kvRunningOnly ? { kvRunningOnly: true } : {}),
      });
    }

    /** Every sequence's KV in llama.cpp is exactly positions [0, length) the scheduler placed there. */
    function checkSlots(e: Engine): void {
      const ctx = (e.runner as LlamaModelRunner).context;
      for (const seq of e.sequences.seqs) {
        assert.equal(ctx.seqPosMax(seq.id), seq.length - 1, `sequence ${seq.id} end`);
        assert.equal(ctx.seqPosMin(seq.id), seq.length > 0 ? 0 : -1, `sequence ${seq.id} start`);
      }
    }

    /**
     * Two greedy runs of the same prompt tokens whose KV was computed differently (a pinned prefix from the
     * first turn's decode steps, or one prefill) agree to float rounding: logprobs within 0.01, the same
     * tokens up to the first near tie, where rounding may pick either of the two.
     */
    function assertSameRun(a: DoneEvent, b: DoneEvent): void {
      const [x, y] = [a.logprobs ?? [], b.logprobs ?? []];
      assert.ok(x.length > 0 && y.length > 0, "runs with logprobs");
      for (let i = 0; i < Math.min(x.length, y.length); i++) {
        const [x0, x1] = (x[i] as OutputLogprob).top;
        const [y0, y1] = (y[i] as OutputLogprob).top;
        assert.ok(x0 && x1 && y0 && y1);
        assert.ok(Math.abs(x0.logprob - y0.logprob) < 0.01, `token ${i}: ${x0.logprob} vs ${y0.logprob}`);
        if (x0.logprob - x1.logprob < 0.01 || y0.logprob - y1.logprob < 0.01) return;
        assert.deepEqual(x0.bytes, y0.bytes, `token ${i}`);
      }
    }

    const prompts = [
      "list the files in the repository and explain the layout",
      "run the failing test and show me the traceback",
      "patch the off-by-one error in the parser",
      "write a summary of what changed",
    ];

    test("a pool larger than the model's trained context starts without llama.cpp's overflow warning", () => {
      // llama.cpp writes to the process's stderr from native code: only a child's stderr can be read.
      const runnerUrl = new URL("./runners/llama-model-runner.ts", import.meta.url).href;
      const script = `
      const { LlamaModelRunner } = await import(${JSON.stringify(runnerUrl)});
      const open = (kvCells) => LlamaModelRunner.open({ modelPath: ${JSON.stringify(modelPath)}, kvCells, maxSeqs: 4, batchTokens: 64, threads: 1 });
      const probe = await open(256);
      const trained = probe.model.info.nCtxTrain;
      await probe.close();
      const runner = await open(2 * trained);
      console.log(runner.maxContextTokens === trained ? "bounded" : "unbounded");
      await runner.close();`;
      const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
        encoding: "utf8",
      });
      assert.equal(child.status, 0, child.stderr);
      assert.equal(child.stdout.trim(), "bounded", "each sequence stays within the trained context");
      assert.doesNotMatch(child.stderr, /training context overflow/);
    });

    test("llama.cpp's micro-batch: --ubatch-size when given, else 512 rows on the CPU, never above the step", async () => {
      const rows = async (opts: { batchTokens: number; ubatchTokens?: number }) => {
        const runner = await LlamaModelRunner.open({
          modelPath,
          kvCells: 1024,
          maxSeqs: 2,
          threads: 1,
          ...opts,
        });
        try {
          return runner.context.info.nUBatch;
        } finally {
          await runner.close();
        }
      };
      assert.equal(await rows({ batchTokens: 1024, ubatchTokens: 128 }), 128);
      assert.equal(await rows({ batchTokens: 1024 }), 512);
      assert.equal(await rows({ batchTokens: 256, ubatchTokens: 512 }), 256);
    });

    test("the step log and the metrics split the host's sampling out of each step's compute", async () => {
      const dir = await mkdtemp(join(tmpdir(), "continuum-llama-steps-"));
      const path = join(dir, "steps.jsonl");
      const e = await engine({ stepLog: stepLogFile(path) });
      let metrics: EngineMetrics;
      try {
        const sampling = { maxTokens: 8, temperature: 1, seed: 5, ignoreEos: true };
        await Promise.all(
          prompts.map((p, i) => run(e, request(`s${i}`, e.renderChat(chat(p)), { sampling }))),
        );
        metrics = e.metrics();
      } finally {
        await e.shutdown();
      }
      const records = (await readFile(path, "utf8"))
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line) as EngineStepRecord);
      await rm(dir, { recursive: true, force: true });
      assert.ok(records.length > 0);
      for (const r of records) assert.ok((r.sampleS ?? -1) >= 0 && (r.sampleS ?? 0) <= r.computeS);
      const sampled = records.reduce((sum, r) => sum + (r.sampleS ?? 0), 0);
      assert.ok(sampled > 0, "sampling took time");
      // /metrics' continuum:sampling_seconds_total and continuum:model_compute_seconds_total
      assert.ok(Math.abs(metrics.samplingS - sampled) < 1e-9);
      assert.ok(Math.abs(metrics.modelComputeS - records.reduce((sum, r) => sum + r.computeS, 0)) < 1e-9);
    });

    test("greedy text is the same alone and batched with 3 others", async () => {
      const e = await engine();
      try {
        const reqs = prompts.map((p, i) =>
          request(`g${i}`, e.renderChat(chat(p)), { sampling: { maxTokens: 24, ignoreEos: true } }),
        );
        const alone: string[] = [];
        for (const r of reqs)
          alone.push((await run(e, { ...r, requestId: `${r.requestId}-alone` })).done.text);
        const steps = e.loopStats.steps;
        const batched = await Promise.all(reqs.map((r) => run(e, r)));
        batched.forEach((b, i) => {
          assert.equal(b.done.usage.completionTokens, 24);
          assert.equal(b.deltas, b.done.text);
          assert.equal(b.done.text, alone[i], `request ${i}`);
        });
        assert.ok(e.loopStats.steps - steps < 4 * 25, "the four ran batched");
        assert.ok(alone.some((t) => t.length > 0));
      } finally {
        await e.shutdown();
      }
    });

    test("preserved tokens: a control token is written into the text by name, others skipped as before", async () => {
      const e = await engine();
      try {
        const start = e.runner.tokenize("<|im_start|>").at(-1)!;
        const sampling = { maxTokens: 2, ignoreEos: true, logitBias: [{ token: start, bias: 100 }] };
        const skipped = await run(e, request("p0", "Hello", { sampling }));
        assert.equal(skipped.done.text, "");
        const kept = await run(
          e,
          request("p1", "Hello", {
            sampling: { ...sampling, preservedTokens: ["<|im_start|>", "two tokens"] },
          }),
        );
        assert.equal(kept.done.text, "<|im_start|><|im_start|>");
        assert.equal(kept.deltas, kept.done.text);
      } finally {
        await e.shutdown();
      }
    });

    test("streams layout: a prompt prefix copied into another slot's stream gives the text computed alone", async () => {
      const streams = await engine({ kvLayout: "streams", kvCells: 8 * 512 });
      const unified = await engine();
      try {
        assert.equal(streams.runner.kvLayout, "streams");
        assert.equal(streams.maxContextTokens, 512);
        const system = { role: "system" as const, content: "You are a careful software agent. ".repeat(4) };
        const sampling = { maxTokens: 16, ignoreEos: true };
        const ask = (q: string) => streams.renderChat([system, ...chat(q)]);
        await run(streams, request("a", ask("open the failing test"), { sampling }));
        const second = await run(streams, request("b", ask("summarise the diff"), { sampling }));
        const alone = await run(unified, request("b", ask("summarise the diff"), { sampling }));
        assert.ok(second.done.usage.cachedTokens >= 32, `${second.done.usage.cachedTokens} cached`);
        assert.equal(streams.kvStats().copiedTokens, second.done.usage.cachedTokens);
        assert.equal(second.done.text, alone.done.text);
        checkSlots(streams);
        await assert.rejects(
          async () => run(streams, request("long", "word ".repeat(600), { sampling })),
          /at most 511/,
          "a slot holds at most its stream",
        );
      } finally {
        await Promise.all([streams.shutdown(), unified.shutdown()]);
      }
    });

    test("a second turn runs the same from a pinned prefix and in a fresh engine", async () => {
      const turn1 = chat("find the bug in utils.py");
      const fresh = await engine();
      const pinned = await engine({ policy: fixedTtlPolicy(60) });
      try {
        const prompt1 = pinned.renderChat(turn1);
        const sampling = { maxTokens: 16, ignoreEos: true };
        const first = await run(
          pinned,
          request("t1", prompt1, { programId: "job", sampling, returnTokenIds: true }),
        );
        const prompt2 = pinned.renderChat([
          ...turn1,
          { role: "assistant", content: first.done.text },
          { role: "tool", content: "utils.py:12: IndexError" },
        ]);
        const turn2 = request("t2", prompt2, {
          programId: "job",
          isLastStep: true,
          sampling: { ...sampling, logprobs: 2 },
          returnTokenIds: true,
        });

        const hit = await run(pinned, turn2);
        // the model sees its own tokens again, not the reply's text tokenized anew (which a BPE vocabulary
        // splits otherwise): the second prompt goes on from the first prompt's ids and the generated ones
        const said = [...(first.done.tokenIds?.prompt ?? []), ...(first.done.tokenIds?.output ?? [])];
        assert.deepEqual(hit.done.tokenIds?.prompt.slice(0, said.length), said);
        const reference = await run(fresh, { ...turn2, promptTokenIds: hit.done.tokenIds?.prompt ?? [] });
        assert.equal(reference.done.usage.cachedTokens, 0);
        assert.ok(
          hit.done.usage.cachedTokens >= pinned.countTokens(prompt1) - 16,
          `${hit.done.usage.cachedTokens}`,
        );
        const kv = pinned.kvStats();
        assert.ok(kv.takenOverTokens + kv.sharedTokens >= hit.done.usage.cachedTokens);
        assertSameRun(hit.done, reference.done);
        checkSlots(pinned);
      } finally {
        await Promise.all([fresh.shutdown(), pinned.shutdown()]);
      }
    });

    test("a sequence saved to the CPU tier and restored continues exactly", async () => {
      const turn1 = chat("read the config file and report the port");
      const fresh = await engine();
      // only running sequences stay in the pool: the pinned one waits in the tier for its next turn
      const tiered = await engine({
        policy: fixedTtlPolicy(60),
        tiers: { cpuBytes: 64 << 20 },
        kvRunningOnly: true,
      });
      try {
        const prompt1 = tiered.renderChat(turn1);
        const sampling = { maxTokens: 12, ignoreEos: true };
        const first = await run(tiered, request("c1", prompt1, { programId: "job", sampling }));
        const turn2 = request(
          "c2",
          tiered.renderChat([
            ...turn1,
            { role: "assistant", content: first.done.text },
            { role: "tool", content: "port = 8080" },
          ]),
          { programId: "job", isLastStep: true, sampling },
        );
        const restored = await run(tiered, turn2);
        assert.equal(tiered.kvStats().savedToTier, 1);
        assert.equal(tiered.kvStats().parkedPins, 1);
        assert.ok(tiered.kvStats().restoredTokens >= tiered.countTokens(prompt1) - 16);
        assert.ok(restored.done.usage.cachedTokens > 0);
        // the reference serves turn 1 too: turn 2's prompt then keeps turn 1's generated tokens in both engines
        const referenceFirst = await run(fresh, request("c1", prompt1, { programId: "job", sampling }));
        assert.equal(referenceFirst.done.text, first.done.text);
        const reference = await run(fresh, turn2);
        assert.equal(restored.done.text, reference.done.text);
        checkSlots(tiered);
      } finally {
        await Promise.all([fresh.shutdown(), tiered.shutdown()]);
      }
    });

    // greedy, and greedy with a frequency penalty that a +30 bias on one token makes bite after ~15 tokens:
    // a preempted request's sampler must count the output it had before, or it goes back to that token
    const burstSamplings: readonly Partial<SamplingParams>[] = [
      {},
      { logitBias: [{ token: 1234, bias: 30 }], frequencyPenalty: 2 },
    ];
    for (const sampling of burstSamplings) {
      test(`a burst that overfills the pool preempts, never running llama.cpp out of cells (${JSON.stringify(sampling)})`, async () => {
        const sink = new MemorySink();
        const e = await engine({ kvCells: 1024, slots: 12, maxNumSeqs: 8, recorder: new Recorder(sink) });
        const alone = await engine();
        try {
          const long = (i: number) =>
            `${prompts[i % 4]} ${"and then keep going with more detail ".repeat(8)} ${i}`;
          const reqs = Array.from({ length: 10 }, (_, i) =>
            request(`burst${i}`, e.renderChat(chat(long(i))), {
              sampling: { maxTokens: 60, ignoreEos: true, ...sampling },
            }),
          );
          const results = await Promise.all(reqs.map((r) => run(e, r)));
          for (const r of results) {
            assert.equal(r.done.finishReason, "length");
            assert.equal(r.done.usage.completionTokens, 60);
          }
          assert.ok(e.metrics().preemptions > 0, "the pool was overfilled");
          assert.equal(e.loopStats.failedSteps, 0);
          assert.equal(e.metrics().kvUsage, 0);
          checkSlots(e);
          // preempted requests recompute their prompt and output so far: same greedy text as alone
          const preempted = new Set(
            sink.lines
              .map((l) => JSON.parse(l) as { event: string; request: string })
              .filter((ev) => ev.event === "preempted")
              .map((ev) => ev.request),
          );
          const checked = reqs.filter((r) => preempted.has(r.requestId)).slice(0, 2);
          assert.ok(checked.length > 0);
          for (const r of checked) {
            const i = reqs.indexOf(r);
            assert.equal((await run(alone, r)).done.text, results[i]?.done.text, `preempted ${r.requestId}`);
          }
        } finally {
          await Promise.all([e.shutdown(), alone.shutdown()]);
        }
      });
    }

    test("createLlamaEngine: built-in model, vLLM-style options, event log written at shutdown", async () => {
      const dir = await mkdtemp(join(tmpdir(), "continuum-factory-"));
      try {
        const e = await createLlamaEngine({
          builtinModel: "tiny",
          policy: "cachettl",
          maxNumSeqs: 2,
          maxNumBatchedTokens: 128,
          kvCacheTokens: 1024,
          threads: 1,
          recordPath: join(dir, "serve.jsonl"),
        });
        assert.equal(e.runner.maxSeqs, 18);
        assert.equal(e.scheduler.maxNumSeqs, 2);
        assert.ok(e.scheduler.kv.tierIndex?.names.includes("cpu"), "a CPU engine gets a RAM tier by default");
        assert.match(e.kvSummary, /^\d+ KV tokens, RAM tier 4 GiB$/);
        assert.ok(e.maxContextTokens <= 1024);
        const r = await run(
          e,
          request("f1", e.renderChat(chat("hello")), { programId: "job", sampling: { maxTokens: 8 } }),
        );
        assert.ok(r.done.usage.completionTokens >= 1 && r.done.usage.completionTokens <= 8);
        assert.ok(!existsSync(join(dir, "serve.jsonl")));
        await e.shutdown();
        const events = readFileSync(join(dir, "serve.jsonl"), "utf8").trim().split("\n");
        assert.ok(events.some((l) => l.includes('"event":"departure"')));
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    test("createLlamaEngine imports a policy module given as the policy (serve --scheduling-policy ./p.mjs)", async () => {
      const example = fileURLToPath(new URL("../../examples/policies/tool-pin.mjs", import.meta.url));
      const e = await createLlamaEngine({
        builtinModel: "tiny",
        policy: example,
        kvCacheTokens: 1024,
        threads: 1,
      });
      try {
        assert.equal(e.scheduler.policy.name, "tool-pin");
        const r = await run(e, request("m1", e.renderChat(chat("hello")), { sampling: { maxTokens: 4 } }));
        assert.ok(r.done.usage.completionTokens >= 1);
      } finally {
        await e.shutdown();
      }
      await assert.rejects(
        createLlamaEngine({ builtinModel: "tiny", policy: "./no/such/policy.mjs", threads: 1 }),
        /policy module \.\/no\/such\/policy\.mjs \(.*\): file not found/,
      );
    });

    test("createLlamaEngine without a pool size: the built-in small model (serve's default) holds a 64k-token context", async () => {
      const e = await createLlamaEngine({ builtinModel: "small", maxNumSeqs: 2, threads: 1 });
      try {
        assert.equal(e.maxContextTokens, 65_536);
        assert.equal(e.runner.kvCells, 131_072, "two such contexts");
        const r = await run(e, request("big", e.renderChat(chat("hello")), { sampling: { maxTokens: 4 } }));
        assert.ok(r.done.usage.completionTokens >= 1);
      } finally {
        await e.shutdown();
      }
      // other models: two contexts of at most 64k tokens, within 4 GiB of f16 KV, at least 16384 cells
      assert.equal(defaultKvCells({ contextTokens: 4096, kvBytesPerToken: 1024 }), 16_384);
      assert.equal(defaultKvCells({ contextTokens: 131_072, kvBytesPerToken: 131_072 }), 32_768);
    });

    test("createLlamaEngine with the streams layout: one slot beyond the running ones, each its share of the cells", async () => {
      const e = await createLlamaEngine({
        builtinModel: "tiny",
        maxNumSeqs: 3,
        kvCacheTokens: 4096,
        kvLayout: "streams",
        threads: 1,
      });
      try {
        assert.equal(e.runner.kvLayout, "streams");
        assert.equal(e.runner.maxSeqs, 4);
        assert.equal(e.maxContextTokens, 1024);
        assert.match(e.kvSummary, /, 4 streams of 1024 \(longest sequence 1023 tokens\), RAM tier 4 GiB$/);
        const r = await run(e, request("s1", e.renderChat(chat("hello")), { sampling: { maxTokens: 4 } }));
        assert.ok(r.done.usage.completionTokens >= 1);
      } finally {
        await e.shutdown();
      }
    });

    test("grammar, seeded sampling, and a bad grammar rejected as invalid_request", async () => {
      const e = await engine();
      try {
        const prompt = e.renderChat(chat("answer yes or no"));
        const yesNo = await run(e, request("y", prompt, { sampling: { grammar: 'root ::= "yes" | "no"' } }));
        assert.equal(yesNo.done.finishReason, "stop");
        assert.ok(["yes", "no"].includes(yesNo.done.text), yesNo.done.text);
        const hot = { temperature: 1.2, topK: 100, topP: 0.95, seed: 7, maxTokens: 12, ignoreEos: true };
        const a = await run(e, request("s1", prompt, { sampling: hot }));
        const b = await run(e, request("s2", prompt, { sampling: hot }));
        assert.equal(a.done.text, b.done.text);
        await assert.rejects(
          run(e, request("bad", prompt, { sampling: { grammar: "root ::= (" } })),
          (err: unknown) => err instanceof EngineRejection && err.code === "invalid_request",
        );
        assert.equal(e.metrics().running, 0);
        assert.equal(
          (await run(e, request("after", prompt, { sampling: { maxTokens: 4 } }))).done.finishReason,
          "length",
        );
      } finally {
        await e.shutdown();
      }
    });
  });
