import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { VirtualClock } from "../core/clock.js";
import { quadraticCostModel } from "../core/cost/cost-model.js";
import { RequestRejectedError, Scheduler } from "../core/scheduler.js";
import type { SampledToken } from "../core/step-plan.js";
import {
  addRequest,
  chunkIds,
  contentOf,
  loggedScheduler,
  runUntilIdle,
  step,
  tokenRange,
} from "../core/test-support/drive.js";
import { testScheduler } from "../core/test-support/harness.js";
import { UNKNOWN_TOOL } from "../core/tools/tool-call-tracker.js";
import { createCacheTtlPolicy } from "./cachettl.js";
import { createProgramFcfsPolicy } from "./program-fcfs.js";
import { createVllmPolicy } from "./vllm.js";

const vllm = () => createVllmPolicy({ offload: false });

describe("Scheduler: the longest wait to start", () => {
  it("grows while a request waits for its first admission, and is 0 once it runs", () => {
    const { scheduler, clock } = testScheduler(vllm(), { numBlocks: 64, maxNumSeqs: 1 });
    assert.equal(scheduler.longestWaitS(), 0);
    addRequest(scheduler, "A", 32, { maxOutputTokens: 3 });
    step(scheduler, clock);
    addRequest(scheduler, "B", 20, { maxOutputTokens: 2 });
    clock.advanceTo(clock.nowS() + 2);
    assert.ok(Math.abs(scheduler.longestWaitS() - 2) < 1e-9, "B has waited 2 s behind A");
    runUntilIdle(scheduler, clock);
    assert.equal(scheduler.longestWaitS(), 0);
  });
});

describe("Scheduler: batching", () => {
  it("continuous batching: a request arriving mid-run joins the running batch at the next step", () => {
    const { scheduler, clock } = testScheduler(vllm(), { numBlocks: 64 });
    const a = addRequest(scheduler, "A", 32, { maxOutputTokens: 5 });
    const s1 = step(scheduler, clock);
    assert.deepEqual(chunkIds(s1.plan), ["A"]);
    assert.equal(s1.plan.chunks[0]?.numTokens, 32);
    assert.equal(a.numOutputTokens, 1, "the prefill step samples the first token");

    const b = addRequest(scheduler, "B", 20, { maxOutputTokens: 3 });
    const s2 = step(scheduler, clock);
    assert.deepEqual(chunkIds(s2.plan), ["A", "B"], "running requests first, then the newly admitted");
    assert.deepEqual(
      s2.plan.admitted.map((r) => r.id),
      ["B"],
    );
    assert.equal(s2.plan.numBatchedTokens, 1 + 20);

    const s3 = step(scheduler, clock);
    assert.deepEqual(chunkIds(s3.plan), ["A", "B"]);
    const s4 = step(scheduler, clock);
    assert.deepEqual(
      s4.finished.map((r) => r.id),
      ["B"],
    );
    assert.equal(b.finishReason, "length");
    assert.equal(b.numOutputTokens, 3);
    const s5 = step(scheduler, clock);
    assert.deepEqual(chunkIds(s5.plan), ["A"]);
    assert.deepEqual(
      s5.finished.map((r) => r.id),
      ["A"],
    );
    assert.equal(a.numOutputTokens, 5);
    assert.equal(scheduler.hasUnfinishedRequests(), false);
  });

  it("requests the executor reports failed end as aborted in update(), their chunks not counted, their KV freed", () => {
    const { scheduler } = testScheduler(vllm(), { numBlocks: 64 });
    const a = addRequest(scheduler, "A", 32, { maxOutputTokens: 5 });
    const b = addRequest(scheduler, "B", 32, { maxOutputTokens: 5 });
    const plan = scheduler.schedule();
    const { finished, kvChanges } = scheduler.update(plan, { durationS: 0.01, failed: new Set(["A"]) });
    assert.deepEqual(finished, []);
    assert.equal(a.status, "aborted");
    assert.equal(a.numComputedTokens, 0, "the failed step's chunk is not counted");
    assert.equal(b.numComputedTokens, 32);
    assert.deepEqual(
      kvChanges.released.map((r) => [r.requestId, r.reason]),
      [["A", "aborted"]],
    );
    scheduler.checkInvariants();
    assert.equal(scheduler.kvUsageFraction(), 2 / 64, "only B's two blocks are held");
  });

  it("chunks the executor holds are not counted: the next plan schedules the same tokens again", () => {
    const { scheduler } = testScheduler(vllm(), { numBlocks: 64 });
    const a = addRequest(scheduler, "A", 32, { maxOutputTokens: 2 });
    const b = addRequest(scheduler, "B", 20, { maxOutputTokens: 5 });
    const first = scheduler.update(scheduler.schedule(), { durationS: 0.01, held: new Set(["A"]) });
    assert.deepEqual(first.finished, []);
    assert.equal(a.numComputedTokens, 0, "A's prefill is still to come");
    assert.equal(a.numOutputTokens, 0);
    assert.equal(b.numComputedTokens, 20);
    assert.equal(b.numOutputTokens, 1);
    const again = scheduler.schedule();
    const chunkOfA = again.chunks.find((chunk) => chunk.request === a);
    assert.deepEqual(
      chunkOfA && [chunkOfA.startToken, chunkOfA.numTokens, chunkOfA.samples],
      [0, 32, true],
      "A's whole prompt is scheduled again",
    );
    assert.deepEqual(again.admitted, [], "A was admitted once");
    scheduler.update(again, { durationS: 0.01 });
    assert.equal(a.numComputedTokens, 32);
    assert.equal(a.numOutputTokens, 1);
    scheduler.checkInvariants();
    assert.equal(scheduler.kvUsageFraction(), 4 / 64, "A holds its two blocks once, B its two");
  });

  it("chunked prefill: a long prompt takes several steps, each within maxNumBatchedTokens", () => {
    const { scheduler, clock } = testScheduler(vllm(), { numBlocks: 64, maxNumBatchedTokens: 64 });
    const a = addRequest(scheduler, "A", 200, { maxOutputTokens: 2 });
    const seen: { start: number; n: number; samples: boolean }[] = [];
    for (let i = 0; i < 5; i++) {
      const { plan } = step(scheduler, clock);
      assert.ok(plan.numBatchedTokens <= 64);
      const chunk = plan.chunks[0];
      assert.ok(chunk);
      seen.push({ start: chunk.startToken, n: chunk.numTokens, samples: chunk.samples });
    }
    assert.deepEqual(seen, [
      { start: 0, n: 64, samples: false },
      { start: 64, n: 64, samples: false },
      { start: 128, n: 64, samples: false },
      { start: 192, n: 8, samples: true },
      { start: 200, n: 1, samples: true },
    ]);
    assert.equal(a.status, "finished");
    assert.equal(a.firstTokenS !== null && a.firstTokenS > 0, true);
  });

  it("chunked prefill: the budget left by running requests goes to the next admissions", () => {
    const { scheduler, clock } = testScheduler(vllm(), { numBlocks: 64, maxNumBatchedTokens: 64 });
    addRequest(scheduler, "A", 100);
    addRequest(scheduler, "B", 50);
    const s1 = step(scheduler, clock);
    assert.deepEqual(
      s1.plan.chunks.map((c) => [c.request.id, c.numTokens]),
      [["A", 64]],
    );
    assert.equal(s1.plan.admitted.length, 1, "no budget left for B");
    const s2 = step(scheduler, clock);
    assert.deepEqual(
      s2.plan.chunks.map((c) => [c.request.id, c.numTokens]),
      [
        ["A", 36],
        ["B", 28],
      ],
    );
    assert.deepEqual(
      s2.finished.map((r) => r.id),
      ["A"],
    );
    const s3 = step(scheduler, clock);
    assert.deepEqual(
      s3.plan.chunks.map((c) => [c.request.id, c.numTokens]),
      [["B", 22]],
    );
    assert.equal(scheduler.hasUnfinishedRequests(), false);
  });

  it("never runs more than maxNumSeqs requests; the next one is admitted when a slot frees", () => {
    const { scheduler, clock } = testScheduler(vllm(), { numBlocks: 64, maxNumSeqs: 2 });
    addRequest(scheduler, "A", 16, { maxOutputTokens: 2 });
    addRequest(scheduler, "B", 16, { maxOutputTokens: 4 });
    addRequest(scheduler, "C", 16, { maxOutputTokens: 1 });
    const s1 = step(scheduler, clock);
    assert.deepEqual(chunkIds(s1.plan), ["A", "B"]);
    assert.equal(scheduler.numWaiting, 1);
    const s2 = step(scheduler, clock);
    assert.deepEqual(chunkIds(s2.plan), ["A", "B"]);
    assert.deepEqual(
      s2.finished.map((r) => r.id),
      ["A"],
    );
    const s3 = step(scheduler, clock);
    assert.deepEqual(chunkIds(s3.plan), ["B", "C"]);
    assert.ok(scheduler.numRunning <= 2);
  });

  it("decodes exactly one token per running request per step", () => {
    const { scheduler, clock } = testScheduler(vllm(), { numBlocks: 64 });
    const reqs = [
      addRequest(scheduler, "A", 10, { maxOutputTokens: 6 }),
      addRequest(scheduler, "B", 30, { maxOutputTokens: 6 }),
      addRequest(scheduler, "C", 5, { maxOutputTokens: 6 }),
    ];
    step(scheduler, clock);
    for (let k = 2; k <= 6; k++) {
      const { plan } = step(scheduler, clock);
      assert.equal(plan.chunks.length, 3);
      for (const chunk of plan.chunks) {
        assert.equal(chunk.numTokens, 1);
        assert.equal(chunk.samples, true);
        assert.equal(chunk.startToken, chunk.request.promptTokens + k - 2);
      }
      for (const r of reqs) assert.equal(r.numOutputTokens, k);
    }
    assert.ok(reqs.every((r) => r.status === "finished"));
  });

  it("a stop from the executor finishes a request before max tokens, with the tool it read kept", () => {
    const { scheduler, clock } = testScheduler(vllm(), { numBlocks: 16 });
    const a = addRequest(scheduler, "A", 16, { maxOutputTokens: 50 });
    step(scheduler, clock);
    const { finished } = step(scheduler, clock, 0.01, new Map([["A", { stop: true, tool: "done" }]]));
    assert.deepEqual(
      finished.map((r) => r.id),
      ["A"],
    );
    assert.equal(a.finishReason, "stop");
    assert.equal(a.calledTool, "done");
    assert.equal(a.numOutputTokens, 2);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 16);
  });
});

describe("Scheduler: the tool a finished turn called", () => {
  const toolsRetainedFor = (options: Parameters<typeof addRequest>[3], sampled: SampledToken) => {
    const policy = vllm();
    const tools: string[] = [];
    const retain = policy.retain.bind(policy);
    policy.retain = (request, program, tool, ctx) => {
      tools.push(tool);
      return retain(request, program, tool, ctx);
    };
    const { scheduler, clock } = testScheduler(policy, { numBlocks: 16 });
    addRequest(scheduler, "A", 16, { maxOutputTokens: 50, toolHint: null, ...options });
    step(scheduler, clock);
    step(scheduler, clock, 0.01, new Map([["A", sampled]]));
    return tools;
  };

  it("is the client's hint, else the tool its executor read from the output, else unknown", () => {
    assert.deepEqual(toolsRetainedFor({}, { stop: true, tool: "read_file" }), ["read_file"]);
    assert.deepEqual(toolsRetainedFor({}, { stop: true, tool: null }), [UNKNOWN_TOOL]);
    assert.deepEqual(toolsRetainedFor({}, { stop: true }), [UNKNOWN_TOOL], "the executor read none");
    assert.deepEqual(toolsRetainedFor({ toolHint: "grep" }, { stop: true, tool: "read_file" }), ["grep"]);
  });
});

describe("Scheduler: preemption", () => {
  it("preempts by recompute when blocks run out: the later request loses its KV and returns first", () => {
    // 6 blocks: A and B (16-token prompts) each grow to 3 blocks; A's 4th block does not exist.
    const { scheduler, clock } = testScheduler(vllm(), { numBlocks: 6 });
    const a = addRequest(scheduler, "A", 16, { maxOutputTokens: 40 });
    const b = addRequest(scheduler, "B", 16, { maxOutputTokens: 40 });
    let preemptStep = null;
    for (let i = 0; i < 60 && !preemptStep; i++) {
      const outcome = step(scheduler, clock);
      if (outcome.plan.preempted.length > 0) preemptStep = outcome;
    }
    assert.ok(preemptStep, "expected a preemption");
    assert.deepEqual(
      preemptStep.plan.preempted.map((r) => r.id),
      ["B"],
    );
    assert.deepEqual(chunkIds(preemptStep.plan), ["A"]);
    assert.equal(preemptStep.plan.admitted.length, 0, "a preempting step admits nobody");
    assert.deepEqual(
      preemptStep.released.map((r) => [r.requestId, r.reason, r.tokens]),
      [["B", "preempted", 48]],
    );
    assert.equal(b.status, "waiting");
    assert.equal(b.numComputedTokens, 0, "recompute: nothing of B's KV is kept");
    assert.equal(b.numPreemptions, 1);
    assert.equal(b.blockIds.length, 0);
    assert.equal(scheduler.stats.preemptions, 1);
    assert.equal(a.blockIds.length, 4);

    // C arrives after the preemption; B goes first once A is done.
    addRequest(scheduler, "C", 16, { maxOutputTokens: 1 });
    while (a.status !== "finished") {
      const { plan } = step(scheduler, clock);
      assert.equal(plan.admitted.length, 0, "B does not fit while A runs, and C waits behind it");
    }
    const next = step(scheduler, clock);
    assert.deepEqual(
      next.plan.admitted.map((r) => r.id),
      ["B", "C"],
    );
    // B recomputes its prompt and the 33 tokens it had generated (less any prefix still cached).
    const bChunk = next.plan.chunks.find((c) => c.request === b);
    assert.equal(bChunk?.startToken, b.hitTokens);
    assert.equal((bChunk?.startToken ?? 0) + (bChunk?.numTokens ?? 0), 16 + 33);
    runUntilIdle(scheduler, clock);
    assert.equal(b.numOutputTokens, 40);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 6);
  });

  it("the victim is the lowest-priority running request, not the last admitted one", () => {
    // program-fcfs: X's second turn is admitted after Y's request but ranks first (X arrived first).
    const { scheduler, clock } = testScheduler(createProgramFcfsPolicy(), { numBlocks: 4 });
    addRequest(scheduler, "X0", 16, { programId: "X" });
    step(scheduler, clock);
    addRequest(scheduler, "Y", 16, { programId: "Y", maxOutputTokens: 40 });
    step(scheduler, clock);
    addRequest(scheduler, "X1", 16, { programId: "X", maxOutputTokens: 40 });
    let preempted: string[] = [];
    for (let i = 0; i < 60 && preempted.length === 0; i++) {
      preempted = step(scheduler, clock).plan.preempted.map((r) => r.id);
    }
    assert.deepEqual(preempted, ["Y"]);
    runUntilIdle(scheduler, clock);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 4);
  });

  it("a request that outgrows the whole pool alone finishes with kv_capacity, reported by update", () => {
    const { scheduler, clock } = testScheduler(vllm(), { numBlocks: 2 });
    const a = addRequest(scheduler, "A", 20, { maxOutputTokens: 100 });
    let finishedBy: string[] = [];
    let emptyPlan = false;
    for (let i = 0; i < 30 && a.status !== "finished"; i++) {
      const { plan, finished } = step(scheduler, clock);
      finishedBy = finished.map((r) => r.id);
      emptyPlan = plan.chunks.length === 0;
    }
    assert.equal(a.finishReason, "kv_capacity");
    assert.equal(a.numOutputTokens, 13, "tokens 0..31 fit in two blocks");
    assert.deepEqual(finishedBy, ["A"]);
    assert.ok(emptyPlan);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 2);
  });
});

describe("Scheduler: aborts", () => {
  it("aborting waiting and running requests frees their KV and reports the release", () => {
    const { scheduler, clock } = testScheduler(vllm(), { numBlocks: 8, maxNumSeqs: 1 });
    const a = addRequest(scheduler, "A", 40, { maxOutputTokens: 10 });
    const b = addRequest(scheduler, "B", 16, { maxOutputTokens: 10 });
    step(scheduler, clock);
    step(scheduler, clock);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 5);
    assert.equal(scheduler.abort("B"), true);
    assert.equal(b.status, "aborted");
    assert.equal(scheduler.numWaiting, 0);
    assert.equal(scheduler.abort("A"), true);
    assert.equal(a.status, "aborted");
    assert.equal(a.finishReason, "abort");
    assert.equal(scheduler.abort("A"), false, "already gone");
    assert.equal(scheduler.abort("nope"), false);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 8);
    scheduler.checkInvariants();
    const { released } = step(scheduler, clock);
    assert.deepEqual(
      released.map((r) => [r.requestId, r.reason, r.tokens]),
      [["A", "aborted", 41]],
    );
    assert.equal(scheduler.stats.aborted, 2);
    assert.equal(scheduler.hasUnfinishedRequests(), false);
  });

  it("a request aborted between schedule() and update() is skipped by update", () => {
    const { scheduler, clock } = testScheduler(vllm(), { numBlocks: 8 });
    addRequest(scheduler, "A", 16, { maxOutputTokens: 1 });
    addRequest(scheduler, "B", 16, { maxOutputTokens: 1 });
    const plan = scheduler.schedule();
    scheduler.abort("A");
    clock.advanceTo(0.01);
    const { finished } = scheduler.update(plan, { durationS: 0.01 });
    assert.deepEqual(
      finished.map((r) => r.id),
      ["B"],
    );
    scheduler.checkInvariants();
    assert.equal(scheduler.kv.pool.numFreeBlocks, 8);
  });

  it("forgets programs whose only request was aborted (no leak of program state)", () => {
    const { scheduler, clock } = testScheduler(createCacheTtlPolicy({ offload: false }), { numBlocks: 8 });
    for (let i = 0; i < 5; i++) {
      addRequest(scheduler, `anon${i}`, 16, { programId: null });
      scheduler.abort(`anon${i}`);
    }
    addRequest(scheduler, "last", 16, { programId: "P", isLastStep: true });
    scheduler.abort("last");
    step(scheduler, clock);
    assert.equal(scheduler.numLivePrograms, 0);
  });
});

describe("Scheduler: programs", () => {
  it("program-level FCFS serves programs that arrive at the same instant (a batch) in the order they came", () => {
    const { scheduler, clock } = testScheduler(createProgramFcfsPolicy(), { numBlocks: 64, maxNumSeqs: 1 });
    for (const id of ["A", "B", "C"]) addRequest(scheduler, `${id}0`, 16, { programId: id });
    assert.deepEqual(
      step(scheduler, clock).plan.admitted.map((r) => r.id),
      ["A0"],
    );
    // A's next turn arrives behind B's and C's first ones: A came first, so it goes first
    addRequest(scheduler, "A1", 32, { programId: "A" });
    assert.deepEqual(
      step(scheduler, clock).plan.admitted.map((r) => r.id),
      ["A1"],
    );
    assert.deepEqual(
      step(scheduler, clock).plan.admitted.map((r) => r.id),
      ["B0"],
    );
  });

  it("a request without a program id never pins and never crashes, even when pins are cheap", () => {
    const { scheduler, clock } = testScheduler(createCacheTtlPolicy({ offload: false }), { numBlocks: 16 });
    scheduler.ttl.queueing.observe(100); // T = 100 s: every pinnable turn would pin
    const anon = addRequest(scheduler, "r", 40, { programId: null, maxOutputTokens: 3, isLastStep: false });
    assert.equal(anon.isLastStep, true);
    assert.equal(anon.hasProgramId, false);
    runUntilIdle(scheduler, clock);
    assert.equal(scheduler.numPinnedPrograms, 0);
    assert.equal(scheduler.stats.pinsCreated, 0);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 16);
    // The same id can come again once the first is done; it is a program of its own again.
    addRequest(scheduler, "r", 40, { programId: null });
    runUntilIdle(scheduler, clock);
    assert.equal(scheduler.numLivePrograms, 0);
    // Control: the same turn with a program id pins.
    addRequest(scheduler, "named", 40, { programId: "P", maxOutputTokens: 3 });
    runUntilIdle(scheduler, clock);
    assert.equal(scheduler.numPinnedPrograms, 1);
  });

  it("overlapping requests of one program run side by side, and the last step drops the pin", () => {
    const { scheduler, clock, log } = loggedScheduler(createCacheTtlPolicy({ offload: false }), {
      numBlocks: 32,
    });
    scheduler.ttl.queueing.observe(100);
    addRequest(scheduler, "r1", 32, { programId: "P", maxOutputTokens: 4 });
    addRequest(scheduler, "r2", 32, { programId: "P", maxOutputTokens: 8 });
    const s1 = step(scheduler, clock);
    assert.deepEqual(chunkIds(s1.plan), ["r1", "r2"]);
    while (scheduler.numPinnedPrograms === 0) step(scheduler, clock);
    // r1 finished and pinned while r2 still runs; the last step arrives and runs alongside.
    addRequest(scheduler, "r3", 20, { programId: "P", isLastStep: true, maxOutputTokens: 30 });
    runUntilIdle(scheduler, clock);
    assert.equal(scheduler.numPinnedPrograms, 0);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 32);
    assert.equal(scheduler.numLivePrograms, 0);
    const unpins = log.ofKind("unpinned").map((e) => [e.requestId, e.reason]);
    assert.deepEqual(unpins.at(-1), ["r2", "last_step"]);
  });

  it("a turn of an ended program that finishes late frees instead of pinning (no orphan pin)", () => {
    // r1 (not last) outlives r2 (the last step). A pin would belong to a program that already ended: a new
    // request with the same id starts a fresh program, and the old pin could no longer be sacrificed.
    const { scheduler, clock } = testScheduler(createCacheTtlPolicy({ offload: false }), { numBlocks: 8 });
    scheduler.ttl.queueing.observe(100);
    addRequest(scheduler, "r1", 16, { programId: "P", maxOutputTokens: 20 });
    addRequest(scheduler, "r2", 16, { programId: "P", maxOutputTokens: 1, isLastStep: true });
    runUntilIdle(scheduler, clock);
    assert.equal(scheduler.numPinnedPrograms, 0);
    // A new program with the same id needs the whole pool at once.
    addRequest(scheduler, "big", 127, { programId: "P", isLastStep: true });
    const { plan } = step(scheduler, clock);
    assert.deepEqual(
      plan.admitted.map((r) => r.id),
      ["big"],
    );
    runUntilIdle(scheduler, clock);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 8);
  });

  it("a blocked head is retried once its own program pins: the own pin is given up, no deadlock", () => {
    // r2 waits for memory while r1 of the same program runs; r1 then finishes and pins. Nothing runs, the
    // only pin is r2's own program's, and that program is waiting, so the pin never expires: only giving
    // it up lets r2 in.
    const { scheduler, clock } = testScheduler(createCacheTtlPolicy({ offload: false }), { numBlocks: 8 });
    scheduler.ttl.queueing.observe(100);
    addRequest(scheduler, "r1", 40, { programId: "P", maxOutputTokens: 3 });
    step(scheduler, clock);
    const r2 = addRequest(scheduler, "r2", 100, { programId: "P", isLastStep: true });
    while (scheduler.numPinnedPrograms === 0) {
      assert.equal(step(scheduler, clock).plan.admitted.length, 0, "r2 does not fit while r1 runs");
    }
    assert.equal(scheduler.numRunning, 0);
    assert.equal(r2.status, "waiting");
    const { plan, released } = step(scheduler, clock, 1);
    assert.deepEqual(
      plan.admitted.map((r) => r.id),
      ["r2"],
      "r2 is stuck behind its own program's pin",
    );
    assert.deepEqual(
      released.map((r) => [r.requestId, r.reason]),
      [["r1", "victim"]],
    );
    runUntilIdle(scheduler, clock);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 8);
  });

  it("forgets an idle program whose only request was aborted after programIdleTimeoutS", () => {
    const clock = new VirtualClock();
    const scheduler = new Scheduler(
      {
        numBlocks: 8,
        kvBytesPerToken: 1,
        programIdleTimeoutS: 1,
        costs: quadraticCostModel({
          prefillQuadratic: { a: 0, b: 1e-4, c: 0 },
          kvBytesPerToken: 1,
          reloadBandwidthBps: {},
        }),
      },
      { clock, policy: vllm() },
    );
    addRequest(scheduler, "r", 16, { programId: "P" });
    scheduler.abort("r");
    assert.equal(scheduler.numLivePrograms, 1, "a non-last turn: the program may come back");
    clock.advanceTo(5);
    for (let i = 0; i < 1024; i++) scheduler.schedule();
    assert.equal(scheduler.numLivePrograms, 0);
  });

  it("rejects duplicate, oversized and invalid requests with their codes, and keeps serving", () => {
    const { scheduler, clock } = testScheduler(vllm(), { numBlocks: 4 });
    addRequest(scheduler, "A", 16);
    const code = (fn: () => unknown) => {
      try {
        fn();
      } catch (error) {
        assert.ok(error instanceof RequestRejectedError);
        return error.code;
      }
      return "accepted";
    };
    assert.equal(
      code(() => addRequest(scheduler, "A", 16)),
      "duplicate_request",
    );
    assert.equal(
      code(() => addRequest(scheduler, "big", 64)),
      "prompt_too_long",
      "64 + 1 tokens exceed 4 blocks",
    );
    assert.equal(
      code(() => addRequest(scheduler, "fits", 63)),
      "accepted",
    );
    assert.equal(
      code(() => addRequest(scheduler, "empty", 0)),
      "invalid_request",
    );
    assert.equal(
      code(() => addRequest(scheduler, "frac", 2.5)),
      "invalid_request",
    );
    assert.equal(
      code(() =>
        scheduler.addRequest({
          requestId: "noout",
          programId: "P",
          promptTokens: 4,
          maxOutputTokens: 0,
          isLastStep: true,
          content: contentOf(tokenRange(16, 1)),
        }),
      ),
      "invalid_request",
    );
    assert.equal(scheduler.numWaiting, 2, "rejected requests leave no trace");
    runUntilIdle(scheduler, clock);
    assert.equal(scheduler.kv.pool.numFreeBlocks, 4);
  });
});

describe("bounded program table", () => {
  it("forgets idle programs early to make room, and refuses a new program when every one is live", () => {
    const { scheduler, clock } = loggedScheduler(vllm(), { numBlocks: 40, maxPrograms: 3 });
    addRequest(scheduler, "a0", 16, { programId: "A", maxOutputTokens: 50 });
    addRequest(scheduler, "b0", 16, { programId: "B", maxOutputTokens: 50 });
    addRequest(scheduler, "c0", 16, { programId: "C" });
    step(scheduler, clock);
    assert.equal(scheduler.hasLiveProgram("C"), true, "C finished its turn and waits for its tool");
    addRequest(scheduler, "d0", 16, { programId: "D", maxOutputTokens: 50 });
    assert.equal(scheduler.hasLiveProgram("C"), false, "idle C made room for D");
    assert.throws(
      () => addRequest(scheduler, "e0", 16, { programId: "E" }),
      (e: unknown) => e instanceof RequestRejectedError && e.code === "too_many_programs",
    );
    addRequest(scheduler, "a1", 16, { programId: "A" });
    scheduler.checkInvariants();
  });
});

describe("snapshot", () => {
  it("splits the pool into running, pinned, cached and free blocks and tells each program's state", () => {
    const { scheduler, clock } = testScheduler(createCacheTtlPolicy({ offload: false }), { numBlocks: 32 });
    scheduler.ttl.queueing.observe(10); // queueing seen: a tool-call turn is worth pinning
    addRequest(scheduler, "A0", 64, { programId: "A", maxOutputTokens: 1 });
    addRequest(scheduler, "B0", 48, { programId: "B", maxOutputTokens: 100, isLastStep: true });
    step(scheduler, clock);
    const first = scheduler.snapshot();
    assert.deepEqual(
      first.programs.map((p) => [p.id, p.state, p.turns]),
      [
        ["B", "running", 0],
        ["A", "pinned", 1],
      ],
    );
    const a = first.programs.find((p) => p.id === "A")!;
    assert.ok(a.pinTtlLeftS !== null && a.pinTtlLeftS > 0);
    assert.equal(a.cachedShare, 0);
    assert.equal(first.pool.pinnedBlocks, 4, "A's 64 prompt tokens, pinned");
    assert.equal(first.pool.runningBlocks, 3, "B's 48 prompt tokens");
    assert.equal(first.pool.cachedBlocks + first.pool.freeBlocks, 32 - 7);
    scheduler.abort("B0");
    step(scheduler, clock);
    const second = scheduler.snapshot();
    assert.deepEqual(
      second.programs.map((p) => p.id),
      ["A"],
      "a program that ended leaves the table",
    );
    assert.equal(second.pool.runningBlocks, 0);
    assert.equal(second.pool.cachedBlocks, 3, "B's full blocks stay reusable");
  });
});

describe("Scheduler: side requests", () => {
  it("a request marked as a side request while in flight is no turn: not counted, never pinned, its program's context stays its turns'", () => {
    const { scheduler, clock } = testScheduler(createCacheTtlPolicy({ offload: false }), { numBlocks: 32 });
    scheduler.ttl.queueing.observe(10); // queueing seen: a tool-call turn is worth pinning
    const title = addRequest(scheduler, "title", 20, { programId: "P", maxOutputTokens: 2 });
    const turn = addRequest(scheduler, "turn", 40, { programId: "P", maxOutputTokens: 8 });
    assert.equal(scheduler.markSideRequest("Q", "title"), false, "another program's request");
    assert.equal(scheduler.markSideRequest("P", "title"), true);
    runUntilIdle(scheduler, clock);
    assert.equal(title.status, "finished");
    const program = turn.program;
    assert.equal(program.numFinished, 1, "only the turn counts");
    assert.equal(program.contextTokens, 48, "the turn's prompt and output");
    assert.equal(program.pin?.requestId, "turn");
    assert.deepEqual(
      scheduler.snapshot().programs.map((p) => [p.id, p.turns]),
      [["P", 1]],
    );
    assert.equal(scheduler.markSideRequest("P", "title"), false, "no longer in flight");
    addRequest(scheduler, "end", 10, { programId: "Q", isLastStep: true });
    assert.equal(scheduler.markSideRequest("Q", "end"), false, "a program's last step stays its turn");
  });
});
