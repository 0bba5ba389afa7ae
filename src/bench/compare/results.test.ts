import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type CompareResults, type PickedResult, renderResults, spread, summarizeLoad } from "./results.js";

function result(jctMean: number, throughput: number): PickedResult {
  return {
    completed: 20,
    scheduled: 20,
    failed: 0,
    jct: { mean: jctMean, p95: jctMean * 1.5 },
    throughput_jps: throughput,
    makespan_s: 20 / throughput,
    ttft: { mean: 1, p95: 2 },
    cached_token_ratio: 0.56,
    prompt_tokens: 1000,
    completion_tokens: 100,
    prompt_tokens_bias: null,
    errors: {},
  };
}

const heavy = { load: "heavy", jps: 4, programs: 20 };
// round 1 on a fast minute, round 2 on a slow one: cachettl at 0.70x and then 0.60x of llama-server
const runs = [
  { ...heavy, server: "llama-server", round: 0, result: result(40, 0.4) },
  { ...heavy, server: "continuum cachettl", round: 0, result: result(28, 0.36) },
  { ...heavy, server: "llama-server", round: 1, result: result(50, 0.3) },
  { ...heavy, server: "continuum cachettl", round: 1, result: result(30, 0.33) },
  { ...heavy, server: "gateway cachettl-adaptive", round: 0, result: result(36, 0.4) },
  { ...heavy, server: "gateway cachettl-adaptive", round: 1, result: result(35, 0.31) },
];

describe("compare results over interleaved rounds", () => {
  test("spread: median (mean of the middle two for an even count) and extremes", () => {
    assert.deepEqual(spread([3, 1, 2]), { median: 2, min: 1, max: 3 });
    assert.deepEqual(spread([0.75, 0.25]), { median: 0.5, min: 0.25, max: 0.75 });
  });

  test("each ratio is taken against llama-server's run of the same round", () => {
    const cachettl = summarizeLoad(runs, "heavy").find((x) => x.server === "continuum cachettl");
    assert.ok(cachettl);
    assert.equal(cachettl.rounds, 2);
    assert.equal(cachettl.completed, 40);
    assert.deepEqual(cachettl.jctMean, { median: 29, min: 28, max: 30 });
    assert.ok(cachettl.meanVsLlama);
    assert.ok(Math.abs(cachettl.meanVsLlama.median - 0.65) < 1e-12);
    assert.ok(Math.abs(cachettl.meanVsLlama.min - 0.6) < 1e-12);
    assert.ok(Math.abs((cachettl.throughputVsLlama?.median ?? 0) - 1) < 1e-12);
  });

  test("the rendered tables print the median ratio with its range, and the targets judge the median", () => {
    const results: CompareResults = {
      createdAt: "2026-11-25T09:00:00.000Z",
      totalSeconds: 900,
      settings: {
        threads: 1,
        kvTokens: 16384,
        maxNumSeqs: 1,
        model: "model.gguf",
        trace: "swe-agent-lm32b.jsonl",
        programsInTrace: 332,
        maxTurns: 8,
        tokenScale: 0.1,
        maxToolS: 3,
        seed: 1,
        rawRounds: 2,
        serveRounds: 2,
        loads: [{ name: "heavy", jps: 4, programs: 20 }],
        llamaCpp: { tag: "b0", commit: "0123456789abcdef", buildSeconds: 300 },
      },
      llamaServer: { chosen: { name: "np1", np: 1, unified: false }, chosenArgs: "-np 1", trial: [] },
      continuum: { maxNumSeqs: 1, args: "--max-num-seqs 1", trial: [] },
      raw: [
        {
          pp: 512,
          tg: 32,
          pl: 16,
          llama: { speedPp: 1200, speedTg: 400, kvUnified: false },
          llamaUnified: { speedPp: 900, speedTg: 200 },
          ours: { speedPp: 1080, speedTg: 380 },
          oursUnified: { speedPp: 900, speedTg: 220 },
        },
      ],
      runs,
      sims: [],
      stepSplits: [],
    };
    const text = renderResults(results);
    assert.match(text, /2 interleaved rounds per load/);
    assert.match(
      text,
      /\| heavy \(4 jobs\/s, 20 programs\) \| continuum cachettl \| 40\/40 \| 29\.00 \|.*\| 0\.65 \(0\.60–0\.70\) \|/,
    );
    assert.match(
      text,
      /Continuum \(cachettl\) mean JCT <= 0\.55x llama-server \| 0\.65 \(0\.60–0\.70\)x \| missed by 18% \|/,
    );
    assert.match(
      text,
      /Continuum \(cachettl\) throughput >= 1\.0x llama-server \| 1\.00 \(0\.90–1\.10\)x \| met \|/,
    );
    // every row of the raw kernels must reach llama's own: the lowest one is named
    assert.match(
      text,
      /engine prefill tokens\/s >= 1\.0x llama-batched-bench at every row \(sequences\) \| 0\.90 \(16\) \| missed by 10% at 16 sequence\(s\) \|/,
    );
    assert.match(
      text,
      /engine decode tokens\/s >= 1\.0x llama-batched-bench at every row \(sequences\) \| 0\.95 \(16\) \| missed by 5% at 16 sequence\(s\) \|/,
    );
    // the gateway over llama-server: 0.90x and 0.70x of the same round's llama-server
    assert.match(text, /`gateway <policy>`: `continuum gateway --engine llama-server/);
    assert.match(
      text,
      /gateway \(cachettl-adaptive\) mean JCT <= 0\.8x llama-server \(goal 0\.65x\) \| 0\.80 \(0\.70–0\.90\)x \| met \|/,
    );
    assert.match(
      text,
      /gateway \(cachettl-adaptive\) throughput >= 1\.0x llama-server \| 1\.02 \(1\.00–1\.03\)x \| met \|/,
    );
    // each engine at its best layout, and unified pool against unified buffer beside it
    assert.match(
      text,
      /\| 512 \| 32 \| 16 \| 1080 \| 1200 \| 0\.90 \| 900 \| 900 \| 1\.00 \| 380\.0 \| 400\.0 \| 0\.95 \| 220\.0 \| 200\.0 \| 1\.10 \|/,
    );
  });
});
