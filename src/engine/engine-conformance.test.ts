/**
 * The policy conformance suite on the engine's side of the one step loop: every policy serves random
 * multi-turn programs through the Engine (the fake runner: real scheduler, KV mapping and streaming),
 * with the invariants the simulator's suite checks (scheduler invariants after every step, every
 * program completes, nothing leaked) plus the engine's own: the cells the scheduler's sequence map
 * counts are the runner's pool, and every sequence computed into belongs to a running request. An idle engine wakes only when it must.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { Sequence } from "../core/kv/sequences/sequence.js";
import { Rng } from "../core/rng.js";
import type { StepPlan, StepResult } from "../core/step-plan.js";
import { POLICY_NAMES } from "../policies/index.js";
import type { Engine } from "./engine.js";
import { Engine as EngineClass } from "./engine.js";
import type { RunnerBatch } from "./runners/model-runner.js";
import { fixedTtlPolicy, request, run, sleep } from "./test-support/engine-helpers.js";
import { FakeModelRunner } from "./test-support/fake-model-runner.js";

interface Turn {
  readonly newChars: number;
  readonly output: number;
  readonly toolMs: number;
}

function randomPrograms(rng: Rng, numPrograms: number): Turn[][] {
  return Array.from({ length: numPrograms }, () =>
    Array.from({ length: rng.int(1, 4) }, () => ({
      newChars: rng.int(8, 120),
      output: rng.int(1, 12),
      toolMs: rng.int(0, 25),
    })),
  );
}

/** A runner that checks, before every batch, that the cells the scheduler placed are the pool llama.cpp has. */
class CheckedRunner extends FakeModelRunner {
  engine: Engine | null = null;

  override execute(batch: RunnerBatch) {
    const engine = this.engine;
    if (engine) {
      assert.equal(
        engine.sequences.cellsUsed(),
        this.usedCells,
        "the scheduler's cells and the runner's pool disagree",
      );
      for (let i = 0; i < batch.length; i++) {
        const seq: Sequence | undefined = engine.sequences.seqs[batch.seqIds[i] as number];
        assert.equal(seq?.running?.status, "running", "a batch row for a sequence no running request holds");
      }
    }
    return super.execute(batch);
  }
}

async function serve(engine: Engine, programs: Turn[][], tag: string): Promise<void> {
  await Promise.all(
    programs.map(async (turns, p) => {
      // every program starts with the same instructions: admissions share (or copy) that prefix
      let prompt = `You are an agent; call a tool per turn. <${tag} program ${p}>`;
      for (const [t, turn] of turns.entries()) {
        prompt += `${"abcdefghij".repeat(13).slice(0, turn.newChars)}#${t}`;
        const last = t === turns.length - 1;
        const { done } = await run(
          engine,
          request(`${tag}-${p}-${t}`, prompt, {
            programId: `${tag}-${p}`,
            isLastStep: last,
            toolHint: "ls",
            sampling: { maxTokens: turn.output, ignoreEos: true },
          }),
        );
        assert.equal(done.finishReason, "length", `${tag} program ${p} turn ${t}`);
        prompt += done.text;
        if (!last) await sleep(turn.toolMs);
      }
    }),
  );
}

describe("policy conformance through the engine's loop (fake runner)", () => {
  const pressure = { preemptions: 0, pinsCreated: 0, pinsReused: 0, hits: 0, evictions: 0, streamCopies: 0 };

  const layouts = [
    { kvLayout: "unified", kvCells: 640, maxSeqs: 8 },
    // per-slot streams hold a whole program's context (< 768 tokens); prefixes move between them as copies
    { kvLayout: "streams", kvCells: 4 * 768, maxSeqs: 4 },
  ] as const;
  for (const policy of POLICY_NAMES) {
    test(`${policy}: every program completes, invariants hold after every step`, async () => {
      for (const [seed, layout] of [
        [1, layouts[0]],
        [2, layouts[0]],
        [3, layouts[1]],
      ] as const) {
        const runner = new CheckedRunner(layout);
        const engine = new EngineClass({
          runner,
          policy,
          maxNumSeqs: 3,
          maxNumBatchedTokens: 64,
          ...(policy.endsWith("offload") || policy === "infercept" ? { tiers: { cpuBytes: 1 << 20 } } : {}),
        });
        runner.engine = engine;
        // a past queueing delay, so the TTL policies pin for ln(T + ...) s
        engine.scheduler.ttl.queueing.observe(5);
        const update = engine.scheduler.update.bind(engine.scheduler);
        engine.scheduler.update = (plan: StepPlan, result: StepResult) => {
          const outcome = update(plan, result);
          engine.scheduler.checkInvariants();
          return outcome;
        };
        try {
          const programs = randomPrograms(new Rng(seed), 10);
          await serve(engine, programs, `s${seed}`);
          const s = engine.scheduler;
          assert.equal(s.hasUnfinishedRequests(), false);
          assert.equal(s.stats.finished, programs.flat().length, "every turn finished");
          // once every program is done, only pins hold blocks
          const usedBlocks = Math.round(s.kvUsageFraction() * s.numKvBlocks);
          const pinnedBlocks = Math.ceil(s.numPinnedTokens / 16) + s.numPinnedPrograms;
          assert.ok(usedBlocks <= pinnedBlocks, `${usedBlocks} blocks used, ${pinnedBlocks} pinned`);
          pressure.preemptions += s.stats.preemptions;
          pressure.pinsCreated += s.stats.pinsCreated;
          pressure.pinsReused += s.stats.pinsReused;
          pressure.hits += s.stats.prefixHitTokens;
          pressure.evictions += engine.kvStats().evictions;
          pressure.streamCopies += engine.kvStats().copiedTokens;
        } finally {
          await engine.shutdown();
        }
      }
    });
  }

  test("the workloads put the engine under pressure (preemption, pins made and reused, hits, evictions, prefixes copied between streams)", () => {
    for (const [name, count] of Object.entries(pressure))
      assert.ok(count > 0, `${name}: ${JSON.stringify(pressure)}`);
  });

  // each engine idles on its own timers, so the policies' 300 ms idles run side by side
  describe("an idle engine wakes at most a few times per second", { concurrency: true }, () => {
    for (const policy of [...POLICY_NAMES, fixedTtlPolicy(Number.POSITIVE_INFINITY)]) {
      const name = typeof policy === "string" ? policy : "a pin without a TTL";
      test(`under ${name}`, async () => {
        const runner = new FakeModelRunner({ kvCells: 1024, maxSeqs: 8 });
        const engine = new EngineClass({ runner, policy, maxNumSeqs: 2 });
        engine.scheduler.ttl.queueing.observe(5);
        try {
          const { done } = await run(
            engine,
            request("t0", "a turn that ends in a tool call", {
              programId: "job",
              sampling: { maxTokens: 4 },
            }),
          );
          assert.ok(done.usage.completionTokens > 0);
          const before = engine.loopCounters.waits;
          await sleep(300);
          const waits = engine.loopCounters.waits - before;
          assert.ok(waits <= 2, `${waits} wake-ups in 300 ms idle`);
        } finally {
          await engine.shutdown();
        }
      });
    }
  });
});
