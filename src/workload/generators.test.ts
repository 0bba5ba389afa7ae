import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { generateWorkload, WORKLOAD_PROFILES, type WorkloadKind } from "./generators.js";
import { mean, std } from "./stats.js";
import { traceStats } from "./trace-stats.js";

function assertWithin(actual: number, target: number, tolerance: number, what: string) {
  const error = Math.abs(actual - target) / target;
  assert.ok(
    error <= tolerance,
    `${what}: ${actual.toFixed(3)} vs ${target} (${(error * 100).toFixed(1)}% off)`,
  );
}

const published: Record<
  WorkloadKind,
  { turns: [number, number]; toolMs: [number, number]; tokens: [number, number] }
> = {
  "swe-bench": { turns: [10.9, 2.1], toolMs: [925, 3550], tokens: [70_126, 19_732] },
  bfcl: { turns: [6.3, 2.3], toolMs: [1923, 2133], tokens: [93_256, 68_687] },
};

describe("generateWorkload", () => {
  for (const kind of ["swe-bench", "bfcl"] as const) {
    it(`reproduces the paper's ${kind} statistics on 2000 programs`, () => {
      const programs = generateWorkload({ kind, programs: 2000, seed: 7 });
      assert.equal(programs.length, 2000);
      const s = traceStats(programs);
      const target = published[kind];
      assertWithin(s.turns.mean, target.turns[0], 0.1, "turns mean");
      assertWithin(s.turns.std, target.turns[1], 0.1, "turns std");
      assertWithin(s.toolS.mean * 1000, target.toolMs[0], 0.1, "tool mean");
      assertWithin(s.toolS.std * 1000, target.toolMs[1], 0.1, "tool std");
      assertWithin(s.finalContextTokens.mean, target.tokens[0], 0.1, "tokens mean");
      assertWithin(s.finalContextTokens.std, target.tokens[1], 0.1, "tokens std");
      assertWithin(s.outputTokens.mean, WORKLOAD_PROFILES[kind].outputTokens.mean, 0.1, "output mean");
      for (const { tool } of s.tools) assert.ok(tool in WORKLOAD_PROFILES[kind].tools, tool);
    });
  }

  it("keeps tool times long-tailed: the median far below the mean", () => {
    const s = traceStats(generateWorkload({ kind: "swe-bench", programs: 500, seed: 3 }));
    assert.ok(s.toolS.p50 < s.toolS.mean / 2);
    assert.ok(s.toolS.max > 10 * s.toolS.mean);
  });

  it("grows each context from the previous prompt and output, all of it reusable", () => {
    for (const program of generateWorkload({ kind: "bfcl", programs: 200, seed: 11 })) {
      const [first, ...rest] = program.turns;
      assert.equal(first!.cached, 0);
      rest.forEach((turn, i) => {
        const prev = program.turns[i]!;
        assert.equal(turn.cached, prev.input + prev.output);
        assert.ok(turn.input > turn.cached, "every tool adds an observation");
      });
      const last = program.turns.at(-1)!;
      assert.deepEqual([last.tool, last.toolS], [null, null]);
      assert.ok(program.turns.slice(0, -1).every((t) => t.tool !== null && t.toolS !== null && t.toolS > 0));
    }
  });

  it("never grows a program past the model's context when given one", () => {
    const capped = generateWorkload({ kind: "bfcl", programs: 500, seed: 2, maxContextTokens: 131_072 });
    const longest = Math.max(...capped.flatMap((p) => p.turns.map((t) => t.input + t.output)));
    assert.ok(longest <= 131_072, `${longest}`);
    const uncapped = generateWorkload({ kind: "bfcl", programs: 500, seed: 2 });
    assert.ok(Math.max(...uncapped.flatMap((p) => p.turns.map((t) => t.input + t.output))) > 131_072);
  });

  it("is deterministic for a seed and differs across seeds", () => {
    const a = generateWorkload({ kind: "swe-bench", programs: 50, seed: 1 });
    assert.deepEqual(generateWorkload({ kind: "swe-bench", programs: 50, seed: 1 }), a);
    assert.notDeepEqual(generateWorkload({ kind: "swe-bench", programs: 50, seed: 2 }), a);
    assert.equal(new Set(a.map((p) => p.id)).size, 50);
  });

  it("stays valid for tiny workloads", () => {
    for (const programs of [0, 1, 3]) {
      const generated = generateWorkload({ kind: "bfcl", programs, seed: 5 });
      assert.equal(generated.length, programs);
      const times = generated.flatMap((p) => p.turns.flatMap((t) => (t.toolS === null ? [] : [t.toolS])));
      assert.ok(times.every((t) => Number.isFinite(t) && t >= 0));
      if (times.length > 1) assert.ok(Math.abs(mean(times) - 1.923) < 0.01 && std(times) > 0);
    }
  });
});
