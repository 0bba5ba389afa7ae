import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { FileSink } from "../core/recorder/file-sink.js";
import { MemorySink, Recorder } from "../core/recorder/recorder.js";
import { loadPolicyModules } from "../policies/index.js";
import { Engine } from "./engine.js";
import { EngineRejection } from "./engine-api.js";
import type { RunnerBatch } from "./runners/model-runner.js";
import {
  chat,
  type DoneEvent as Done,
  fixedTtlPolicy,
  request,
  run,
  sleep,
} from "./test-support/engine-helpers.js";
import {
  createFakeEngine,
  defaultFakeReply,
  type FakeEngineOptions,
  FakeModelRunner,
} from "./test-support/fake-model-runner.js";

async function withEngine<T>(options: FakeEngineOptions, body: (engine: Engine) => Promise<T>): Promise<T> {
  const engine = createFakeEngine(options);
  try {
    return await body(engine);
  } finally {
    await engine.shutdown();
  }
}

describe("engine over the fake runner", () => {
  test("concurrent generations match sequential ones, deltas add up to the text", async () => {
    const prompts = Array.from({ length: 8 }, (_, i) =>
      i % 2 === 0 ? `plain prompt number ${i} ${"x".repeat(i * 7)}` : undefined,
    );
    const requests = prompts.map((plain, i) =>
      plain
        ? request(`r${i}`, plain, { sampling: { maxTokens: 40 + i } })
        : request(`r${i}`, "", { sampling: { maxTokens: 200 } }),
    );
    const sequential = await withEngine({ policy: "vllm" }, async (engine) => {
      const out: Done[] = [];
      for (const [i, r] of requests.entries()) {
        const req = r.prompt ? r : { ...r, prompt: engine.renderChat(chat(`task ${i}: fix bug ${i * 13}`)) };
        const { deltas, done } = await run(engine, req);
        assert.equal(deltas, done.text);
        out.push(done);
      }
      return out;
    });
    const concurrent = await withEngine({ policy: "vllm", maxNumBatchedTokens: 64 }, async (engine) => {
      const all = requests.map((r, i) => {
        const req = r.prompt ? r : { ...r, prompt: engine.renderChat(chat(`task ${i}: fix bug ${i * 13}`)) };
        return run(engine, req);
      });
      const results = await Promise.all(all);
      for (const { deltas, done } of results) assert.equal(deltas, done.text);
      assert.ok(engine.loopStats.steps < 8 * 40, "requests were batched");
      return results.map((r) => r.done);
    });
    for (let i = 0; i < 8; i++) {
      const a = sequential[i] as Done;
      const b = concurrent[i] as Done;
      assert.equal(b.text, a.text, `request ${i}`);
      assert.equal(b.finishReason, a.finishReason);
      assert.equal(b.usage.completionTokens, a.usage.completionTokens);
      assert.equal(b.usage.promptTokens, a.usage.promptTokens);
    }
    // chat prompts got the scripted reply, ending on EOS
    const chatDone = sequential[1] as Done;
    assert.equal(chatDone.finishReason, "stop");
    assert.ok(chatDone.text.length > 10 && chatDone.text.endsWith("."));
  });

  test("a program's next prompt keeps its last turn's generated ids, counted once and reused by generate", async () => {
    const runner = new FakeModelRunner({});
    const tokenized: string[] = [];
    const tokenize = runner.tokenize.bind(runner);
    runner.tokenize = (text: string) => {
      tokenized.push(text);
      return tokenize(text);
    };
    const engine = new Engine({ runner, policy: "cachettl" });
    try {
      const prompt1 = engine.renderChat(chat("list the files"));
      const first = await run(
        engine,
        request("t1", prompt1, { programId: "p", sampling: { maxTokens: 30 } }),
      );
      const prompt2 = `${prompt1}${first.done.text} then read the failing test`;
      const program = { programId: "p", cacheSalt: null };
      const counted = await engine.countPromptTokens(prompt2, program);
      tokenized.length = 0;
      const second = await run(
        engine,
        request("t2", prompt2, { programId: "p", sampling: { maxTokens: 4 } }),
      );
      assert.deepEqual(tokenized, [], "generate() took the counted ids");
      assert.equal(second.done.usage.promptTokens, counted);
      const sequence = first.done.usage.promptTokens + first.done.usage.completionTokens - 1;
      assert.ok(
        second.done.usage.cachedTokens >= sequence - (sequence % 16),
        JSON.stringify(second.done.usage),
      );
    } finally {
      await engine.shutdown();
    }
  });

  test("a stream tells the prompt's tokens and cached tokens once, before the done event, as the done event counts them", async () => {
    await withEngine({ policy: "cachettl" }, async (engine) => {
      const prompt1 = engine.renderChat(chat("list the files"));
      const first = await run(
        engine,
        request("u1", prompt1, { programId: "p", sampling: { maxTokens: 30 } }),
      );
      const prompt2 = `${prompt1}${first.done.text} then read the failing test`;
      const usages: unknown[] = [];
      let done: Done | null = null;
      for await (const event of engine.generate(
        request("u2", prompt2, { programId: "p", sampling: { maxTokens: 8 } }),
        new AbortController().signal,
      )) {
        if (event.type === "delta" && event.promptUsage) {
          assert.equal(done, null);
          assert.equal(event.text, "");
          usages.push(event.promptUsage);
        }
        if (event.type === "done") done = event;
      }
      assert.ok(done !== null && done.usage.cachedTokens > 0, JSON.stringify(done?.usage));
      assert.deepEqual(usages, [
        { promptTokens: done.usage.promptTokens, cachedTokens: done.usage.cachedTokens },
      ]);
    });
  });

  test("endProgram releases a pinned program's KV at once, in the scheduler and in the slots", async () => {
    await withEngine({ policy: fixedTtlPolicy(60) }, async (engine) => {
      await run(
        engine,
        request("t0", "a turn before a tool call", { programId: "job", sampling: { maxTokens: 4 } }),
      );
      assert.equal(engine.scheduler.numPinnedPrograms, 1);
      assert.equal(engine.sequences.seqs.filter((s) => s.pin !== null).length, 1);
      assert.equal(engine.endProgram("job"), true);
      assert.equal(engine.endProgram("job"), false, "already ended");
      assert.equal(engine.endProgram("nobody"), false);
      // the scheduler hears of it at the loop's next turn
      for (let i = 0; i < 50 && engine.scheduler.numPinnedPrograms > 0; i++) await sleep(5);
      assert.equal(engine.scheduler.numPinnedPrograms, 0);
      for (let i = 0; i < 50 && engine.sequences.seqs.some((s) => s.pin !== null); i++) await sleep(5);
      assert.equal(
        engine.sequences.seqs.filter((s) => s.pin !== null).length,
        0,
        "the idle loop released the slot",
      );
      assert.equal(engine.metrics().kvUsage, 0);
    });
  });

  test("abort ends the stream and frees the request's KV", async () => {
    await withEngine({ policy: "vllm", stepDelayMs: 1, reply: () => "y".repeat(5000) }, async (engine) => {
      const controller = new AbortController();
      const stream = engine.generate(
        request("long", engine.renderChat(chat("go")), { sampling: { maxTokens: 4000 } }),
        controller.signal,
      );
      let deltas = 0;
      let done: Done | null = null;
      for await (const event of stream) {
        if (event.type === "delta" && event.text.length > 0 && ++deltas === 20) {
          assert.equal(engine.metrics().running, 1);
          assert.ok(engine.metrics().kvUsage > 0);
          controller.abort();
        }
        if (event.type === "done") done = event;
      }
      assert.equal(done?.finishReason, "abort");
      assert.ok(done && done.text.length >= 20 && /^y+$/.test(done.text));
      // the stream ends at once; the scheduler drops the request at the loop's next turn
      for (let i = 0; i < 50 && engine.metrics().running > 0; i++) await sleep(5);
      const m = engine.metrics();
      assert.equal(m.running, 0);
      assert.equal(m.waiting, 0);
      assert.equal(m.kvUsage, 0);
    });
  });

  test("breaking out of the stream aborts the request", async () => {
    await withEngine({ policy: "vllm", stepDelayMs: 1, reply: () => "z".repeat(5000) }, async (engine) => {
      const stream = engine.generate(
        request("b", engine.renderChat(chat("go")), { sampling: { maxTokens: 4000 } }),
        new AbortController().signal,
      );
      let n = 0;
      for await (const event of stream) if (event.type === "delta" && ++n === 5) break;
      await sleep(20);
      assert.equal(engine.metrics().running, 0);
      assert.equal(engine.metrics().kvUsage, 0);
      assert.equal(engine.scheduler.stats.aborted, 1);
    });
  });

  test("a program's second turn reuses its pinned KV (cachedTokens ~ first prompt + output)", async () => {
    await withEngine({ policy: fixedTtlPolicy(30) }, async (engine) => {
      const turn1 = chat("list the files");
      const prompt1 = engine.renderChat(turn1);
      const first = await run(engine, request("t1", prompt1, { programId: "job-1" }));
      assert.equal(first.done.finishReason, "stop");
      assert.equal(first.done.usage.cachedTokens, 0);
      assert.equal(first.done.programJctS, null, "the program goes on");
      assert.equal(engine.metrics().pinnedPrograms, 1);
      const prompt2 = engine.renderChat([
        ...turn1,
        { role: "assistant", content: first.done.text },
        { role: "tool", content: "a.py b.py" },
      ]);
      const second = await run(engine, request("t2", prompt2, { programId: "job-1", isLastStep: true }));
      // the pin held prompt + output (the EOS was sampled, never computed): full blocks of that
      const held = engine.countTokens(prompt1) + engine.countTokens(first.done.text);
      assert.ok(second.done.usage.cachedTokens <= held);
      assert.ok(second.done.usage.cachedTokens > held - 16, `${second.done.usage.cachedTokens} of ${held}`);
      const kv = engine.kvStats();
      assert.ok(kv.takenOverTokens + kv.sharedTokens >= second.done.usage.cachedTokens);
      assert.equal(second.done.text, defaultFakeReply(prompt2));
      assert.equal(engine.metrics().pinnedPrograms, 0, "last step drops the pin");
      // the last step's JCT spans both turns, from the first turn's arrival
      assert.ok(second.done.programJctS !== null && second.done.programJctS >= second.done.e2eS);
    });
  });

  test("a policy module's policy schedules the engine: the example pins a turn that called a tool", async () => {
    const example = fileURLToPath(new URL("../../examples/policies/tool-pin.mjs", import.meta.url));
    assert.throws(() => createFakeEngine({ policy: example }), /is not loaded: await loadPolicyModules/);
    await loadPolicyModules([example]);
    await withEngine({ policy: example }, async (engine) => {
      assert.equal(engine.scheduler.policy.name, "tool-pin");
      const turn1 = chat("list the files");
      const first = await run(
        engine,
        request("t1", engine.renderChat(turn1), { programId: "j", toolHint: "ls" }),
      );
      assert.equal(first.done.finishReason, "stop");
      assert.equal(engine.metrics().pinnedPrograms, 1, "a turn that called a tool keeps its KV");
      const prompt2 = engine.renderChat([...turn1, { role: "assistant", content: first.done.text }]);
      const second = await run(engine, request("t2", prompt2, { programId: "j", isLastStep: true }));
      assert.ok(second.done.usage.cachedTokens > 0, "the next turn reuses the pinned KV");
    });
  });

  test("pins expire on time while the engine is idle", async () => {
    await withEngine({ policy: fixedTtlPolicy(0.3) }, async (engine) => {
      const t0 = performance.now();
      await run(engine, request("p1", engine.renderChat(chat("run tests")), { programId: "job-2" }));
      const m1 = engine.metrics();
      assert.equal(m1.pinnedPrograms, 1);
      assert.ok(m1.kvUsage > 0);
      await sleep(150);
      assert.equal(engine.metrics().pinnedPrograms, 1, "not expired before the TTL");
      while (engine.metrics().pinnedPrograms > 0 && performance.now() - t0 < 2000) await sleep(10);
      const elapsedMs = performance.now() - t0;
      assert.ok(elapsedMs < 600, `pin expired after ${elapsedMs.toFixed(0)} ms (TTL 300 ms)`);
      const m2 = engine.metrics();
      assert.equal(m2.pinnedPrograms, 0);
      assert.equal(m2.pinsExpired, 1);
      assert.equal(m2.kvUsage, 0);
    });
  });

  test("a burst that overfills the pool preempts instead of failing, and text is unchanged", async () => {
    const prompts = Array.from({ length: 12 }, (_, i) => `burst ${i} ${"abcdefghij".repeat(15 + i)}`);
    const reference = await withEngine({ policy: "vllm" }, async (engine) => {
      const out: string[] = [];
      for (const [i, p] of prompts.entries()) {
        out.push((await run(engine, request(`s${i}`, p, { sampling: { maxTokens: 150 } }))).done.text);
      }
      return out;
    });
    await withEngine(
      { policy: "vllm", kvCells: 1024, maxSeqs: 12, maxNumSeqs: 8, maxNumBatchedTokens: 256 },
      async (engine) => {
        const results = await Promise.all(
          prompts.map((p, i) => run(engine, request(`b${i}`, p, { sampling: { maxTokens: 150 } }))),
        );
        results.forEach((r, i) => {
          assert.notEqual(r.done.finishReason, "abort");
          assert.equal(r.done.text, reference[i], `request ${i}`);
        });
        assert.ok(engine.metrics().preemptions > 0, "the pool was overfilled");
        assert.equal(engine.loopStats.failedSteps, 0);
        engine.scheduler.checkInvariants();
      },
    );
  });

  test("stop strings end the text before them, and are never streamed", async () => {
    await withEngine(
      { policy: "vllm", reply: () => "Thought: ok.\nAction: STOP now please" },
      async (engine) => {
        const prompt = engine.renderChat(chat("x"));
        const { deltas, done } = await run(
          engine,
          request("s", prompt, { sampling: { stop: ["STOP", "never"] } }),
        );
        assert.equal(done.finishReason, "stop");
        assert.equal(done.text, "Thought: ok.\nAction: ");
        assert.equal(deltas, done.text);
        const length = await run(engine, request("l", prompt, { sampling: { maxTokens: 5 } }));
        assert.equal(length.done.finishReason, "length");
        assert.equal(length.done.text, "Thoug");
        assert.equal(length.done.usage.completionTokens, 5);
        assert.equal(length.deltas, "Thoug");
      },
    );
  });

  test("multi-byte characters stream whole", async () => {
    await withEngine({ policy: "vllm", reply: () => "héllo 🙂 wörld" }, async (engine) => {
      const { deltas, done } = await run(engine, request("u", engine.renderChat(chat("u"))));
      assert.equal(done.text, "héllo 🙂 wörld");
      assert.equal(deltas, done.text);
    });
  });

  test("rejections: prompt too long, overloaded, duplicate, invalid, shutting down", async () => {
    const engine = createFakeEngine({
      policy: "vllm",
      maxContextTokens: 100,
      maxNumSeqs: 1,
      maxWaiting: 1,
      stepDelayMs: 2,
      reply: () => "w".repeat(1000),
    });
    const rejects = (fn: () => unknown, code: string) =>
      assert.throws(fn, (e: unknown) => e instanceof EngineRejection && e.code === code);
    const signal = new AbortController().signal;
    rejects(() => engine.generate(request("long", "x".repeat(100)), signal), "prompt_too_long");
    rejects(() => engine.generate(request("empty", ""), signal), "invalid_request");
    const short = (user: string) => engine.renderChat([{ role: "user", content: user }]);
    const a = run(engine, request("a", short("first")));
    await sleep(10);
    rejects(() => engine.generate(request("a", "again"), signal), "duplicate_request");
    const b = run(engine, request("b", short("second")));
    await sleep(10);
    assert.equal(engine.metrics().waiting, 1);
    assert.throws(
      () => engine.generate(request("c", "third"), signal),
      (e: unknown) => e instanceof EngineRejection && e.code === "overloaded" && (e.retryAfterS ?? 0) >= 1,
    );
    // a request whose output would pass the context window ends with "length" at the window
    const [ra, rb] = await Promise.all([a, b]);
    assert.equal(ra.done.usage.promptTokens + ra.done.usage.completionTokens, 100);
    assert.equal(rb.done.finishReason, "length");
    // an output limit below 1 never runs: the scheduler refuses it, on its stream (the server's front sends none)
    await assert.rejects(
      run(engine, request("zero", "hi", { sampling: { maxTokens: 0 } })),
      (e: unknown) =>
        e instanceof EngineRejection && e.code === "invalid_request" && /max output tokens/.test(e.message),
    );
    await engine.shutdown();
    rejects(() => engine.generate(request("late", "late"), signal), "shutting_down");
  });

  test("--max-waiting counts what free run slots cannot take: a burst on an idle engine is accepted", async () => {
    const engine = createFakeEngine({ policy: "vllm", maxNumSeqs: 16, maxWaiting: 8, stepDelayMs: 2 });
    const short = (user: string) => engine.renderChat([{ role: "user", content: user }]);
    const burst = Array.from({ length: 12 }, (_, i) => run(engine, request(`burst${i}`, short(`q ${i}`))));
    const results = await Promise.all(burst);
    for (const r of results) assert.equal(r.done.finishReason, "stop");
    await engine.shutdown();
  });

  test("the prompt the server counted is tokenized once", async () => {
    const engine = createFakeEngine({ policy: "vllm", stepDelayMs: 1 });
    const prompt = engine.renderChat([{ role: "user", content: "count me once" }]);
    const tokenize = engine.runner.tokenize.bind(engine.runner);
    let calls = 0;
    engine.runner.tokenize = (text: string) => {
      calls++;
      return tokenize(text);
    };
    engine.countTokens(prompt);
    await run(engine, request("once", prompt));
    assert.equal(calls, 1);
    await engine.shutdown();
  });

  test("shutdown drains in-flight requests and writes the event log atomically", async () => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-engine-"));
    try {
      const recorder = new Recorder(new FileSink(join(dir, "run")));
      const engine = createFakeEngine({ policy: "vllm", recorder, stepDelayMs: 1 });
      const all = [0, 1, 2].map((i) =>
        run(engine, request(`d${i}`, engine.renderChat(chat(`drain ${i}`)), { programId: `job-${i}` })),
      );
      await sleep(5);
      const closing = engine.shutdown();
      assert.ok(!existsSync(join(dir, "run.jsonl")));
      const results = await Promise.all(all);
      await closing;
      for (const r of results) assert.equal(r.done.finishReason, "stop");
      const lines = readFileSync(join(dir, "run.jsonl"), "utf8").trim().split("\n");
      const kinds = lines.map((l) => (JSON.parse(l) as { event: string }).event);
      assert.equal(kinds.filter((k) => k === "arrival").length, 3);
      assert.equal(kinds.filter((k) => k === "departure").length, 3);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test("KV dropped from the pool goes to the CPU tier and comes back on the next turn", async () => {
    const sink = new MemorySink();
    await withEngine(
      {
        recorder: new Recorder(sink),
        policy: fixedTtlPolicy(0.05),
        kvCells: 2048,
        maxSeqs: 4,
        maxNumSeqs: 2,
        tiers: { cpuBytes: 64 << 20 },
      },
      async (engine) => {
        const turn1 = chat(`inspect ${"the repository ".repeat(30)}`);
        const prompt1 = engine.renderChat(turn1);
        const first = await run(engine, request("a1", prompt1, { programId: "job-a" }));
        await sleep(80); // the pin expires; its KV stays resident as cache
        // other programs need every slot and most cells: job-a's sequence is evicted to the tier
        for (let i = 0; i < 6; i++) {
          const others = [0, 1].map((k) =>
            run(
              engine,
              request(`o${i}-${k}`, engine.renderChat(chat(`other ${i} ${k} ${"pad ".repeat(150)}`))),
            ),
          );
          await Promise.all(others);
        }
        assert.ok(engine.kvStats().savedToTier > 0, "something was saved to the tier");
        const memory = engine.metrics().memory;
        assert.ok(memory.ramTierBytes > 0 && memory.ramTierBytes <= 64 << 20, JSON.stringify(memory));
        assert.ok(memory.kvPoolBytes > 0, "the fake runner's pool counts as RAM");
        const prompt2 = engine.renderChat([
          ...turn1,
          { role: "assistant", content: first.done.text },
          { role: "tool", content: "ok" },
        ]);
        const second = await run(engine, request("a2", prompt2, { programId: "job-a", isLastStep: true }));
        assert.ok(engine.kvStats().restoredTokens > 0, JSON.stringify(engine.kvStats()));
        assert.ok(second.done.usage.cachedTokens > engine.countTokens(prompt1) - 16);
        assert.equal(second.done.text, defaultFakeReply(prompt2));
        const events = sink.lines.map((l) => JSON.parse(l) as { event: string; program: string });
        assert.ok(events.some((e) => e.event === "offloaded" && e.program === "job-a"));
        assert.ok(events.some((e) => e.event === "evicted" && e.program === "job-a"));
      },
    );
  });

  test("a step whose execute fails fails its requests only; serving goes on", async () => {
    class FlakyRunner extends FakeModelRunner {
      failNext = false;
      override async execute(batch: RunnerBatch) {
        if (this.failNext) {
          this.failNext = false;
          throw new Error("decode blew up");
        }
        return super.execute(batch);
      }
    }
    const runner = new FlakyRunner({ stepDelayMs: 1, reply: () => "v".repeat(500) });
    const engine = new Engine({ runner, policy: "vllm" });
    try {
      const prompt = engine.renderChat(chat("x"));
      const doomed = run(engine, request("doomed", prompt));
      await sleep(10);
      runner.failNext = true;
      await assert.rejects(doomed, /decode blew up/);
      assert.equal(engine.metrics().running, 0);
      assert.equal(engine.loopStats.failedSteps, 1);
      const ok = await run(engine, request("ok", prompt, { sampling: { maxTokens: 10 } }));
      assert.equal(ok.done.text, "vvvvvvvvvv");
    } finally {
      await engine.shutdown();
    }
  });

  test("without a profile, the TTL model prices prefill from the steps the engine ran", async () => {
    // the fake's steps cost 3 ms + 0.25 ms a row; the default model before any step says 0.2 ms a token + 5 ms
    await withEngine(
      { policy: "vllm", stepDelayMs: 3, tokenDelayMs: 0.25, maxNumBatchedTokens: 64 },
      async (engine) => {
        const before = engine.metrics().prefill1kTokensS;
        assert.ok(Math.abs(before - (0.005 + 0.2e-3 * 1024)) < 1e-9, `default ${before}`);
        for (let i = 0; i < 4; i++) {
          await run(engine, request(`p${i}`, `${i} ${"y".repeat(150)}`, { sampling: { maxTokens: 3 } }));
        }
        const measured = engine.metrics().prefill1kTokensS;
        const expected = (1024 / 64) * 0.003 + 1024 * 0.25e-3;
        assert.ok(Math.abs(measured / expected - 1) < 0.01, `measured ${measured}, expected ${expected}`);
      },
    );
  });

  test("without a profile, reloads from the RAM tier are priced by the engine's own restores", async () => {
    await withEngine(
      { policy: "vllm", kvRunningOnly: true, tiers: { cpuBytes: 64 << 20 }, maxNumSeqs: 2 },
      async (engine) => {
        const costs = engine.calibratedCosts;
        assert.ok(costs);
        const prior = costs.reloadS(1000, "cpu");
        let history = chat(`inspect ${"the repository ".repeat(20)}`);
        for (let turn = 0; turn < 6; turn++) {
          const done = await run(
            engine,
            request(`r${turn}`, engine.renderChat(history), { programId: "job-r" }),
          );
          history = [
            ...history,
            { role: "assistant", content: done.done.text },
            { role: "tool", content: `ok ${turn}` },
          ];
        }
        assert.ok(engine.kvStats().restoredTokens > 0, JSON.stringify(engine.kvStats()));
        const perToken = costs.reloadSecondsPerToken("cpu");
        assert.ok(perToken !== null, "five restores priced the RAM tier");
        assert.equal(costs.reloadS(1000, "cpu"), 1000 * perToken);
        assert.notEqual(costs.reloadS(1000, "cpu"), prior);
      },
    );
  });
  test("every scheduler change happens inside the step loop: arrivals, aborts, disconnects, program ends", async () => {
    await withEngine({ policy: fixedTtlPolicy(60), stepDelayMs: 1 }, async (engine) => {
      const scheduler = engine.scheduler as unknown as Record<string, (...args: unknown[]) => unknown>;
      const calls: { method: string; inLoop: boolean }[] = [];
      for (const method of ["addRequest", "abort", "endProgramById", "schedule", "update", "expireDuePins"]) {
        const original = scheduler[method] as (...args: unknown[]) => unknown;
        scheduler[method] = function (this: unknown, ...args: unknown[]) {
          const stack = new Error().stack ?? "";
          calls.push({ method, inLoop: /StepLoop\.(next|complete)/.test(stack) });
          return original.apply(this, args);
        };
      }
      const finished = run(engine, request("p1", "a turn that calls a tool", { programId: "job" }));
      const aborted = new AbortController();
      const long = engine.generate(
        request("long", "a long answer", { sampling: { maxTokens: 4000 } }),
        aborted.signal,
      );
      const disconnected = engine.generate(
        request("gone", "another long answer", { sampling: { maxTokens: 4000 } }),
        new AbortController().signal,
      );
      for await (const event of disconnected) if (event.type === "delta") break;
      let deltas = 0;
      for await (const event of long) if (event.type === "delta" && ++deltas === 3) aborted.abort();
      await finished;
      assert.equal(engine.endProgram("job"), true);
      for (let i = 0; i < 100 && engine.scheduler.numPinnedPrograms > 0; i++) await sleep(5);
      const called = new Set(calls.map((c) => c.method));
      for (const method of ["addRequest", "abort", "endProgramById", "schedule", "update"])
        assert.ok(called.has(method), `${method} was called`);
      assert.deepEqual(
        calls.filter((c) => !c.inLoop),
        [],
        "scheduler methods called outside StepLoop.next/complete",
      );
    });
  });
});
