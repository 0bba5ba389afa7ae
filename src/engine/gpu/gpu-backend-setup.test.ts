import assert from "node:assert/strict";
import { test } from "node:test";
import type { GpuProbeRequest, GpuProbeResult } from "./backend-probe.js";
import { checkGpuBackend, type GpuLayers } from "./gpu-backend-setup.js";
import type { GpuPluginCandidates } from "./plugin-discovery.js";

const cudaPlugin = "/repo/.cache/gpu-plugin/cuda/libggml-cuda.so";
const withPlugin: GpuPluginCandidates = {
  disabled: false,
  override: null,
  built: [cudaPlugin],
  packaged: [],
};
const noPlugin: GpuPluginCandidates = { ...withPlugin, built: [] };
const aborted: GpuProbeResult = {
  ok: false,
  kind: "crash",
  cause: "aborted while decoding (CUDA error: the provided PTX was compiled with an unsupported toolchain)",
};
const passed: GpuProbeResult = {
  ok: true,
  device: {
    backend: "cuda",
    device: "NVIDIA H100 80GB HBM3",
    memoryBytes: 85e9,
    layersOffloaded: 4,
    layersTotal: 4,
    kvCache: "gpu",
  },
};

function check(candidates: GpuPluginCandidates, gpuLayers: GpuLayers, outcome: GpuProbeResult) {
  const probes: GpuProbeRequest[] = [];
  const warnings: string[] = [];
  const result = checkGpuBackend(
    candidates,
    { modelPath: "/m.gguf", gpuLayers, warn: (line) => warnings.push(line) },
    async (request) => {
      probes.push(request);
      return outcome;
    },
    300,
  );
  return { result, probes, warnings };
}

test("without a GPU plugin, or with --gpu-layers 0, no probe runs and the CPU serves", async () => {
  for (const [candidates, gpuLayers] of [
    [noPlugin, "auto"],
    [withPlugin, 0],
  ] as const) {
    const { result, probes, warnings } = check(candidates, gpuLayers, passed);
    assert.equal((await result).onGpu, false);
    assert.deepEqual(probes, []);
    assert.deepEqual(warnings, []);
  }
});

test("a plugin that passes its probe is used", async () => {
  const { result, probes } = check(withPlugin, "auto", passed);
  assert.deepEqual(await result, {
    plugin: { file: cudaPlugin, backend: "cuda", source: "built" },
    probe: passed,
    onGpu: true,
  });
  assert.deepEqual(probes, [{ plugin: cudaPlugin, modelPath: "/m.gguf", gpuLayers: "auto" }]);
});

test("--gpu-layers auto and a failed probe: one line naming backend, cause and fix, then the CPU", async () => {
  const { result, warnings } = check(withPlugin, "auto", aborted);
  assert.equal((await result).onGpu, false);
  assert.deepEqual(warnings, [
    `continuum: GPU backend cuda (${cudaPlugin}) failed its check: aborted while decoding (CUDA error: the provided ` +
      "PTX was compiled with an unsupported toolchain); serving on the CPU. Fix: run `continuum build-gpu` to build " +
      "the plugin for this GPU.",
  ]);
});

test("an explicit --gpu-layers stops on a failed probe, and when there is no GPU backend at all", async () => {
  const failed = check(withPlugin, "all", aborted);
  await assert.rejects(failed.result, {
    message:
      `GPU backend cuda (${cudaPlugin}) failed its check: aborted while decoding (CUDA error: the provided PTX was ` +
      "compiled with an unsupported toolchain). Fix: run `continuum build-gpu` to build the plugin for this GPU.",
  });
  assert.deepEqual(failed.warnings, []);
  await assert.rejects(
    check(noPlugin, 20, passed).result,
    /^Error: no GPU backend: --gpu-layers 20 asks for a GPU, but no GPU plugin was built here or installed; run `continuum build-gpu`/,
  );
  await assert.rejects(
    check({ ...withPlugin, disabled: true }, "all", passed).result,
    /CONTINUUM_LLAMA_GPU=0 turns GPU backends off/,
  );
});

test("the fix fits the cause: memory, a missing device, a slow load", async () => {
  const fixOf = async (failure: GpuProbeResult) => {
    const { result, warnings } = check(withPlugin, "auto", failure);
    await result;
    return /Fix: (.*)$/.exec(warnings[0]!)?.[1];
  };
  assert.match((await fixOf({ ok: false, kind: "out-of-memory", cause: "x" }))!, /fewer layers/);
  assert.match((await fixOf({ ok: false, kind: "no-device", cause: "x" }))!, /GPU driver/);
  assert.match(
    (await fixOf({ ok: false, kind: "timeout", cause: "x" }))!,
    /CONTINUUM_GPU_PROBE_TIMEOUT_S \(now 300 s\)/,
  );
});
