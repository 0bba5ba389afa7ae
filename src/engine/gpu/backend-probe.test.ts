import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ensureBuiltinModel } from "../../gguf/index.js";
import { isNativeAvailable } from "../native/llama-native.js";
import { probeGpuBackend, probeTimeoutS } from "./backend-probe.js";

describe("the GPU probe child", { skip: isNativeAvailable() ? false : "no llama.cpp addon" }, () => {
  test("runs a real step of the model and reports what it ran on (here: no GPU device)", async () => {
    const modelPath = await ensureBuiltinModel({ preset: "tiny" });
    const result = await probeGpuBackend({ plugin: null, modelPath, gpuLayers: "auto" });
    assert.ok(result.ok, JSON.stringify(result));
    assert.equal(result.device.backend, "cpu");
    assert.deepEqual([result.device.layersOffloaded, result.device.layersTotal], [0, 4]);
  });

  test("is killed at its timeout, and says how far it got", async () => {
    const modelPath = await ensureBuiltinModel({ preset: "tiny" });
    const result = await probeGpuBackend({ plugin: null, modelPath, gpuLayers: "auto" }, 0.05);
    assert.ok(!result.ok && result.kind === "timeout", JSON.stringify(result));
    assert.match(result.cause, /^no answer within 0\.05 s/);
  });
});

test("the probe's timeout is 300 s unless CONTINUUM_GPU_PROBE_TIMEOUT_S says otherwise", () => {
  assert.equal(probeTimeoutS({}), 300);
  assert.equal(probeTimeoutS({ CONTINUUM_GPU_PROBE_TIMEOUT_S: "900" }), 900);
  assert.equal(probeTimeoutS({ CONTINUUM_GPU_PROBE_TIMEOUT_S: "soon" }), 300);
});
