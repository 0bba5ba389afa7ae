/**
 * End to end: `continuum serve`'s engine (tiny built-in model, llama.cpp) with --record, in process
 * on 127.0.0.1; the bench replays a small trace against it; its numbers must agree with the server's
 * recorder export.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { analyzeRecorderLog } from "../analysis/recorder/recorder-analysis.js";
import { Rng } from "../core/rng.js";
import { createLlamaEngine } from "../engine/engine-factory.js";
import { isNativeAvailable } from "../engine/native/llama-native.js";
import { startServer } from "../server/server.js";
import type { TraceProgram, TraceTurn } from "../workload/trace.js";
import { parseBenchFile } from "./bench-metrics.js";
import { renderBenchReport } from "./bench-report.js";
import { runBench } from "./bench-run.js";
import { compareWithRecorder } from "./compare-recorder.js";

const supported = process.platform === "linux" && process.arch === "x64" && isNativeAvailable();

/** 10 programs, prompts 100-400 tokens, outputs 8-16, tool times 0.05-0.2 s. */
function tinyTrace(): TraceProgram[] {
  const rng = new Rng(7);
  return Array.from({ length: 10 }, (_, p) => {
    const count = rng.int(2, 4);
    const turns: TraceTurn[] = [];
    let input = rng.int(100, 150);
    let cached = 0;
    for (let i = 0; i < count; i++) {
      const output = rng.int(8, 16);
      const last = i === count - 1;
      turns.push({
        input,
        cached,
        output,
        tool: last ? null : rng.pick(["ls", "grep", "python"]),
        toolS: last ? null : 0.05 + 0.15 * rng.next(),
      });
      cached = input + output;
      input = Math.min(400, cached + rng.int(30, 80));
    }
    return { id: `tiny-${p}`, turns };
  });
}

describe("bench against the server (tiny built-in model)", {
  skip: supported ? false : "no llama.cpp addon",
}, () => {
  test("replays a 10-program trace; the report agrees with the server's recorder export", async () => {
    const dir = await mkdtemp(join(tmpdir(), "bench-e2e-"));
    try {
      const recordPath = join(dir, "record");
      const engine = await createLlamaEngine({
        builtinModel: "tiny",
        threads: 1,
        threadsBatch: 1,
        maxNumSeqs: 4,
        kvCacheTokens: 8192,
        maxSeqSlots: 24,
        policy: "cachettl",
        recordPath,
      });
      const server = await startServer({ engine, host: "127.0.0.1", port: 0, logError: () => {} });
      const trace = tinyTrace();
      let run: Awaited<ReturnType<typeof runBench>>;
      try {
        run = await runBench({
          url: server.url,
          trace,
          programs: 10,
          jps: 5,
          seed: 3,
          programPrefix: "e2e-",
          label: "tiny",
          requestTimeoutS: 30,
        });
      } finally {
        await server.close({ drainTimeoutMs: 2_000 });
      }

      assert.equal(run.completed, 10, JSON.stringify(run.errors));
      assert.deepEqual(run.errors, {});
      assert.equal(
        run.requests,
        trace.reduce((n, p) => n + p.turns.length, 0),
      );
      assert.ok(run.model?.startsWith("continuum-tiny"), `model ${run.model}`);
      // The built-in tokenizer counts what the server does; prompts hit the trace's sizes. Not exactly 0:
      // a random-weight model's reply may hold byte-level tokens that re-tokenize differently when the
      // next turn sends the reply back, and batch composition can change which replies those are (a clean
      // CI run measured 1.10 once, against 0-1 usually).
      assert.ok(run.tokenizer_mae! <= 2, `tokenizer MAE ${run.tokenizer_mae}`);
      assert.ok(run.prompt_tokens_mae! <= 2, `prompt MAE ${run.prompt_tokens_mae}`);
      assert.equal(run.completion_tokens_mae, 0, "ignore_eos: every turn generates its max_tokens");
      assert.ok(run.cached_token_ratio > 0.3, `cached ratio ${run.cached_token_ratio}`);
      assert.equal(run.ttft.count, run.requests);
      assert.ok(run.ttft.p50 <= run.turn_latency.p50);
      assert.ok(run.jct.p50 > 0 && run.jct.p99 >= run.jct.p50 && run.throughput_jps > 0);

      const recordFile = `${recordPath}.jsonl`;
      assert.ok(existsSync(recordFile));
      const check = await compareWithRecorder(run, recordFile, { toleranceS: 0.25, toleranceRel: 0.05 });
      assert.ok(check.ok, check.problems.join("\n"));
      assert.equal(check.checked, 10);
      assert.ok(check.jctDiffS.min >= -0.005, "the server's span lies within the client's");

      const recorder = await analyzeRecorderLog(recordFile);
      assert.equal(recorder.jobs.numJobs, 10);
      assert.ok(Math.abs(recorder.jobs.averageS - run.jct.mean) < 0.25);
      // Without preemptions the recorder admits each request once, with the prompt the client sent.
      if (recorder.cache.admissionsAfterPreemption === 0) {
        assert.equal(recorder.cache.promptTokens, run.prompt_tokens);
        assert.equal(recorder.cache.hitTokens, run.cached_tokens);
      }

      // The saved file round-trips and renders the simulator's report.
      const saved = parseBenchFile(JSON.stringify({ runs: [run] }), "saved");
      const html = await renderBenchReport(saved);
      assert.match(html, /<svg/);
      assert.match(html, /tiny/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
