import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  generateWorkload,
  lognormalFromMedianP95,
  WORKLOAD_KINDS,
  WORKLOAD_PROFILES,
  type WorkloadKind,
} from "./generators.js";
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
  "swe-bench" | "bfcl",
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

  it("draws a web agent's tool calls from each tool's own latency: searches fast, page visits slow and long-tailed", () => {
    const s = traceStats(generateWorkload({ kind: "web-agent", programs: 2000, seed: 4 }));
    assertWithin(s.turns.mean, 6.3, 0.1, "turns mean");
    const tool = (name: string) => s.tools.find((t) => t.tool === name)!;
    assertWithin(tool("web_search").p50S, 1.2, 0.1, "search median");
    assertWithin(tool("visit_webpage").p50S, 4, 0.1, "visit median");
    assert.ok(tool("visit_webpage").p99S > 30, "page visits have a tail past their p95");
    assertWithin(tool("web_search").share, 0.58, 0.1, "search share");
  });

  it("keeps web-agent sessions short, as DeepResearchGym's logs show (over 90% within ten steps)", () => {
    const programs = generateWorkload({ kind: "web-agent", programs: 2000, seed: 4 });
    const short = programs.filter((p) => p.turns.length <= 10).length / programs.length;
    assert.ok(short > 0.9, `${short}`);
  });

  it("makes long-horizon programs long, growing steadily, with the measured shell tools' times", () => {
    const programs = generateWorkload({ kind: "long-horizon", programs: 1000, seed: 9 });
    const s = traceStats(programs);
    assertWithin(s.turns.mean, 43, 0.1, "turns mean");
    assertWithin(s.outputTokens.mean, 444, 0.1, "output mean");
    assertWithin(s.tools.find((t) => t.tool === "pip")!.meanS, 5.46, 0.2, "pip mean");
    assertWithin(s.tools.find((t) => t.tool === "cat")!.meanS, 0.3, 0.1, "cat mean");
    // Each observation's tokens vary about a program's mean one by the profile's 0.3, against bfcl's 1 (a sample of a few observations shows less).
    const observationCv = (kind: WorkloadKind) => {
      const cvs = generateWorkload({ kind, programs: 300, seed: 9 }).map((p) => {
        const added = p.turns.slice(1).map((t, i) => t.input - p.turns[i]!.input - p.turns[i]!.output);
        return std(added) / mean(added);
      });
      return mean(cvs.filter(Number.isFinite));
    };
    assert.ok(observationCv("long-horizon") < 0.4, `${observationCv("long-horizon")}`);
    assert.ok(observationCv("bfcl") > 0.5, `${observationCv("bfcl")}`);
  });

  it("gives every kind a valid, capped workload", () => {
    for (const kind of WORKLOAD_KINDS) {
      const programs = generateWorkload({ kind, programs: 100, seed: 1, maxContextTokens: 131_072 });
      assert.equal(programs.length, 100);
      for (const p of programs) {
        assert.ok(p.turns.at(-1)!.input + p.turns.at(-1)!.output <= 131_072);
        assert.ok(p.turns.slice(0, -1).every((t) => t.toolS !== null && t.toolS >= 0 && t.tool !== null));
      }
    }
  });

  it("converts a median and 95th percentile to the lognormal's mean and std", () => {
    const { mean: m, std: sd } = lognormalFromMedianP95(1, Math.exp(1.6448536269514722));
    assertWithin(m, Math.exp(0.5), 1e-9, "mean");
    assertWithin(sd, Math.exp(0.5) * Math.sqrt(Math.E - 1), 1e-9, "std");
  });
});
