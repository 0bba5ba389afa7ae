import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { stepLogFile } from "../engine/step-log.js";
import { fixedTtlPolicy, request, run } from "../engine/test-support/engine-helpers.js";
import { createFakeEngine } from "../engine/test-support/fake-model-runner.js";
import type { LatencyModel } from "../sim/hardware/step-latency.js";
import { analyzeSteps, readStepLog, stepKind } from "./step-log-analysis.js";

/** 1 ms per step plus 0.1 ms per token. */
const linear: LatencyModel = {
  name: "linear",
  stepS: (chunks) => 0.001 + chunks.reduce((a, c) => a + c.numTokens, 0) * 1e-4,
  prefillS: (tokens) => 0.001 + tokens * 1e-4,
};

describe("step log analysis", () => {
  test("each step is priced as planned and as run; the ratios split the error by cause", () => {
    const totals = analyzeSteps(
      [
        {
          t: 0,
          wallS: 0.004,
          computeS: 0.002,
          sampleS: 0.0005,
          planned: [[1, 100]],
          ran: [[1, 100]],
          restoredTokens: 0,
        },
        // a prefill whose 80-token prefix the engine no longer held: it ran 100 rows, 20 were planned; a
        // log written before sampling was recorded has no sampleS
        { t: 1, wallS: 0.02, computeS: 0.012, planned: [[20, 80]], ran: [[100, 0]], restoredTokens: 0 },
      ],
      linear,
    );
    assert.deepEqual(
      totals.map((t) => t.kind),
      ["decode", "prefill", "all"],
    );
    const [decode, prefill, all] = totals;
    assert.ok(decode && prefill && all);
    assert.ok(Math.abs(decode.pricedPlannedS - 0.0011) < 1e-12);
    assert.ok(Math.abs(prefill.pricedPlannedS - 0.003) < 1e-12);
    assert.ok(Math.abs(prefill.pricedRanS - 0.011) < 1e-12, "the recompute is priced too");
    assert.equal(all.steps, 2);
    assert.ok(Math.abs(all.wallS - 0.024) < 1e-12);
    assert.equal(decode.sampleS, 0.0005, "the host's sampling, within compute");
    assert.equal(prefill.sampleS, 0);
    assert.equal(all.sampleS, 0.0005);
    assert.equal(
      stepKind({
        t: 0,
        wallS: 0,
        computeS: 0,
        planned: [
          [1, 5],
          [30, 0],
        ],
        ran: [],
        restoredTokens: 0,
      }),
      "mixed",
    );
    assert.equal(
      stepKind({ t: 0, wallS: 0, computeS: 0, planned: [[30, 0]], ran: [], restoredTokens: 64 }),
      "restore",
    );
  });

  test("the engine logs every step: the plan, the rows it ran, the tokens it restored", async () => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-steps-"));
    const path = join(dir, "steps.jsonl");
    // only running sequences stay in the pool: the pinned first turn waits in the RAM tier for the next
    const engine = createFakeEngine({
      policy: fixedTtlPolicy(60),
      stepLog: stepLogFile(path),
      tiers: { cpuBytes: 1 << 20 },
      kvRunningOnly: true,
    });
    try {
      const prompt = "x".repeat(200);
      const sampling = { maxTokens: 3, ignoreEos: true };
      const first = await run(engine, request("a0", prompt, { programId: "a", sampling }));
      await run(
        engine,
        request("a1", `${prompt}${first.done.text}y`, { programId: "a", isLastStep: true, sampling }),
      );
    } finally {
      await engine.shutdown();
    }
    const records = readStepLog(path);
    assert.equal(records.length, engine.loopStats.steps);
    const planned = records.flatMap((r) => r.planned.map(([n]) => n));
    const ran = records.flatMap((r) => r.ran.map(([n]) => n));
    assert.deepEqual(ran, planned, "the engine runs the rows the scheduler planned");
    const restored = records.reduce((a, r) => a + r.restoredTokens, 0);
    assert.equal(restored, engine.kvStats().restoredTokens);
    assert.ok(restored >= 192);
    assert.ok(records.every((r) => r.wallS >= r.computeS));
    assert.match(await readFile(path, "utf8"), /"planned":\[\[/);
    await rm(dir, { recursive: true, force: true });
  });
});
