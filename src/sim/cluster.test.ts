import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { VirtualClock } from "../core/clock.js";
import { Rng } from "../core/rng.js";
import type { Scheduler } from "../core/scheduler.js";
import { linearStepTimeS, testScheduler } from "../core/test-support/harness.js";
import { createPolicy } from "../policies/index.js";
import { createRouter, type RouterName, runClusterSimulation } from "./cluster.js";
import { runSimulation, type SimProgramSpec, type SimTurn } from "./event-loop.js";

/** Agent programs whose turns grow one conversation (each prompt extends the previous turn's). */
function programs(seed: number, count: number): SimProgramSpec[] {
  const rng = new Rng(seed);
  return Array.from({ length: count }, (_, p) => {
    const turns: SimTurn[] = [];
    let context = 0;
    const numTurns = rng.int(2, 5);
    for (let t = 0; t < numTurns; t++) {
      const input = context + rng.int(40, 200);
      const output = rng.int(4, 30);
      turns.push({ input, cached: context, output, tool: "ls", toolS: rng.exponential(0.5) });
      context = input + output;
    }
    return { id: `p${p}`, arrivalS: rng.next() * 4, turns };
  });
}

function replicas(policy: string, n: number, clock: VirtualClock): Scheduler[] {
  return Array.from({ length: n }, () => {
    const { scheduler } = testScheduler(createPolicy(policy), { numBlocks: 256, maxNumSeqs: 8 });
    // the harness gives each scheduler its own clock: a cluster shares one
    (scheduler as unknown as { clock: VirtualClock }).clock = clock;
    return scheduler;
  });
}

function cluster(router: RouterName, n: number, specs: SimProgramSpec[]) {
  const clock = new VirtualClock();
  const schedulers = replicas("cachettl", n, clock);
  const placed = new Map<string, Set<number>>();
  const route = createRouter(router);
  const result = runClusterSimulation(specs, {
    schedulers,
    clock,
    router: (id, turn, all) => {
      const i = route(id, turn, all);
      placed.set(id, (placed.get(id) ?? new Set()).add(i));
      return i;
    },
    blockSizeTokens: 16,
    stepTimeS: linearStepTimeS,
    seedSalt: 1,
  });
  const hits = schedulers.reduce((a, s) => a + s.stats.prefixHitTokens, 0);
  const queries = schedulers.reduce((a, s) => a + s.stats.prefixQueryTokens, 0);
  return { result, placed, hitRatio: hits / queries, schedulers };
}

describe("cluster simulation", () => {
  test("one replica behind any router is exactly the single-engine simulation", () => {
    const specs = programs(1, 30);
    const clock = new VirtualClock();
    const [scheduler] = replicas("cachettl", 1, clock) as [Scheduler];
    const single = runSimulation(specs, {
      scheduler,
      clock,
      blockSizeTokens: 16,
      stepTimeS: linearStepTimeS,
      seedSalt: 1,
    });
    const one = cluster("round-robin", 1, specs);
    assert.deepEqual(
      one.result.programs.map((p) => p.finishS),
      single.programs.map((p) => p.finishS),
    );
    assert.equal(one.result.steps, single.steps);
  });

  test("program-hash and sticky keep every turn of a program on one replica; round-robin scatters them", () => {
    const specs = programs(2, 40);
    const sticky = cluster("sticky-least-loaded", 3, specs);
    const hashed = cluster("program-hash", 3, specs);
    const scattered = cluster("round-robin", 3, specs);
    for (const run of [sticky, hashed, scattered]) {
      assert.ok(
        run.result.programs.every((p) => p.finishS !== null),
        "every program completes",
      );
      for (const s of run.schedulers) s.checkInvariants();
    }
    for (const run of [sticky, hashed]) for (const where of run.placed.values()) assert.equal(where.size, 1);
    assert.ok([...scattered.placed.values()].some((where) => where.size > 1));
    assert.ok(sticky.hitRatio > scattered.hitRatio + 0.2, `${sticky.hitRatio} vs ${scattered.hitRatio}`);
    assert.ok(hashed.hitRatio > scattered.hitRatio + 0.2, `${hashed.hitRatio} vs ${scattered.hitRatio}`);
    // every replica got work
    for (const [name, run] of Object.entries({ sticky, hashed, scattered })) {
      assert.ok(
        run.schedulers.every((s) => s.stats.finished > 0),
        `${name}: ${run.schedulers.map((s) => s.stats.finished)}`,
      );
    }
  });
});
