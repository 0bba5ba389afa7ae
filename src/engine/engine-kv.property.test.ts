/**
 * Serving under random arrivals, aborts and disconnects (fast-check), with the runner's KV held against the
 * scheduler's before every batch: the cells the scheduler's sequence map places are the runner's pool, and
 * every sequence holds what the map says; a sequence computes only for a request the scheduler runs, and no
 * request has two; a sequence kept for a pin belongs to a program the scheduler has pinned, and every pinned
 * program's KV is in its sequence. When all is done no sequence runs, and after shutdown no cell is held
 * (with a sliding-window model's checkpoints too). A turn that asked for logprobs has one entry per sampled
 * token, streamed and in its done event alike, however often it was preempted.

 *
 * Time is the test's own: the engine's clock and every timer (the engine's idle waits, the clients' arrivals
 * and tool calls) run on mocked time that moves 1 ms per turn of the event loop, so how clients and engine
 * steps interleave, and the verdict, are the same on every run.
 */
import assert from "node:assert/strict";
import { describe, type TestContext, test } from "node:test";
import type { Clock } from "../core/clock.js";
import fc from "../core/test-support/fast-check.js";
import { Engine } from "./engine.js";
import type { GenerateEvent } from "./engine-api.js";
import type { RunnerBatch } from "./runners/model-runner.js";
import { fixedTtlPolicy, request, sleep } from "./test-support/engine-helpers.js";
import { FakeModelRunner } from "./test-support/fake-model-runner.js";

type Fate = "complete" | "abort" | "disconnect";

interface Turn {
  readonly newChars: number;
  readonly output: number;
  readonly fate: Fate;
  /** deltas seen before the client aborts or leaves */
  readonly after: number;
  readonly toolMs: number;
  /** top_logprobs asked for (null: no logprobs) */
  readonly logprobs: number | null;
}

const turnArb = fc.record({
  newChars: fc.integer({ min: 8, max: 100 }),
  output: fc.integer({ min: 1, max: 24 }),
  fate: fc.constantFrom<Fate>("complete", "complete", "abort", "disconnect"),
  after: fc.integer({ min: 1, max: 6 }),
  toolMs: fc.integer({ min: 0, max: 15 }),
  logprobs: fc.option(fc.integer({ min: 0, max: 3 })),
});

const scenarioArb = fc.record({
  programs: fc.array(
    fc.record({
      startMs: fc.integer({ min: 0, max: 20 }),
      turns: fc.array(turnArb, { minLength: 1, maxLength: 3 }),
    }),
    { minLength: 2, maxLength: 6 },
  ),
  policy: fc.constantFrom("vllm", "cachettl-adaptive", "pin-20ms"),
  // *-windowed: a sliding-window model, whose shared prefixes are kept as checkpoints (sequence-map.ts)
  layout: fc.constantFrom("unified", "streams", "streams-windowed", "unified-windowed"),
});

/** Mocked time no scenario should need: past it the scenario is taken to hang. */
const TIME_LIMIT_MS = 600_000;

/**
 * Mocked time for `t`: setTimeout fires only as `run` moves the time, 1 ms after each turn of the event
 * loop (the engine yields one turn per step), until the work it is given settles.
 */
function mockedTime(t: TestContext): { clock: Clock; run<T>(work: Promise<T>): Promise<T> } {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  let nowMs = 0;
  return {
    clock: { nowS: () => nowMs / 1000 },
    async run(work) {
      let settled = false;
      work.then(
        () => (settled = true),
        () => (settled = true),
      );
      const startMs = nowMs;
      while (!settled) {
        if (nowMs - startMs > TIME_LIMIT_MS) throw new Error(`no end after ${TIME_LIMIT_MS} ms of test time`);
        await new Promise((resolve) => setImmediate(resolve));
        nowMs += 1;
        t.mock.timers.tick(1);
      }
      return work;
    },
  };
}

type Scenario = typeof scenarioArb extends fc.Arbitrary<infer S> ? S : never;

class KvCheckingRunner extends FakeModelRunner {
  engine: Engine | null = null;
  checks = 0;

  override execute(batch: RunnerBatch) {
    if (this.engine) checkKv(this.engine, this);
    return super.execute(batch);
  }
}

function checkKv(engine: Engine, runner: FakeModelRunner): void {
  engine.scheduler.checkInvariants();
  const sequences = engine.sequences;
  assert.equal(
    sequences.cellsUsed(),
    runner.usedCells,
    "the scheduler's cells and the runner's pool disagree",
  );
  const running = new Set<string>();
  for (const seq of sequences.seqs) {
    assert.equal(
      runner.seqLength(seq.id),
      seq.length,
      `sequence ${seq.id} holds other positions than planned`,
    );
    const request = seq.running;
    if (request === null) continue;
    assert.equal(request.status, "running", `sequence ${seq.id} computes for a ${request.status} request`);
    assert.equal(engine.scheduler.getRequest(request.id), request, "a sequence's request is the scheduler's");
    assert.ok(!running.has(request.id), `request ${request.id} has two sequences`);
    running.add(request.id);
  }
  const pinned = new Set(
    engine.scheduler
      .snapshot(10_000)
      .programs.filter((p) => p.pinTtlLeftS !== null) // pinned, or pinned with its next turn waiting
      .map((p) => p.id),
  );
  const pinnedSeqs = new Set<string>();
  for (const seq of sequences.seqs) {
    const pin = seq.pin;
    if (pin === null) continue;
    assert.ok(pinned.has(pin.programId), `sequence ${seq.id} kept for ${pin.programId}, which holds no pin`);
    pinnedSeqs.add(pin.programId);
  }
  for (const program of pinned) assert.ok(pinnedSeqs.has(program), `pinned ${program} has no sequence`);
}

async function turnOf(
  engine: Engine,
  id: string,
  programId: string,
  prompt: string,
  turn: Turn,
  last: boolean,
) {
  const controller = new AbortController();
  const stream = engine.generate(
    request(id, prompt, {
      programId,
      isLastStep: last,
      toolHint: "ls",
      sampling: { maxTokens: turn.output, ignoreEos: true, logprobs: turn.logprobs },
    }),
    controller.signal,
  );
  let deltas = 0;
  let text = "";
  let streamedLogprobs = 0;
  let done: Extract<GenerateEvent, { type: "done" }> | null = null;
  for await (const event of stream) {
    if (event.type === "done") {
      done = event;
      continue;
    }
    text += event.text;
    streamedLogprobs += event.logprobs?.length ?? 0;
    deltas++;
    if (deltas === turn.after && turn.fate === "abort") controller.abort();
    if (deltas === turn.after && turn.fate === "disconnect") break;
  }
  if (done?.finishReason === "length") {
    const entries = turn.logprobs === null ? undefined : done.usage.completionTokens;
    assert.equal(done.logprobs?.length, entries, `${id}: one logprob entry per sampled token`);
    assert.equal(turn.logprobs === null ? undefined : streamedLogprobs, entries, `${id}: streamed alike`);
    for (const entry of done.logprobs ?? []) assert.equal(entry.top.length, turn.logprobs);
  }
  return { text, finished: done?.finishReason === "length" };
}

describe("engine KV against the scheduler's, under random arrivals, aborts and disconnects", () => {
  test("before every batch and at the end, no leaked, stray or double-owned KV", async (context) => {
    const time = mockedTime(context);
    let batchesChecked = 0;
    let checkpointsMade = 0;
    const serve = async ({ programs, policy, layout }: Scenario) => {
      const window = layout.endsWith("-windowed") ? { slidingWindow: 8 } : {};
      const runner = new KvCheckingRunner(
        layout.startsWith("unified")
          ? { kvCells: 640, maxSeqs: 8, ...window }
          : { kvLayout: "streams", kvCells: 4 * 768, maxSeqs: 4, ...window },
      );
      const engine = new Engine({
        runner,
        policy: policy === "pin-20ms" ? fixedTtlPolicy(0.02) : policy,
        maxNumSeqs: 3,
        maxNumBatchedTokens: 64,
        clock: time.clock,
      });
      runner.engine = engine;
      try {
        await Promise.all(
          programs.map(async ({ startMs, turns }, p) => {
            await sleep(startMs);
            // every program's prompt opens with the same instructions, as an agent harness's do
            let prompt = `${"You are an agent; call tools. ".repeat(2)}Program ${p}: `;
            for (const [t, turn] of turns.entries()) {
              prompt += `${"klmnopqrst".repeat(10).slice(0, turn.newChars)}#${t}`;
              const out = await turnOf(
                engine,
                `p${p}-t${t}`,
                `prog-${p}`,
                prompt,
                turn,
                t === turns.length - 1,
              );
              if (!out.finished) return; // an aborted or abandoned turn ends its program's client
              prompt += out.text;
              await sleep(turn.toolMs);
            }
          }),
        );
        // the loop hears of the last aborts at its next turn
        for (let i = 0; i < 100 && engine.scheduler.hasUnfinishedRequests(); i++) await sleep(2);
        assert.equal(engine.scheduler.hasUnfinishedRequests(), false, "every request ended");
        assert.ok(
          engine.sequences.seqs.every((s) => s.running === null),
          "no sequence runs once nothing does",
        );
        assert.equal(engine.sequences.cellsUsed(), runner.usedCells);
      } finally {
        await engine.shutdown();
      }
      assert.equal(engine.sequences.cellsUsed(), 0, "cells held after shutdown");
      assert.equal(runner.usedCells, 0, "the runner's pool is empty after shutdown");
      return { batches: runner.executeCalls, checkpointTokens: engine.kvStats().checkpointTokens };
    };
    const firstRuns: { scenario: Scenario; batches: number }[] = [];
    await fc.assert(
      fc.asyncProperty(scenarioArb, async (scenario) => {
        const { batches, checkpointTokens } = await time.run(serve(scenario));
        batchesChecked += batches;
        checkpointsMade += checkpointTokens;
        if (firstRuns.length < 5) firstRuns.push({ scenario, batches });
      }),
      { numRuns: 200, includeErrorInReport: true },
    );
    context.diagnostic(`${batchesChecked} batches checked, ${checkpointsMade} checkpoint tokens`);
    assert.ok(batchesChecked > 100, `${batchesChecked} batches checked`);
    assert.ok(checkpointsMade > 0, "no scenario kept a checkpoint");
    // the same scenario runs the same batches again: nothing in it hangs on the wall clock
    for (const { scenario, batches } of firstRuns) {
      assert.equal((await time.run(serve(scenario))).batches, batches, JSON.stringify(scenario));
    }
  });
});
