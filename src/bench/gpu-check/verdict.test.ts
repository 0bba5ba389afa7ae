import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  type BenchFigures,
  type CheckFigures,
  formatVerdict,
  judge,
  parseDeviceInfoMetric,
} from "./verdict.js";

function bench(meanJctS: number, laterTurnsCachedRatio: number): BenchFigures {
  return {
    completed: 24,
    programs: 24,
    meanJctS,
    p95JctS: meanJctS * 2,
    throughputJps: 0.5,
    cachedRatio: laterTurnsCachedRatio * 0.9,
    laterTurnsCachedRatio,
    errors: {},
  };
}

const served: CheckFigures = {
  pluginBuilt: true,
  device: {
    backend: "cuda",
    device: "NVIDIA H100 80GB HBM3",
    layersOffloaded: 32,
    layersTotal: 32,
    kvCache: "gpu",
  },
  stepsNotRun: 0,
  steps: [
    {
      shape: { kind: "prefill", N: 512, P: 0 },
      basis: "compute",
      ms: 15,
      referenceMs: 14.4,
      ratio: 15 / 14.4,
      within: true,
      wallMs: 19,
      wallRatio: 19 / 14.4,
    },
    {
      shape: { kind: "decode", B: 1, L: 1024 },
      basis: "compute",
      ms: 9,
      referenceMs: 6.7,
      ratio: 9 / 6.7,
      within: false,
      wallMs: 10,
      wallRatio: 10 / 6.7,
    },
  ],
  bench: {
    light: { "cachettl-adaptive": bench(6, 0.86), vllm: bench(6.1, 0.79) },
    heavy: { "cachettl-adaptive": bench(20, 0.6), vllm: bench(31, 0.1) },
  },
  tier: {
    stateBytes: 512 * 2 ** 20,
    restoreBps: 30e9,
    saveBps: 20e9,
    pinnedHostToDeviceBps: 50e9,
    pinnedDeviceToHostBps: 45e9,
    pageableHostToDeviceBps: 5e9,
    pageableDeviceToHostBps: 5e9,
  },
  restart: {
    restoredLine: "disk tier 4 GiB kept across restarts (1 state (384.0 MiB) restored)",
    firstTurnPromptTokens: 3010,
    promptTokens: 3030,
    cachedTokens: 3008,
    computedCachedTokens: 0,
    restoredS: 0.21,
    computedS: 0.34,
    sameText: true,
    comparedTokens: 8,
    maxLogprobDiff: 0.0021,
  },
};

describe("gpu-check verdict", () => {
  it("passes, fails and says which numbers, criterion by criterion", () => {
    const v = judge(served, { stepTolerance: 0.25, cachedTarget: 0.8 });
    assert.deepEqual(
      v.map((c) => c.pass),
      [true, true, false, false, false, true, true],
    );
    const text = formatVerdict(v);
    assert.match(
      text,
      /FAIL {2}steps within 25\.0% of the reference: 1\/2 shapes within; model compute to reference 1\.04-1\.34, whole llama_decode 1\.32-1\.49/,
    );
    assert.match(
      text,
      /FAIL {2}turns 2\+ at least 80\.0% from cache \(light load\): cachettl-adaptive 86\.0%, vllm 79\.0%/,
    );
    assert.match(text, /restore 60\.0% of pinned, save 44\.4% of pinned/);
    assert.match(
      text,
      /PASS {2}cachettl-adaptive's mean JCT below vllm's \(heavy load\): 20\.00 s vs 31\.00 s \(0\.65x\)/,
    );
  });

  it("does not pass the steps while reference shapes were not run", () => {
    const allWithin = served.steps?.map((s) => ({ ...s, within: true })) ?? [];
    const judged = (stepsNotRun: number) =>
      judge({ ...served, steps: allWithin, stepsNotRun }, { stepTolerance: 0.25, cachedTarget: 0.8 })[2];
    assert.equal(judged(0)?.pass, true);
    assert.equal(judged(3)?.pass, false);
    assert.match(judged(3)?.detail ?? "", /2\/2 shapes within, 3 reference shapes not run/);
  });

  it("leaves what was not measured open instead of passing or failing it", () => {
    const v = judge(
      { pluginBuilt: null, device: null, steps: null, stepsNotRun: 0, bench: {}, tier: null, restart: null },
      { stepTolerance: 0.25, cachedTarget: 0.8 },
    );
    assert.deepEqual(
      v.map((c) => c.pass),
      [null, null, null, null, null, null, null],
    );
  });

  it("does not count a lower mean JCT when fewer programs finished", () => {
    const heavy = { "cachettl-adaptive": { ...bench(20, 0.6), completed: 20 }, vllm: bench(31, 0.1) };
    const v = judge(
      { ...served, bench: { ...served.bench, heavy } },
      { stepTolerance: 0.25, cachedTarget: 0.8 },
    );
    assert.equal(v[5]?.pass, false);
  });

  it("passes a restart only when the next turn came from disk and decoded as computed", () => {
    const restart = (r: Partial<NonNullable<CheckFigures["restart"]>>) =>
      judge(
        { ...served, restart: { ...(served.restart as NonNullable<CheckFigures["restart"]>), ...r } },
        { stepTolerance: 0.25, cachedTarget: 0.8 },
      )[6];
    assert.match(
      formatVerdict([restart({}) as NonNullable<ReturnType<typeof restart>>]),
      /PASS {2}a program's KV reloaded after a restart \(--disk-offload-persist\): 3008\/3030 prompt tokens from disk \(first turn 3010\), 0\.21 s vs 0\.34 s computed; same text, logprobs within 0\.0021 over 8 tokens; disk tier 4 GiB kept/,
    );
    assert.equal(restart({ cachedTokens: 0 })?.pass, false, "recomputed after the restart");
    assert.equal(restart({ restoredLine: null })?.pass, false, "nothing restored at start");
    assert.equal(restart({ sameText: false })?.pass, false, "the reloaded KV decoded other tokens");
  });

  it("reads the device_info gauge's labels from /metrics", () => {
    const metrics = [
      "# HELP continuum:device_info where the model runs",
      "# TYPE continuum:device_info gauge",
      'continuum:device_info{backend="cuda",device="NVIDIA H100 80GB HBM3",memory_bytes="85520809984",layers_offloaded="32",layers_total="32",kv_cache="gpu"} 1',
    ].join("\n");
    assert.deepEqual(parseDeviceInfoMetric(metrics), {
      backend: "cuda",
      device: "NVIDIA H100 80GB HBM3",
      layersOffloaded: 32,
      layersTotal: 32,
      kvCache: "gpu",
    });
    assert.equal(parseDeviceInfoMetric("vllm:num_requests_running 0"), null);
  });
});
