/**
 * The scheduler decides where KV lives, whichever executor carries the plan out: one workload served by the
 * engine (the fake runner, and llama.cpp's built-in tiny model) and replayed through the simulator's
 * executor on a scheduler built the same way hands both executors the same plans: the same chunks into the
 * same sequences and the same sequence ops (copies, cuts, drops, saves, restores), step for step.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { VirtualClock } from "../core/clock.js";
import type { SeqOp } from "../core/kv/sequences/seq-ops.js";
import { TokenIdContent } from "../core/kv/token-content.js";
import type { SchedulingPolicy } from "../core/policy.js";
import type { Scheduler } from "../core/scheduler.js";
import { type LoopEnvironment, runStepLoop, StepLoop } from "../core/step-loop.js";
import type { StepPlan } from "../core/step-plan.js";
import { ensureBuiltinModel } from "../gguf/index.js";
import { LatencyModelExecutor } from "../sim/event-loop.js";
import { seqOpsS } from "../sim/seq-op-cost.js";
import { Engine } from "./engine.js";
import { buildEngineParts, type EngineOptions } from "./engine-setup.js";
import { isNativeAvailable } from "./native/llama-native.js";
import { LlamaModelRunner } from "./runners/llama-model-runner.js";
import type { ModelRunner } from "./runners/model-runner.js";
import { fixedTtlPolicy, request, run } from "./test-support/engine-helpers.js";
import { type FakeModelOptions, FakeModelRunner } from "./test-support/fake-model-runner.js";

/** One turn as the engine served it: its prompt's token ids and the ones it generated. */
interface ServedTurn {
  readonly id: string;
  readonly programId: string;
  readonly isLastStep: boolean;
  readonly prompt: readonly number[];
  readonly output: readonly number[];
}

/** What a scheduler handed its executor, in order: each plan's chunks, and every batch of sequence ops. */
type Handed = (readonly ["chunks", string] | readonly ["ops", readonly SeqOp[]])[];

function recordHanded(scheduler: Scheduler): Handed {
  const handed: Handed = [];
  const take = scheduler.takeKvChanges.bind(scheduler);
  scheduler.takeKvChanges = () => {
    const changes = take();
    if (changes.ops.length > 0) handed.push(["ops", changes.ops]);
    return changes;
  };
  const schedule = scheduler.schedule.bind(scheduler);
  scheduler.schedule = () => {
    const plan = schedule();
    const chunks = plan.chunks.map((c) => `${c.request.id}@${c.seq}[${c.startToken}+${c.numTokens}]`);
    if (chunks.length > 0) handed.push(["chunks", chunks.join(" ")]);
    return plan;
  };
  return handed;
}

const INSTRUCTIONS = "You are an agent working in a repository; call exactly one tool per turn, then stop. ";

/** Agent programs opening with the same instructions, their turns sent a round at a time. */
function agents(programs: number): { programId: string; words: (turn: number) => string }[] {
  return Array.from({ length: programs }, (_, p) => ({
    programId: `agent-${p}`,
    words: (turn) =>
      `${turn === 0 ? INSTRUCTIONS : " tool said: "}task ${p}.${turn} ${"abcdefghij".repeat(2 + ((p * 3 + turn) % 5))}`,
  }));
}

const OPTIONS = { maxNumSeqs: 2, maxNumBatchedTokens: 96 } as const;

/** Serves the rounds on the engine; returns what its scheduler handed its executor and the turns served. */
async function serve(
  runner: ModelRunner,
  policy: SchedulingPolicy,
  tiers: EngineOptions["tiers"],
  programs: number,
  turns: number,
): Promise<{ handed: Handed; served: ServedTurn[][] }> {
  const engine = new Engine({ runner, policy, ...OPTIONS, ...(tiers ? { tiers } : {}) });
  const handed = recordHanded(engine.scheduler);
  const served: ServedTurn[][] = [];
  const prompts = new Map<string, string>();
  try {
    for (let turn = 0; turn < turns; turn++) {
      const round = agents(programs).map(async ({ programId, words }) => {
        const prompt = (prompts.get(programId) ?? "") + words(turn);
        const id = `${programId}#${turn}`;
        const isLastStep = turn === turns - 1;
        const { done } = await run(
          engine,
          request(id, prompt, {
            programId,
            isLastStep,
            returnTokenIds: true,
            sampling: { maxTokens: 6, ignoreEos: true },
          }),
        );
        prompts.set(programId, prompt + done.text);
        return {
          id,
          programId,
          isLastStep,
          prompt: done.tokenIds?.prompt ?? [],
          output: done.tokenIds?.output ?? [],
        };
      });
      served.push(await Promise.all(round));
    }
  } finally {
    await engine.shutdown();
  }
  return { handed, served };
}

/**
 * Replays the served turns on the simulator's executor: a scheduler built as the engine builds its own (its
 * pool, sequences and tiers sized from a runner of the same shape), each round given once the last is done.
 */
function simulate(
  shape: FakeModelOptions,
  policy: SchedulingPolicy,
  tiers: EngineOptions["tiers"],
  served: readonly ServedTurn[][],
): Handed {
  const clock = new VirtualClock();
  const runner = new FakeModelRunner(shape);
  const { scheduler } = buildEngineParts({ runner, policy, ...OPTIONS, ...(tiers ? { tiers } : {}) }, clock);
  const handed = recordHanded(scheduler);
  const pending = served.slice();
  let ready = false;
  const world: LoopEnvironment<boolean> = {
    // a round arrives once the engine has gone idle after the last (its clients answer a done stream)
    deliverDue: () => {
      if (!ready || scheduler.hasUnfinishedRequests()) return;
      ready = false;
      for (const turn of pending.shift() ?? []) {
        scheduler.addRequest({
          requestId: turn.id,
          programId: turn.programId,
          promptTokens: turn.prompt.length,
          maxOutputTokens: turn.output.length,
          isLastStep: turn.isLastStep,
          toolHint: null,
          content: new TokenIdContent([...turn.prompt, ...turn.output], 16),
        });
      }
    },
    nextEventS: () => (pending.length > 0 ? clock.nowS() : null),
    isOver: () => false,
    waitUntil: (untilS) => {
      if (untilS === null) return false;
      ready = true;
      return true;
    },
  };
  const prices = { kvBytesPerToken: runner.kvBytesPerToken, bandwidthBps: { cpu: 4e9, disk: 1e9 } };
  const stepTimeS = (plan: StepPlan) => 0.005 + plan.numBatchedTokens * 1e-5 + seqOpsS(plan.ops, prices);
  runStepLoop(new StepLoop(scheduler, clock, world, new LatencyModelExecutor(clock, stepTimeS)));
  return handed;
}

function opKinds(handed: Handed): Set<string> {
  return new Set(handed.flatMap(([what, x]) => (what === "ops" ? x.map((o) => o.op) : [])));
}

describe("the simulator's executor and the engine's are handed the same sequence ops", () => {
  const layouts: {
    name: string;
    shape: FakeModelOptions;
    tiers?: EngineOptions["tiers"];
    expect: string[];
  }[] = [
    {
      name: "one unified pool, a RAM tier",
      shape: { kvCells: 640, maxSeqs: 4 },
      tiers: { cpuBytes: 1 << 20 },
      expect: ["assign", "copy", "save", "drop", "restore"],
    },
    {
      name: "a sliding-window model in one pool",
      shape: { kvCells: 640, maxSeqs: 4, slidingWindow: 8 },
      expect: ["assign", "copy", "drop"],
    },
    {
      name: "streams",
      shape: { kvCells: 4 * 512, maxSeqs: 4, kvLayout: "streams" },
      expect: ["assign", "copy"],
    },
  ];
  for (const { name, shape, tiers, expect } of layouts) {
    test(`fake runner: ${name}`, async () => {
      const policy = fixedTtlPolicy(3600);
      const engine = await serve(new FakeModelRunner(shape), policy, tiers, 5, 3);
      const sim = simulate(shape, policy, tiers, engine.served);
      assert.deepEqual(sim, engine.handed);
      const kinds = opKinds(engine.handed);
      for (const kind of expect) assert.ok(kinds.has(kind), `no ${kind} op in ${[...kinds].join(", ")}`);
    });
  }

  const supported = process.platform === "linux" && process.arch === "x64" && isNativeAvailable();
  test("llama.cpp's built-in tiny model, a RAM tier", {
    skip: supported ? false : "no llama.cpp addon",
  }, async () => {
    const modelPath = await ensureBuiltinModel({ preset: "tiny" });
    const runner = await LlamaModelRunner.open({
      modelPath,
      kvCells: 1024,
      maxSeqs: 4,
      batchTokens: 96,
      threads: 1,
    });
    const shape: FakeModelOptions = {
      kvCells: runner.kvCells,
      maxSeqs: runner.maxSeqs,
      maxContextTokens: runner.maxContextTokens,
      kvBytesPerToken: runner.kvBytesPerToken,
    };
    const policy = fixedTtlPolicy(3600);
    const tiers = { cpuBytes: 64 << 20 };
    const engine = await serve(runner, policy, tiers, 5, 3);
    assert.deepEqual(simulate(shape, policy, tiers, engine.served), engine.handed);
    const kinds = opKinds(engine.handed);
    for (const kind of ["assign", "copy", "save", "restore"]) assert.ok(kinds.has(kind), `no ${kind} op`);
  });
});
