import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseEngineProfile } from "../core/profile/engine-profile-format.js";
import { H100_ALL_LAYERS } from "../engine/test-support/devices.js";
import { loadEngineProfile } from "../sim/hardware/engine-profile.js";
import {
  buildProfile,
  cpuDeviceName,
  decodeIntercept,
  describeProfile,
  deviceId,
  fitLine,
} from "./build-profile.js";
import type { DecodeSample, PrefillSample } from "./measure.js";

// A synthetic engine: a step of n new tokens after c costs FIXED + A((c+n)^2 - c^2) + B n of model
// compute; decodes cost FIXED + batch (D + E context); the engine loop adds LOOP per step.
const FIXED = 0.002;
const A = 4e-8;
const B = 1e-4;
const D = 3e-4;
const E = 2e-7;
const LOOP = 0.0003;
const N_BATCH = 512;

function prefillCompute(tokens: number): { seconds: number; chunks: number } {
  let seconds = 0;
  let chunks = 0;
  for (let c = 0; c < tokens; c += N_BATCH) {
    const n = Math.min(N_BATCH, tokens - c);
    seconds += FIXED + A * ((c + n) ** 2 - c ** 2) + B * n;
    chunks++;
  }
  return { seconds, chunks };
}

const decodeCompute = (batch: number, context: number) => FIXED + batch * (D + E * context);

function measurements() {
  const prefill: PrefillSample[] = [256, 512, 1024, 2048, 4096, 8192].map((tokens) => {
    const { seconds, chunks } = prefillCompute(tokens);
    return { tokens, chunks, seconds: [seconds * 0.99, seconds, seconds * 1.2] };
  });
  const decode: DecodeSample[] = [];
  for (const contextTokens of [0, 512, 2048]) {
    for (const batch of [1, 2, 4, 8, 16, 32]) {
      const s = decodeCompute(batch, contextTokens);
      decode.push({ batch, contextTokens, seconds: [s, s, s * 3] });
    }
  }
  const bytes = 4096 * 5120;
  return {
    prefill,
    decode,
    offload: {
      tokens: 4096,
      bytes,
      saveRamS: [bytes / 2e9],
      restoreRamS: [bytes / 4e9],
      saveFileS: [bytes / 1e9],
      loadFileS: [bytes / 5e8],
    },
    engineOverhead: { steps: 100, wallS: 1, computeS: 1 - 100 * LOOP, perStepS: LOOP },
  };
}

const H100 = H100_ALL_LAYERS;

const identity = {
  device: "cpu-test",
  deviceInfo: H100,
  model: "synthetic",
  threads: 2,
  kvBytesPerToken: 5120,
  kvCapacityTokens: 16128,
  nBatch: N_BATCH,
};

describe("buildProfile", () => {
  it("writes a v1 document that loadEngineProfile reads back", () => {
    const file = buildProfile(identity, measurements(), { seconds: 12, createdAt: "2025-01-01T00:00:00Z" });
    const profile = loadEngineProfile(JSON.parse(JSON.stringify(file)));
    assert.equal(profile.id, "engine/cpu-test/synthetic");
    assert.equal(profile.kvBytesPerToken, 5120);
    assert.equal(profile.kvCapacityTokens, 16128);
    assert.ok(Math.abs(profile.cpuOffloadBandwidthBps - 4e9) / 4e9 < 1e-9);
    assert.ok(Math.abs(profile.diskBandwidthBps - 5e8) / 5e8 < 1e-9);
    assert.equal(file.prefill.points.length, 6);
    assert.equal(file.decode.points.length, 18);
    assert.equal(file.notes.nBatch, N_BATCH);
  });

  it("records where it was measured; a profile written before that field still parses", () => {
    const file = JSON.parse(JSON.stringify(buildProfile(identity, measurements(), { seconds: 1 })));
    assert.deepEqual(parseEngineProfile(file).deviceInfo, H100);
    const { deviceInfo: _, ...older } = file;
    assert.equal(parseEngineProfile(older).deviceInfo, undefined);
    assert.equal(loadEngineProfile(older).id, "engine/cpu-test/synthetic");
    assert.throws(
      () => parseEngineProfile({ ...file, deviceInfo: { ...H100, kvCache: "vram" } }),
      /deviceInfo\.kvCache/,
    );
  });

  it("prices steps like the engine it measured: chunked prefill, decodes, fixed cost", () => {
    const file = buildProfile(identity, measurements(), { seconds: 1 });
    const { latency, prefillQuadratic } = loadEngineProfile(file);
    // fixed cost: decode intercept + engine loop
    assert.ok(Math.abs(file.stepOverheadS - (FIXED + LOOP)) < 1e-6, `${file.stepOverheadS}`);
    // whole prefills in nBatch chunks (every chunk pays the loop too), including lengths not measured
    for (const tokens of [300, 1000, 3000, 6000, 8192]) {
      const truth = prefillCompute(tokens);
      const want = truth.seconds + truth.chunks * LOOP;
      const got = latency.prefillS(tokens, N_BATCH);
      assert.ok(Math.abs(got - want) / want < 0.03, `prefill ${tokens}: ${got} vs ${want}`);
    }
    // decode steps between and at measured points
    for (const [batch, ctx] of [
      [1, 0],
      [3, 300],
      [8, 2048],
      [24, 1000],
    ] as const) {
      const want = decodeCompute(batch, ctx) + LOOP;
      const got = latency.stepS(Array.from({ length: batch }, () => ({ numTokens: 1, contextTokens: ctx })));
      assert.ok(Math.abs(got - want) / want < 0.03, `decode ${batch}@${ctx}: ${got} vs ${want}`);
    }
    // PrefillReload's quadratic: close to a one-chunk prefill at its own length
    const q = prefillQuadratic;
    assert.ok(Math.abs(q.c - (FIXED + LOOP)) < 0.01, `c = ${q.c}`);
  });

  it("prints the RAM tier's restores and saves beside the GPU's pinned copies of the same size", () => {
    const hostCopy = {
      device: "NVIDIA H100 80GB HBM3",
      bytes: 64 * 2 ** 20,
      pinned: { hostToDeviceBps: 50e9, deviceToHostBps: 40e9 },
      pageable: { hostToDeviceBps: 5e9, deviceToHostBps: 6e9 },
    };
    const onGpu = buildProfile(identity, { ...measurements(), hostCopy }, { seconds: 1 });
    assert.deepEqual(onGpu.notes.offload.hostCopy, hostCopy);
    const text = describeProfile(onGpu);
    // restores at 4 GB/s are 8% of 50 GB/s pinned; saves at 2 GB/s are 5% of 40
    assert.match(text, /restore 4\.0 GB\/s \(8% of pinned 50\.0 GB\/s; pageable 5\.0 GB\/s\)/);
    assert.match(text, /save 2\.0 GB\/s \(5% of pinned 40\.0 GB\/s; pageable 6\.0 GB\/s\)/);
    const onCpu = buildProfile(identity, { ...measurements(), hostCopy: null }, { seconds: 1 });
    assert.doesNotMatch(describeProfile(onCpu), /pinned/);
  });

  it("refuses empty measurements", () => {
    const m = measurements();
    assert.throws(() => buildProfile(identity, { ...m, prefill: [] }, { seconds: 0 }), /no prefill/);
    assert.throws(() => buildProfile(identity, { ...m, decode: [] }, { seconds: 0 }), /no decode/);
  });
});

describe("helpers", () => {
  it("fitLine and decodeIntercept", () => {
    const { slope, intercept } = fitLine([1, 2, 4], [3, 5, 9]);
    assert.ok(Math.abs(slope - 2) < 1e-12 && Math.abs(intercept - 1) < 1e-12);
    const rows: DecodeSample[] = [1, 2, 4].map((batch) => ({
      batch,
      contextTokens: 0,
      seconds: [0.001 + batch * 0.0005],
    }));
    assert.ok(Math.abs(decodeIntercept(rows) - 0.001) < 1e-12);
    // a negative intercept (noise) is clamped to 0
    assert.equal(
      decodeIntercept([
        { batch: 1, contextTokens: 0, seconds: [0.001] },
        { batch: 2, contextTokens: 0, seconds: [0.003] },
      ]),
      0,
    );
  });

  it("cpuDeviceName slugs the CPU model", () => {
    assert.equal(cpuDeviceName("model name\t: Intel(R) Xeon(R) Processor\n"), "cpu-intel-xeon-processor");
    assert.equal(
      cpuDeviceName("model name\t: AMD EPYC 7B13 64-Core Processor\n"),
      "cpu-amd-epyc-7b13-64-core-processor",
    );
    assert.equal(cpuDeviceName(""), "cpu-unknown");
  });

  it("deviceId names a GPU by its backend and model", () => {
    assert.equal(deviceId(H100), "cuda-nvidia-h100-80gb-hbm3");
    assert.equal(deviceId({ ...H100, backend: "cpu", layersOffloaded: 0, kvCache: "cpu" }), cpuDeviceName());
  });
});
