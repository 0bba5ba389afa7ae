import assert from "node:assert/strict";
import { after, describe, it } from "node:test";
import type { LlamaSeqKvSpec } from "../../core/kv/kv-spec.js";
import type { SeqOp } from "../../core/kv/sequences/seq-ops.js";
import { RequestRejectedError } from "../../core/scheduler.js";
import { uniformDouble } from "../../core/test-support/arbitraries.js";
import { contentOf } from "../../core/test-support/drive.js";
import fc from "../../core/test-support/fast-check.js";
import { testScheduler } from "../../core/test-support/harness.js";
import { SeqOpModel } from "../../core/test-support/seq-op-model.js";
import { createPolicy, POLICY_NAMES } from "../../policies/index.js";
import {
  assertWholePoolFits,
  checkedRun,
  layOut,
  type ProgramDraft,
  TOOLS,
} from "../test-support/sim-check.js";

/**
 * Randomized safety properties of the scheduler under every policy. An "event" is one request arrival,
 * one abort, or one engine step (schedule + update). The seed is fixed (core/test-support/fast-check.ts);
 * fast-check prints it with the failing case's path, which fc.assert(..., { seed, path }) replays.
 */
interface Tally {
  runs: number;
  arrivals: number;
  aborts: number;
  steps: number;
  ms: number;
}
const tallies = new Map<string, Tally>();

function tally(name: string, counts: { arrivals: number; aborts: number; steps: number }, ms: number): void {
  const t = tallies.get(name) ?? { runs: 0, arrivals: 0, aborts: 0, steps: 0, ms: 0 };
  t.runs++;
  t.arrivals += counts.arrivals;
  t.aborts += counts.aborts;
  t.steps += counts.steps;
  t.ms += ms;
  tallies.set(name, t);
}

function totalEvents(): number {
  let events = 0;
  for (const t of tallies.values()) events += t.arrivals + t.aborts + t.steps;
  return events;
}

const pressure = { preemptions: 0, pinsCreated: 0, pinsReused: 0, pinsExpired: 0, pinsSacrificed: 0 };

after(() => {
  console.log(`# simulator pressure: ${JSON.stringify(pressure)}`);
  for (const [name, t] of tallies) {
    const events = t.arrivals + t.aborts + t.steps;
    console.log(
      `# ${name}: ${t.runs} runs, ${events} events (${t.arrivals} arrivals, ${t.aborts} aborts, ` +
        `${t.steps} steps) in ${(t.ms / 1000).toFixed(1)} s = ${Math.round(events / (t.ms / 1000))} events/s`,
    );
  }
});

const fraction = uniformDouble(0, 1);
const seconds = (max: number) => uniformDouble(0, max);

const toolTime = fc.oneof(
  { weight: 1, arbitrary: fc.constant(Number.POSITIVE_INFINITY) },
  { weight: 1, arbitrary: fc.constant(0) },
  { weight: 4, arbitrary: seconds(0.2) },
  { weight: 4, arbitrary: seconds(6) },
);

/** A random pool and workload; prompt sizes scale with the pool so that turns fit but crowd it. */
const simCase = fc
  .record({
    policy: fc.constantFrom(...POLICY_NAMES),
    numBlocks: fc.integer({ min: 20, max: 200 }),
    maxNumBatchedTokens: fc.constantFrom(16, 48, 128, 512),
    maxNumSeqs: fc.constantFrom(1, 2, 4, 16),
    cpuBlocks: fc.constantFrom(0, 0, 2, 8, 32),
    diskBlocks: fc.constantFrom(0, 4, 16),
    seedSalt: fc.nat({ max: 1000 }),
    queueingS: fc.constantFrom(0, 3, 30),
  })
  .chain((config) => {
    const capacity = config.numBlocks * 16;
    const turn = fc.record({
      newTokens: fc.integer({ min: 1, max: Math.max(1, Math.floor(capacity / 5)) }),
      output: fc.integer({ min: 1, max: 60 }),
      tool: fc.constantFrom(null, ...TOOLS),
      toolS: toolTime,
    });
    const program: fc.Arbitrary<ProgramDraft> = fc.record(
      {
        arrivalS: seconds(3),
        turns: fc.array(turn, { minLength: 1, maxLength: 6 }),
        abort: fc.record({ turn: fc.nat({ max: 5 }), afterS: seconds(1.5) }),
      },
      { requiredKeys: ["arrivalS", "turns"] },
    );
    return fc.record({
      config: fc.constant(config),
      programs: fc.array(program, { minLength: 2, maxLength: 24 }),
    });
  });

describe("scheduler properties through the simulator (all policies)", () => {
  it("no leak, no double free, no stall, no overdue pin; every request finishes or is aborted", () => {
    fc.assert(
      fc.property(simCase, ({ config, programs }) => {
        const start = performance.now();
        const specs = layOut(programs, config.numBlocks * 16);
        const report = checkedRun(specs, config);
        tally("simulator", report, performance.now() - start);
        const stats = report.scheduler.stats;
        for (const key of [
          "preemptions",
          "pinsCreated",
          "pinsReused",
          "pinsExpired",
          "pinsSacrificed",
        ] as const) {
          pressure[key] += stats[key];
        }
        // Programs whose tools all return and that were never aborted complete.
        for (const [i, program] of report.result.programs.entries()) {
          const spec = specs[i];
          assert.ok(spec);
          const blocked = spec.turns.slice(0, -1).some((t) => !Number.isFinite(t.toolS ?? 0));
          if (!blocked && !program.aborted) assert.ok(program.finishS !== null, `${program.id} incomplete`);
        }
      }),
      { numRuns: 450 },
    );
  });
});

type Op =
  | {
      kind: "add";
      program: number | null;
      reuse: number;
      /** new prompt tokens as a fraction of the pool */
      size: number;
      output: number;
      last: boolean;
      tool: string | null;
      duplicate: boolean;
    }
  | { kind: "abort"; pick: number }
  | { kind: "step"; dt: number; stop: number | null }
  | { kind: "advance"; dt: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant("add" as const),
      program: fc.option(fc.nat({ max: 3 }), { freq: 6 }),
      reuse: fraction,
      // half of them small, so that several programs fit and hit a prefix another still holds
      size: fc.oneof(
        fraction.map((f) => f / 10),
        fraction,
      ),
      output: fc.integer({ min: 1, max: 30 }),
      last: fc.boolean(),
      tool: fc.constantFrom(null, ...TOOLS),
      duplicate: fc.boolean(),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("abort" as const), pick: fc.nat() }) },
  {
    weight: 8,
    arbitrary: fc.record({
      kind: fc.constant("step" as const),
      dt: seconds(1),
      stop: fc.option(fc.nat(), { freq: 3 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("advance" as const),
      dt: seconds(8),
    }),
  },
);

/** What every program's first turn may open with (reuse > 0), as an agent harness's instructions: 2 blocks. */
const SHARED_PREAMBLE = Array.from({ length: 32 }, (_, i) => 10_000_000 + i);

type SpecKind = "paged" | "unified" | "unified-windowed" | "streams" | "running-only";

/** llama.cpp's sequences as an engine over this pool would have them: a spare sequence beyond the running ones. */
function llamaSpec(kind: Exclude<SpecKind, "paged">, numBlocks: number, maxNumSeqs: number): LlamaSeqKvSpec {
  const numSeqs = maxNumSeqs + 2;
  return {
    kind: "llama-seq",
    numSeqs,
    cells: kind === "streams" ? numSeqs * numBlocks * 16 : numBlocks * 16 + 64,
    layout: kind === "streams" ? "streams" : "unified",
    slidingWindow: kind === "unified-windowed" ? 32 : 0,
    runningOnly: kind === "running-only",
  };
}

/**
 * Random public-API sessions: arrivals of overlapping turns of a few programs (prefix sharing, no program
 * id, duplicate ids, oversized prompts), aborts, steps with executor stops, idle time. After each step:
 * invariants, no overdue pin, and liveness (waiting work with nothing running must make progress).
 */
function runOps(
  policyName: string,
  numBlocks: number,
  budget: number,
  maxNumSeqs: number,
  queueingS: number,
  ops: readonly Op[],
  spec: SpecKind,
): void {
  const start = performance.now();
  const policy = createPolicy(policyName);
  const tiers =
    policy.needsOffload || spec === "running-only"
      ? [{ name: "cpu" as const, capacityBytes: 8 * 16 * 1024, reloadBandwidthBps: 1e9 }]
      : undefined;
  const kvSpec = spec === "paged" ? null : llamaSpec(spec, numBlocks, maxNumSeqs);
  const { scheduler, clock } = testScheduler(policy, {
    numBlocks,
    maxNumBatchedTokens: budget,
    maxNumSeqs,
    tiers,
    ...(kvSpec ? { kvSpec } : {}),
  });
  // llama.cpp's side of the sequence ops: every op valid, every sequence holding what the map says
  const executor = kvSpec ? new SeqOpModel(kvSpec) : null;
  const applied = (ops: readonly SeqOp[]) => {
    executor?.apply(ops);
    if (executor && scheduler.kv.sequences) executor.checkAgainst(scheduler.kv.sequences);
  };
  // A history of long queueing delays (T) makes CacheTTL and static-ttl pin for ln(T + ...) s.
  if (queueingS > 0) scheduler.ttl.queueing.observe(queueingS);
  const capacity = numBlocks * 16;
  const transcripts = new Map<number, number[]>();
  const live: string[] = [];
  let nextId = 0;
  let nextToken = 1;
  let arrivals = 0;
  let aborts = 0;
  let steps = 0;
  let ended = 0;

  const runStep = (dt: number, stopId: string | null) => {
    const plan = scheduler.schedule();
    assert.deepEqual(scheduler.overduePins(plan.nowS), []);
    applied(plan.ops);
    executor?.runChunks(plan);
    clock.advanceTo(clock.nowS() + dt);
    const sampled = stopId ? new Map([[stopId, { stop: true }]]) : undefined;
    const { finished, kvChanges } = scheduler.update(plan, { durationS: dt, sampled });
    applied(kvChanges.ops);
    steps++;
    ended += finished.length;
    for (const r of finished) live.splice(live.indexOf(r.id), 1);
    scheduler.checkInvariants();
    const stalled =
      plan.chunks.length === 0 &&
      plan.preempted.length === 0 &&
      finished.length === 0 &&
      scheduler.numWaiting > 0;
    assert.ok(!stalled, `stalled with ${scheduler.numWaiting} waiting at t=${plan.nowS}`);
  };

  for (const o of ops) {
    if (o.kind === "add") {
      const transcript = o.program === null ? [] : (transcripts.get(o.program) ?? SHARED_PREAMBLE);
      const reused = transcript.slice(0, Math.floor(transcript.length * o.reuse));
      const newTokens = Math.max(1, Math.floor(o.size * capacity));
      const fresh = Array.from({ length: newTokens + o.output }, () => nextToken++);
      const sequence = [...reused, ...fresh];
      const promptTokens = reused.length + newTokens;
      if (o.program !== null) transcripts.set(o.program, sequence);
      const id = o.duplicate && live.length > 0 ? (live[0] as string) : `r${nextId++}`;
      try {
        scheduler.addRequest({
          requestId: id,
          programId: o.program === null ? null : `P${o.program}`,
          promptTokens,
          maxOutputTokens: o.output,
          isLastStep: o.last,
          toolHint: o.tool,
          content: contentOf(sequence),
        });
        assert.ok(!live.includes(id), "a duplicate id was accepted");
        assert.ok(promptTokens + 1 <= capacity, "an oversized prompt was accepted");
        live.push(id);
        arrivals++;
      } catch (error) {
        assert.ok(error instanceof RequestRejectedError, String(error));
        const expected = live.includes(id) ? "duplicate_request" : "prompt_too_long";
        assert.equal(error.code, expected);
      }
      scheduler.checkInvariants();
    } else if (o.kind === "abort") {
      if (live.length > 0) {
        const id = live[o.pick % live.length] as string;
        assert.equal(scheduler.abort(id), true);
        live.splice(live.indexOf(id), 1);
        aborts++;
        scheduler.checkInvariants();
      }
    } else if (o.kind === "step") {
      const stopId = o.stop !== null && live.length > 0 ? (live[o.stop % live.length] as string) : null;
      runStep(o.dt, stopId);
    } else {
      clock.advanceTo(clock.nowS() + o.dt);
    }
  }
  // Drain: everything in flight finishes (outputs are bounded), then every finite TTL passes.
  for (let i = 0; i < 20_000 && scheduler.hasUnfinishedRequests(); i++) runStep(0.01, null);
  assert.equal(scheduler.hasUnfinishedRequests(), false, "did not drain");
  assert.equal(live.length, 0);
  assert.equal(ended + aborts, arrivals, "every request finished or was aborted");
  assert.equal(scheduler.stats.finished, ended);
  assert.equal(scheduler.stats.aborted, aborts);
  clock.advanceTo(clock.nowS() + 1e6);
  applied(scheduler.schedule().ops);
  scheduler.checkInvariants();
  if (scheduler.numPinnedPrograms === 0) {
    assert.equal(scheduler.kv.pool.numFreeBlocks, numBlocks, "leaked blocks");
  } else {
    assert.equal(policyName, "infercept", "a finite-TTL pin outlived its TTL");
  }
  assertWholePoolFits(scheduler);
  tally("public API", { arrivals, aborts, steps }, performance.now() - start);
}

/** Regression: a head blocked while its own program's other turn ran, which then pinned (deadlock). */
const blockedBehindOwnPin: [string, number, number, number, number, Op[], SpecKind] = [
  "continuum-heuristic",
  8,
  256,
  8,
  0,
  [
    {
      kind: "add",
      program: 0,
      reuse: 0,
      size: 40 / 128,
      output: 3,
      last: false,
      tool: null,
      duplicate: false,
    },
    { kind: "step", dt: 0.01, stop: null },
    {
      kind: "add",
      program: 0,
      reuse: 0,
      size: 100 / 128,
      output: 1,
      last: true,
      tool: null,
      duplicate: false,
    },
    ...Array.from({ length: 5 }, () => ({ kind: "step" as const, dt: 0.01, stop: null })),
  ],
  "paged",
];

/** Regression: a turn cut for kv_capacity inside schedule() pinned with a TTL (5e-324 s) that could not move the clock. */
const pinExpiredAtBirth: [string, number, number, number, number, Op[], SpecKind] = [
  "cachettl-adaptive:p90-pins",
  8,
  16,
  1,
  0,
  [
    { kind: "add", program: 0, reuse: 0, size: 0, output: 1, last: false, tool: null, duplicate: false },
    { kind: "step", dt: 0, stop: null },
    { kind: "step", dt: 5e-324, stop: null },
    ...Array.from({ length: 4 }, () => ({ kind: "step" as const, dt: 0, stop: null })),
    {
      kind: "add",
      program: 0,
      reuse: 0,
      size: 0.8125,
      output: 26,
      last: false,
      tool: null,
      duplicate: false,
    },
  ],
  "paged",
];

describe("scheduler properties through the public API (overlapping programs, duplicates, stops)", () => {
  it("stays consistent and live: a waiting head never starves while nothing runs", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...POLICY_NAMES),
        fc.integer({ min: 8, max: 120 }),
        fc.constantFrom(16, 64, 256, 2048),
        fc.constantFrom(1, 3, 8),
        fc.constantFrom(0, 3, 30),
        fc.array(op, { minLength: 20, maxLength: 300 }),
        // the simulator's paged memory, or llama.cpp's sequences (one pool, a sliding-window model, streams,
        // only running sequences in the pool)
        fc.constantFrom<SpecKind>("paged", "unified", "unified-windowed", "streams", "running-only"),
        runOps,
      ),
      { numRuns: 1500, examples: [blockedBehindOwnPin, pinExpiredAtBirth] },
    );
  });
});

describe("event budget", () => {
  it("the property runs above covered at least 10^5 events", () => {
    assert.ok(totalEvents() >= 100_000, `only ${totalEvents()} events`);
  });
});
