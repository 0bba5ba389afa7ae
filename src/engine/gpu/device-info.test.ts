import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { DeviceInfo as GgmlDevice } from "../native/llama-native.js";
import { H100_ALL_LAYERS } from "../test-support/devices.js";
import { cpuDeviceInfo, type DeviceInfo, describeDevice, deviceInfoOf } from "./device-info.js";

const GIB = 1024 ** 3;

const CPU: GgmlDevice = {
  name: "CPU",
  description: "AMD EPYC 7B13 64-Core Processor",
  type: "cpu",
  backend: "CPU",
  memoryFree: 20 * GIB,
  memoryTotal: 24 * GIB,
};

const H100: GgmlDevice = {
  name: "CUDA0",
  description: "NVIDIA H100 80GB HBM3",
  type: "gpu",
  backend: "CUDA",
  memoryFree: 70 * GIB,
  memoryTotal: 85_520_809_984,
};

const IGPU: GgmlDevice = {
  name: "Vulkan0",
  description: "AMD Radeon Graphics (RADV RENOIR)",
  type: "igpu",
  backend: "Vulkan",
  memoryFree: 2 * GIB,
  memoryTotal: 4 * GIB,
};

const onCpu: DeviceInfo = {
  backend: "cpu",
  device: "AMD EPYC 7B13 64-Core Processor",
  memoryBytes: 24 * GIB,
  layersOffloaded: 0,
  layersTotal: 32,
  kvCache: "cpu",
};

describe("deviceInfoOf", () => {
  test("all layers on a CUDA GPU: its name and memory, the KV cache on the GPU", () => {
    const all = deviceInfoOf([CPU, H100], 32, -1);
    assert.deepEqual(all, H100_ALL_LAYERS);
    // llama.cpp counts the output layer as one more: 33 of a 32-layer model is all of them
    assert.deepEqual(deviceInfoOf([CPU, H100], 32, 33), all);
    assert.deepEqual(deviceInfoOf([CPU, H100], 32, 1000), all);
  });

  test("part of the layers on the GPU: the KV cache is split", () => {
    // the output layer takes the first slot, so n slots hold n - 1 repeating layers
    const part = deviceInfoOf([CPU, H100], 32, 20);
    assert.equal(part.backend, "cuda");
    assert.equal(part.layersOffloaded, 19);
    assert.equal(part.kvCache, "split");
    assert.equal(deviceInfoOf([CPU, H100], 32, 32).layersOffloaded, 31);
    assert.equal(deviceInfoOf([CPU, H100], 32, 32).kvCache, "split");
  });

  test("only the output layer on the GPU: no repeating layer there, the KV cache in RAM", () => {
    const outputOnly = deviceInfoOf([CPU, H100], 32, 1);
    assert.equal(outputOnly.backend, "cuda");
    assert.equal(outputOnly.layersOffloaded, 0);
    assert.equal(outputOnly.kvCache, "cpu");
  });

  test("no layer on the GPU, or no GPU loaded (a plugin that failed): the CPU and its RAM", () => {
    assert.deepEqual(deviceInfoOf([CPU, H100], 32, 0), onCpu);
    assert.deepEqual(deviceInfoOf([CPU], 32, -1), onCpu);
  });

  test("an integrated GPU is used only when there is no discrete one", () => {
    assert.equal(deviceInfoOf([CPU, IGPU], 32, -1).device, "AMD Radeon Graphics (RADV RENOIR)");
    assert.equal(deviceInfoOf([CPU, IGPU], 32, -1).backend, "vulkan");
    assert.equal(deviceInfoOf([CPU, IGPU, H100], 32, -1).device, "NVIDIA H100 80GB HBM3");
  });

  test("layers split over two GPUs: both named, their memory summed", () => {
    const second = { ...H100, name: "CUDA1" };
    const two = deviceInfoOf([CPU, H100, second], 32, -1);
    assert.equal(two.device, "NVIDIA H100 80GB HBM3 + NVIDIA H100 80GB HBM3");
    assert.equal(two.memoryBytes, 2 * H100.memoryTotal);
    assert.equal(two.backend, "cuda");
  });

  test("the same card under CUDA and Vulkan is one device: llama.cpp uses the first", () => {
    const viaVulkan = { ...H100, name: "Vulkan0", backend: "Vulkan" };
    assert.deepEqual(deviceInfoOf([CPU, H100, viaVulkan], 32, -1), deviceInfoOf([CPU, H100], 32, -1));
  });

  test("without ggml's device list (fake runners): the host's CPU and RAM", () => {
    const host = cpuDeviceInfo();
    assert.equal(host.backend, "cpu");
    assert.ok(host.device.length > 0);
    assert.ok(host.memoryBytes > 0);
    assert.equal(host.kvCache, "cpu");
  });
});

describe("describeDevice", () => {
  test("a GPU: backend, name, memory, layers on it, where the KV cache is", () => {
    assert.equal(
      describeDevice(deviceInfoOf([CPU, H100], 32, -1)),
      "cuda · NVIDIA H100 80GB HBM3 · 79.6 GiB · 32/32 layers on the GPU · KV cache on the GPU",
    );
    assert.equal(
      describeDevice(deviceInfoOf([CPU, H100], 32, 20)),
      "cuda · NVIDIA H100 80GB HBM3 · 79.6 GiB · 19/32 layers on the GPU · KV cache split between the GPU and RAM",
    );
  });

  test("the CPU: its model and RAM", () => {
    assert.equal(
      describeDevice(onCpu),
      "cpu · AMD EPYC 7B13 64-Core Processor · 24.0 GiB RAM · KV cache in RAM",
    );
  });
});
