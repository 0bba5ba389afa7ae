import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import type { TraceProgram } from "../workload/trace.js";
import { getProfile } from "./hardware/profiles.js";
import { type PointJob, runPointJob, validateJobInputs } from "./point-job.js";
import { DEFAULT_ENGINE_OPTIONS, type EngineOptions, simulatePoint } from "./simulate.js";
import { runSweep, runSweepSettled } from "./sweep.js";
import { SMALL_POOL, smallJob } from "./test-support/small-jobs.js";

/** A program of `turns` turns whose context grows by `newTokens` a turn; tool time per turn. */
function agent(id: string, turns: number, newTokens: number, toolS: number, lastToolS = toolS): TraceProgram {
  let context = 0;
  return {
    id,
    turns: Array.from({ length: turns }, (_, i) => {
      const input = context + newTokens;
      const turn = {
        input,
        cached: context,
        output: 32,
        tool: i === turns - 1 ? null : "python",
        toolS: i === turns - 1 ? null : i === turns - 2 ? lastToolS : toolS,
      };
      context = input + 32;
      return turn;
    }),
  };
}

function point(
  policy: string,
  programs: TraceProgram[],
  arrivalsS: number[],
  engine = SMALL_POOL,
  aborts?: Map<number, { turn: number; afterS: number }>,
) {
  return simulatePoint({
    policy,
    programs,
    arrivalsS,
    profile: getProfile("h100", "llama-3.1-8b"),
    engine,
    jps: 1,
    seed: 1,
    aborts,
  });
}

describe("simulate", () => {
  it("reports what the TTL machinery did: which rule set each TTL, eta, T and the TTLs given", () => {
    const ours = runPointJob(smallJob("cachettl", 0.5));
    const { decisions } = ours.ttl;
    assert.ok(decisions.default + decisions.global + decisions.tool >= ours.pins.created);
    assert.ok(decisions.default > 0, "the first decisions come before K tool samples");
    assert.ok(ours.ttl.eta >= 0 && ours.ttl.eta <= 1);
    if (ours.pins.created > 0) assert.ok(ours.ttl.pinned_ttl_s.mean > 0);
    const vllm = runPointJob(smallJob("vllm", 0.5));
    assert.deepEqual(
      vllm.ttl.decisions,
      { default: 0, global: 0, tool: 0 },
      "vllm never asks the cost model",
    );
  });

  it("says where the accelerator's time went: idle between sparse programs, busy and batching under a burst", () => {
    const programs = Array.from({ length: 8 }, (_, i) => agent(`p${i}`, 4, 2000, 1));
    const sparse = point(
      "vllm",
      programs,
      programs.map((_, i) => i * 60),
    );
    const burst = point(
      "vllm",
      programs,
      programs.map(() => 0),
    );
    assert.ok(sparse.gpu.busy_fraction > 0 && sparse.gpu.busy_fraction < 0.5, `${sparse.gpu.busy_fraction}`);
    assert.ok(burst.gpu.busy_fraction > sparse.gpu.busy_fraction);
    assert.ok(burst.gpu.sequences_per_step > 2 * sparse.gpu.sequences_per_step);
    assert.ok(sparse.gpu.prefill_step_s > 0 && sparse.gpu.decode_step_s > 0);
    // each turn after the first finds its whole context in a cache that never forgets: 3 of 4 turns' context
    const reusable = (0 + 2032 + 4064 + 6096) / (2000 + 4032 + 6064 + 8096);
    assert.ok(Math.abs(sparse.reusable_share - reusable) < 1e-9);
    assert.ok(sparse.hit_ratio <= sparse.reusable_share + 1e-9);
  });

  it("reports new programs' first-turn TTFT apart: under program FCFS they wait behind returning turns", () => {
    // four long-running programs, then a newcomer while they still return every second
    const programs = [
      ...Array.from({ length: 4 }, (_, i) => agent(`old${i}`, 12, 3000, 0.5)),
      agent("new", 2, 500, 1),
    ];
    const arrivalsS = [0, 0, 0, 0, 20];
    const fcfs = point("vllm", programs, arrivalsS);
    const byProgram = point("program-fcfs", programs, arrivalsS);
    for (const r of [fcfs, byProgram]) {
      assert.ok(r.first_turn_ttft.p99 >= r.first_turn_ttft.p50);
      assert.equal(r.first_turn_ttfts.length, 5, "one first turn per program");
      assert.ok(
        Math.max(...r.first_turn_ttfts) >= r.first_turn_ttft.p99,
        "the longest wait bounds every percentile",
      );
      assert.equal(r.completed, 5);
    }
    assert.ok(
      byProgram.first_turn_ttft.p99 > fcfs.first_turn_ttft.p99,
      `program FCFS ${byProgram.first_turn_ttft.p99} s, request FCFS ${fcfs.first_turn_ttft.p99} s`,
    );
    // a program's wait sums its turns' waits
    for (const r of [fcfs, byProgram]) {
      assert.equal(r.program_waits.length, 5, "one total per program");
      assert.ok(r.program_wait.mean >= r.queue_delay.mean, "a program waits at least as long as one turn");
    }
  });

  it("replicas behind a router: more replicas serve the same load faster; sticky routing keeps KV reuse", () => {
    const at = (replicas: number, router: EngineOptions["router"]) =>
      runPointJob({ ...smallJob("cachettl", 2), engine: { ...SMALL_POOL, replicas, router } });
    const one = at(1, "sticky-least-loaded");
    const sticky = at(3, "sticky-least-loaded");
    const roundRobin = at(3, "round-robin");
    for (const r of [one, sticky, roundRobin]) assert.equal(r.completed, r.programs);
    assert.ok(sticky.jct.mean < one.jct.mean, `${sticky.jct.mean} vs ${one.jct.mean}`);
    assert.ok(
      sticky.hit_ratio > roundRobin.hit_ratio + 0.1,
      `a program's turns meet its KV: ${sticky.hit_ratio} vs ${roundRobin.hit_ratio}`,
    );
  });

  it("a point that fails is reported beside the others' results, which are kept", async () => {
    const tooSmall: PointJob = {
      ...smallJob("cachettl", 1),
      engine: { ...SMALL_POOL, kvCapacityTokens: 100 },
    };
    const jobs = [smallJob("vllm", 0.5), tooSmall, smallJob("cachettl", 0.5)];
    for (const threads of [1, 2]) {
      const { results, failures } = await runSweepSettled(jobs, { threads });
      assert.deepEqual(
        results.map((r) => r?.policy),
        ["vllm", undefined, "cachettl"],
      );
      assert.equal(failures.length, 1);
      assert.equal(failures[0]?.index, 1);
      assert.match(failures[0]?.error ?? "", /does not fit the KV pool of 96 tokens/);
    }
    await assert.rejects(runSweep(jobs, { threads: 1 }), /simulation point 1 failed/);
  });

  it("expires the pins of tools that never return, and the other programs finish", () => {
    const programs = [
      agent("hung", 4, 2000, 0.2, Number.POSITIVE_INFINITY),
      ...Array.from({ length: 6 }, (_, i) => agent(`ok${i}`, 5, 3000, 0.2)),
    ];
    // The fork's rule pins every short tool for 2 s, so the hung program's last turn is pinned too.
    const result = point(
      "continuum-heuristic",
      programs,
      programs.map((_, i) => i * 0.5),
    );
    assert.equal(result.completed, 6, "every program but the hung one finishes");
    assert.equal(result.pins.created > 0, true);
    assert.equal(result.pins.expired >= 1, true, "the hung program's pin expires instead of staying forever");
    assert.equal(
      point(
        "cachettl",
        programs,
        programs.map((_, i) => i * 0.5),
      ).completed,
      6,
    );
  });

  it("keeps making progress when a burst of 10x load arrives", () => {
    const calm = Array.from({ length: 5 }, (_, i) => agent(`calm${i}`, 4, 2000, 0.5));
    const burst = Array.from({ length: 50 }, (_, i) => agent(`burst${i}`, 4, 2000, 0.5));
    const programs = [...calm, ...burst];
    const arrivals = [...calm.map((_, i) => i * 2), ...burst.map((_, i) => 10 + i * 0.2)];
    for (const policy of ["vllm", "cachettl", "continuum-heuristic"]) {
      const result = point(policy, programs, arrivals);
      assert.equal(result.completed, programs.length, `${policy}: all programs finish`);
    }
  });

  it("continues when pins fill the whole pool: later programs get memory by unpinning", () => {
    // Each program's context is a third of the pool, tools take longer than any step.
    const engine: EngineOptions = { ...SMALL_POOL, kvCapacityTokens: 12_000 };
    const programs = Array.from({ length: 8 }, (_, i) => agent(`p${i}`, 3, 1800, 3));
    const result = point(
      "continuum-heuristic",
      programs,
      programs.map((_, i) => i * 0.1),
      engine,
    );
    assert.equal(result.completed, programs.length);
    assert.equal(result.pins.sacrificed > 0, true, "memory pressure made the scheduler give up pins");
  });

  it("survives clients that abort mid-request", () => {
    const programs = Array.from({ length: 10 }, (_, i) => agent(`p${i}`, 4, 2000, 0.3));
    const aborts = new Map([
      [1, { turn: 0, afterS: 0.001 }],
      [4, { turn: 2, afterS: 0.01 }],
    ]);
    const result = point(
      "cachettl",
      programs,
      programs.map((_, i) => i * 0.2),
      SMALL_POOL,
      aborts,
    );
    assert.equal(result.completed, 8, "the two aborted programs end, the others finish");
  });
});

describe("inputs are checked before any point runs", () => {
  const hardware = { gpu: "h100", model: "llama-3.1-8b" } as const;
  const workload = {
    kind: "swe-bench",
    programs: 5,
    tokenScale: 1,
    toolTimeScale: 1,
    turnRepeat: 1,
  } as const;

  it("a KV pool larger than the GPU's memory holds is an error naming the flag and the limit", () => {
    assert.throws(
      () => validateJobInputs(workload, hardware, { ...DEFAULT_ENGINE_OPTIONS, kvCapacityTokens: 1e6 }),
      /--kv-cache-tokens 1000000 is more than h100\/llama-3.1-8b holds: at most 464696 tokens/,
    );
    validateJobInputs(workload, hardware, { ...DEFAULT_ENGINE_OPTIONS, kvCapacityTokens: 400_000 });
  });

  it("a bad trace names its file and line", () => {
    const dir = mkdtempSync(join(tmpdir(), "continuum-trace-"));
    const path = join(dir, "bad.jsonl");
    writeFileSync(
      path,
      '{"id":"a","turns":[{"input":10,"cached":0,"output":5,"tool":null,"tool_s":null}]}\n{"id":\n',
    );
    assert.throws(
      () =>
        validateJobInputs({ ...workload, kind: undefined, trace: path }, hardware, DEFAULT_ENGINE_OPTIONS),
      (e: Error) => e.message.startsWith(`${path}:2: invalid JSON`),
    );
  });
});
