import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { SchedulingPolicy } from "../core/policy.js";
import { addRequest, loggedScheduler, step, tokenRange } from "../core/test-support/drive.js";
import { defaultTtlS } from "../core/ttl/ttl-model.js";
import { createCacheTtlPolicy } from "./cachettl.js";
import { createContinuumHeuristicPolicy } from "./continuum-heuristic.js";
import { createInferceptPolicy } from "./infercept.js";
import { createProgramFcfsPolicy } from "./program-fcfs.js";
import { createStaticTtlPolicy } from "./static-ttl.js";
import { createVllmPolicy } from "./vllm.js";

const CPU_TIER = [{ name: "cpu" as const, capacityBytes: 1e9, reloadBandwidthBps: 1e9 }];
const cachettl = () => createCacheTtlPolicy({ offload: false });

type Logged = ReturnType<typeof loggedScheduler>;

/** Runs one 64-token turn to completion in one step; returns the TTL it was pinned for, or null. */
function finishTurn(
  { scheduler, clock, log }: Logged,
  id: string,
  options: { programId?: string; toolHint?: string | null; tool?: string } = {},
): number | null {
  const pinsBefore = scheduler.stats.pinsCreated;
  addRequest(scheduler, id, 64, { programId: options.programId ?? `prog-${id}`, toolHint: options.toolHint });
  const stops = options.tool === undefined ? [] : new Map([[id, { stop: true, tool: options.tool }]]);
  const { finished } = step(scheduler, clock, 0.01, stops);
  assert.deepEqual(
    finished.map((r) => r.id),
    [id],
  );
  if (scheduler.stats.pinsCreated === pinsBefore) return null;
  const pinned = log.ofKind("pinned").at(-1);
  assert.equal(pinned?.requestId, id);
  assert.equal(scheduler.nextPinExpiryS() !== null, true);
  return pinned?.ttlS ?? null;
}

describe("Sec. 4.3 priority: preempted > pinned within TTL > program arrival", () => {
  /**
   * Builds a queue holding X (preempted, latest program P3), Y (returning turn of pinned program P2) and Z
   * (turn of P1, the earliest program, not pinned), then frees memory so all three fit in one step; the
   * admission order of that step is the queue order.
   */
  function admissionOrder(policy: SchedulingPolicy): string[] {
    const { scheduler, clock } = loggedScheduler(policy, { numBlocks: 6 });
    const z0 = tokenRange(17, 100_000);
    const y0 = tokenRange(18, 200_000);
    addRequest(scheduler, "Z0", 16, { programId: "P1", sequence: z0 });
    step(scheduler, clock);
    assert.equal(scheduler.numPinnedPrograms, 0, "T = 0: P1's first turn is not worth a pin");
    scheduler.ttl.queueing.observe(10); // from now on T = 10 s: TTL = ln(10 + PrefillReload) ~ 2.3 s

    addRequest(scheduler, "W", 40, { programId: "P0", maxOutputTokens: 100 });
    addRequest(scheduler, "Y0", 16, { programId: "P2", maxOutputTokens: 2, sequence: y0 });
    clock.advanceTo(clock.nowS() + 0.001);
    addRequest(scheduler, "X", 16, { programId: "P3", maxOutputTokens: 40 });
    const a = step(scheduler, clock);
    assert.deepEqual(
      a.plan.admitted.map((r) => r.id),
      ["W", "Y0", "X"],
    );
    // Y0 takes the last free block; X finds none and, being the worst running request, is preempted.
    const b = step(scheduler, clock);
    assert.deepEqual(
      b.plan.preempted.map((r) => r.id),
      ["X"],
    );
    assert.deepEqual(
      b.finished.map((r) => r.id),
      ["Y0"],
    );
    assert.equal(scheduler.numPinnedPrograms, policy.name === "cachettl" ? 1 : 0);
    scheduler.abort("W"); // frees enough for everyone
    addRequest(scheduler, "Y", 24, { programId: "P2", sequence: [...y0, ...tokenRange(7, 300_000)] });
    addRequest(scheduler, "Z", 24, { programId: "P1", sequence: [...z0, ...tokenRange(8, 400_000)] });
    const c = step(scheduler, clock);
    return c.plan.admitted.map((r) => r.id);
  }

  it("cachettl admits the preempted request, then the pinned program, then by program arrival", () => {
    assert.deepEqual(admissionOrder(cachettl()), ["X", "Y", "Z"]);
  });

  it("without the TTL key (program-fcfs) the pinned program's turn falls back to program order", () => {
    assert.deepEqual(admissionOrder(createProgramFcfsPolicy()), ["X", "Z", "Y"]);
  });
});

describe("Sec. 5.2 deadlock prevention: sacrificing pins", () => {
  /** Four programs A..D (arriving in that order) each pin 4 of 20 blocks; 4 blocks stay free. */
  function fourPinnedPrograms() {
    const { scheduler, clock, log } = loggedScheduler(cachettl(), { numBlocks: 20 });
    scheduler.ttl.queueing.observe(10);
    const sequences = new Map<string, number[]>();
    for (const [i, p] of ["A", "B", "C", "D"].entries()) {
      const sequence = tokenRange(65, (i + 1) * 100_000);
      sequences.set(p, sequence);
      addRequest(scheduler, `${p}0`, 64, { programId: p, sequence });
      clock.advanceTo(clock.nowS() + 0.001);
    }
    step(scheduler, clock);
    assert.equal(scheduler.numPinnedPrograms, 4);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 4);
    return { scheduler, clock, log, sequences };
  }

  it("unpins the latest-arriving programs first, only until the head fits", () => {
    const { scheduler, clock } = fourPinnedPrograms();
    addRequest(scheduler, "E0", 128, { programId: "E", isLastStep: true }); // needs 8 blocks
    const { plan, released } = step(scheduler, clock);
    assert.deepEqual(
      plan.admitted.map((r) => r.id),
      ["E0"],
    );
    assert.deepEqual(
      released.map((r) => [r.programId, r.reason]),
      [["D", "victim"]],
    );
    assert.equal(scheduler.numPinnedPrograms, 3);
    assert.equal(scheduler.stats.pinsSacrificed, 1);
  });

  it("spares the head's own program while other pins exist, even when it arrived later than them", () => {
    const { scheduler, clock, sequences } = fourPinnedPrograms();
    // B returns with 208 new tokens: 17 blocks in all, 4 of them its pinned prefix -> 13 to find.
    const b1 = addRequest(scheduler, "B1", 272, {
      programId: "B",
      isLastStep: true,
      sequence: [...(sequences.get("B") ?? []), ...tokenRange(208, 900_000)],
    });
    const { plan, released } = step(scheduler, clock);
    assert.deepEqual(
      plan.admitted.map((r) => r.id),
      ["B1"],
    );
    // D, then C, then (skipping B, the head's own) A; B's pin is then taken over by B1.
    assert.deepEqual(
      released.map((r) => [r.programId, r.reason]),
      [
        ["D", "victim"],
        ["C", "victim"],
        ["A", "victim"],
        ["B", "reused"],
      ],
    );
    assert.equal(b1.hitTokens, 64, "the spared pin is a full prefix hit");
    assert.equal(scheduler.numPinnedPrograms, 0);
    scheduler.checkInvariants();
  });

  it("gives up the head's own pin last, when nothing else can make room", () => {
    const { scheduler, clock } = loggedScheduler(cachettl(), { numBlocks: 8 });
    scheduler.ttl.queueing.observe(10);
    addRequest(scheduler, "P0", 64, { programId: "P" });
    step(scheduler, clock);
    assert.equal(scheduler.numPinnedPrograms, 1);
    // A 127-token turn of P that shares nothing with its pin needs all 8 blocks.
    const p1 = addRequest(scheduler, "P1", 127, { programId: "P", isLastStep: true });
    const { released } = step(scheduler, clock);
    assert.deepEqual(
      released.map((r) => [r.programId, r.reason]),
      [["P", "victim"]],
    );
    assert.equal(p1.status, "finished");
  });
});

describe("Algorithm 1 / Sec. 5.2: TTL expiry and last steps", () => {
  it("a pin expires at the first step start at or after its TTL when its program has nothing waiting", () => {
    const logged = loggedScheduler(cachettl(), { numBlocks: 16 });
    const { scheduler, clock, log } = logged;
    scheduler.ttl.queueing.observe(10);
    const ttl = finishTurn(logged, "P0", { programId: "P" });
    assert.ok(ttl !== null);
    assert.ok(Math.abs(ttl - Math.log(10 + 64e-4)) < 1e-9, `TTL ${ttl}`);
    const expiresS = scheduler.nextPinExpiryS() as number;
    clock.advanceTo(expiresS - 1e-6);
    scheduler.schedule();
    assert.equal(scheduler.numPinnedPrograms, 1, "not yet");
    clock.advanceTo(expiresS);
    const plan = scheduler.schedule();
    assert.equal(scheduler.numPinnedPrograms, 0);
    assert.deepEqual(
      plan.released.map((r) => [r.requestId, r.reason, r.tokens]),
      [["P0", "expired", 64]],
    );
    assert.equal(scheduler.stats.pinsExpired, 1);
    assert.equal(log.ofKind("unpinned")[0]?.reason, "expired");
    assert.equal(scheduler.kv.pool.numFreeBlocks, 16);
  });

  it("a pinned program whose next request waits keeps its pin past the TTL; the request then hits it all", () => {
    const { scheduler, clock } = loggedScheduler(cachettl(), { numBlocks: 32, maxNumSeqs: 1 });
    scheduler.ttl.queueing.observe(10);
    const p0 = tokenRange(65, 100_000);
    addRequest(scheduler, "P0", 64, { programId: "P", sequence: p0 });
    step(scheduler, clock);
    const expiresS = scheduler.nextPinExpiryS() as number;
    addRequest(scheduler, "L", 16, { programId: "L", maxOutputTokens: 1000, isLastStep: true });
    step(scheduler, clock);
    // P's next turn arrives but the only slot is L's.
    const p1 = addRequest(scheduler, "P1", 95, {
      programId: "P",
      sequence: [...p0, ...tokenRange(31, 500_000)],
    });
    while (clock.nowS() < expiresS + 2) {
      step(scheduler, clock, 0.5);
      assert.deepEqual(scheduler.overduePins(clock.nowS()), []);
      assert.equal(scheduler.numPinnedPrograms, 1);
      assert.equal(p1.status, "waiting");
    }
    step(scheduler, clock, 0.5, ["L"]);
    const { plan, released } = step(scheduler, clock);
    assert.deepEqual(
      plan.admitted.map((r) => r.id),
      ["P1"],
    );
    assert.equal(p1.hitTokens, 64, "the whole pinned context is a hit");
    assert.deepEqual(
      released.map((r) => [r.requestId, r.reason]),
      [
        ["L", "last_step"],
        ["P0", "reused"],
      ],
    );
    assert.equal(scheduler.stats.pinsExpired, 0);
  });

  it("a last step frees its KV at once whatever the TTL would be, and the program is forgotten", () => {
    const { scheduler, clock } = loggedScheduler(cachettl(), { numBlocks: 16 });
    scheduler.ttl.queueing.observe(1000);
    const p0 = tokenRange(65, 100_000);
    addRequest(scheduler, "P0", 64, { programId: "P", sequence: p0 });
    step(scheduler, clock);
    assert.equal(scheduler.numPinnedPrograms, 1);
    addRequest(scheduler, "P1", 80, {
      programId: "P",
      isLastStep: true,
      sequence: [...p0, ...tokenRange(16, 1)],
    });
    const s1 = step(scheduler, clock);
    assert.deepEqual(
      s1.finished.map((r) => r.id),
      ["P1"],
    );
    assert.equal(scheduler.numPinnedPrograms, 0);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 16);
    assert.equal(scheduler.numLivePrograms, 0);
    assert.deepEqual(
      step(scheduler, clock).released.map((r) => [r.requestId, r.reason, r.holder]),
      [["P1", "last_step", "request"]],
    );
  });
});

describe("CacheTTL's TTL choice through the scheduler (eq. 2)", () => {
  function withToolSamples(policy: SchedulingPolicy, fast: number, slow: number, tiers = false) {
    const logged = loggedScheduler(policy, { numBlocks: 16, tiers: tiers ? CPU_TIER : undefined });
    logged.scheduler.ttl.queueing.observe(10);
    for (let i = 0; i < fast; i++) logged.scheduler.ttl.tools.record("ls", 0.5);
    for (let i = 0; i < slow; i++) logged.scheduler.ttl.tools.record("ls", 3);
    return logged;
  }

  it("past K samples, tau* = argmax P(tau) * (T * eta + PrefillReload) - tau over the tool's durations", () => {
    // B = 10 + 0.0064. 80/101 at 0.5 s: 0.792 B - 0.5 = 7.4 beats B - 3 = 7.0.
    const a = withToolSamples(cachettl(), 80, 21);
    assert.equal(finishTurn(a, "r", { toolHint: "ls" }), 0.5);
    // 30/101 at 0.5 s: 0.297 B - 0.5 = 2.5 loses to B - 3 = 7.0.
    const b = withToolSamples(cachettl(), 30, 71);
    assert.equal(finishTurn(b, "r", { toolHint: "ls" }), 3);
  });

  it("PrefillReload is the prefill time without a tier and the reload time with one", () => {
    const slowPrefill = { numBlocks: 16, prefillSPerToken: 0.05 }; // 64 tokens: 3.2 s
    const plain = loggedScheduler(cachettl(), slowPrefill);
    const ttl = finishTurn(plain, "r");
    assert.ok(ttl !== null && Math.abs(ttl - Math.log(3.2)) < 1e-9, `TTL ${ttl}`);
    const offload = loggedScheduler(createCacheTtlPolicy({ offload: true }), {
      ...slowPrefill,
      tiers: CPU_TIER,
    });
    assert.equal(finishTurn(offload, "r"), null, "a 65 us reload is not worth a pin");
  });
});

describe("baseline retention rules", () => {
  it("static-ttl pins every non-last turn for T_default(T + PrefillReload), whatever the tool", () => {
    const s = loggedScheduler(createStaticTtlPolicy(), { numBlocks: 16 });
    s.scheduler.ttl.queueing.observe(10);
    // 200 samples of 1000 s: cachettl would not pin "slow" (checked below); static-ttl ignores tools.
    for (let i = 0; i < 200; i++) s.scheduler.ttl.tools.record("slow", 1000);
    const ttl = finishTurn(s, "r", { toolHint: "slow" });
    assert.ok(ttl !== null && Math.abs(ttl - defaultTtlS(10 + 64e-4)) < 1e-9, `TTL ${ttl}`);

    const c = loggedScheduler(cachettl(), { numBlocks: 16 });
    c.scheduler.ttl.queueing.observe(10);
    for (let i = 0; i < 200; i++) c.scheduler.ttl.tools.record("slow", 1000);
    assert.equal(finishTurn(c, "r", { toolHint: "slow" }), null);

    const cold = loggedScheduler(createStaticTtlPolicy(), { numBlocks: 16 });
    assert.equal(finishTurn(cold, "r"), null, "B = 0.0064 s <= 1: T_default = 0");
  });

  it("continuum-heuristic pins exactly 2 s iff the tool's mean <= 2 s; unknown tools pin", () => {
    const policy = createContinuumHeuristicPolicy();
    const logged = loggedScheduler(policy, { numBlocks: 32 });
    const { clock } = logged;
    // Program P: turn 0 calls pytest (never seen: pins 2 s); the tool takes 5 s.
    assert.equal(finishTurn(logged, "P0", { programId: "P", toolHint: "pytest" }), 2);
    clock.advanceTo(clock.nowS() + 5);
    assert.equal(finishTurn(logged, "P1", { programId: "P", toolHint: "pytest" }), null, "mean 5 s");
    // Program Q: ls measured at 1.5 s.
    assert.equal(finishTurn(logged, "Q0", { programId: "Q", toolHint: "ls" }), 2);
    clock.advanceTo(clock.nowS() + 1.5);
    assert.equal(finishTurn(logged, "Q1", { programId: "Q", toolHint: "ls" }), 2, "mean 1.5 s");
    // The boundary: a mean of exactly 2 s still pins.
    logged.scheduler.ttl.tools.record("cat", 1);
    logged.scheduler.ttl.tools.record("cat", 3);
    assert.equal(finishTurn(logged, "R0", { toolHint: "cat" }), 2);
    logged.scheduler.ttl.tools.record("cat", 2.5);
    assert.equal(finishTurn(logged, "R1", { toolHint: "cat" }), null, "mean 2.17 s");
  });

  it("continuum-heuristic asks for the fork's parser, and prices the tool its engine read by that tool's mean", () => {
    // the engine reads `cd /x && pytest` as cd with this parser (engine/text/turn-tool.test.ts)
    assert.equal(createContinuumHeuristicPolicy().toolParser, "fork");
    const a = loggedScheduler(createContinuumHeuristicPolicy(), { numBlocks: 16 });
    a.scheduler.ttl.tools.record("cd", 5);
    assert.equal(finishTurn(a, "r", { toolHint: null, tool: "cd" }), null);

    const b = loggedScheduler(createContinuumHeuristicPolicy(), { numBlocks: 16 });
    b.scheduler.ttl.tools.record("pytest", 5);
    assert.equal(finishTurn(b, "r", { toolHint: null, tool: "cd" }), 2);
  });

  it("vllm never pins, and a returning turn still hits the freed blocks in the prefix cache", () => {
    const { scheduler, clock } = loggedScheduler(createVllmPolicy({ offload: false }), { numBlocks: 16 });
    scheduler.ttl.queueing.observe(1000);
    for (let i = 0; i < 200; i++) scheduler.ttl.tools.record("ls", 0.001);
    const p0 = tokenRange(65, 100_000);
    addRequest(scheduler, "P0", 64, { programId: "P", sequence: p0, toolHint: "ls" });
    step(scheduler, clock);
    assert.equal(scheduler.numPinnedPrograms, 0);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 16);
    const p1 = addRequest(scheduler, "P1", 80, { programId: "P", sequence: [...p0, ...tokenRange(16, 1)] });
    step(scheduler, clock);
    assert.equal(p1.hitTokens, 64);
    assert.equal(scheduler.stats.pinsCreated, 0);
  });

  it("infercept preserves only when preserving wastes the least memory-time", () => {
    // 64 tokens alone: preserve = E[tool] * 64; discard = prefill(64) * 64 = 0.41; swap (CPU tier)
    // = 2 * reload(64) * 64 * 0.1 = 8.4e-4.
    const a = loggedScheduler(createInferceptPolicy(), { numBlocks: 16 });
    assert.equal(finishTurn(a, "r0", { toolHint: "ls" }), null, "prior 1 s: 64 > 0.41");
    a.scheduler.ttl.tools.record("ls", 0.001);
    a.scheduler.ttl.tools.record("pytest", 0.01);
    assert.equal(finishTurn(a, "r1", { toolHint: "ls" }), Number.POSITIVE_INFINITY);
    assert.equal(finishTurn(a, "r2", { toolHint: "pytest" }), null, "0.64 > 0.41");
    // The preserved KV has no TTL: it is still there much later.
    a.clock.advanceTo(a.clock.nowS() + 10_000);
    a.scheduler.schedule();
    assert.equal(a.scheduler.numPinnedPrograms, 1);

    const b = loggedScheduler(createInferceptPolicy(), { numBlocks: 16, tiers: CPU_TIER });
    b.scheduler.ttl.tools.record("ls", 0.001);
    b.scheduler.ttl.tools.record("echo", 1e-6);
    assert.equal(finishTurn(b, "r1", { toolHint: "ls" }), null, "a cheap swap wins");
    assert.equal(finishTurn(b, "r2", { toolHint: "echo" }), Number.POSITIVE_INFINITY);
  });
});
