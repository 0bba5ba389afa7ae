import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { chooseGpuPlugin, type GpuPluginCandidates, gpuPluginCandidates } from "./plugin-discovery.js";
import { builtPluginFile } from "./plugin-location.js";

const none: GpuPluginCandidates = { disabled: false, override: null, built: [], packaged: [] };
const packagedCuda = "/nm/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda/libggml-cuda.so";
const packagedVulkan = "/nm/@node-llama-cpp/linux-x64-vulkan/bins/linux-x64-vulkan/libggml-vulkan.so";
const builtCuda = "/repo/.cache/gpu-plugin/cuda/libggml-cuda.so";
const builtVulkan = "/repo/.cache/gpu-plugin/vulkan/libggml-vulkan.so";

test("CONTINUUM_GPU_PLUGIN beats a plugin built here, which beats a packaged one", () => {
  const all = { ...none, built: [builtCuda], packaged: [packagedCuda] };
  assert.deepEqual(chooseGpuPlugin({ ...all, override: "/x/libggml-cuda.so" }), {
    file: "/x/libggml-cuda.so",
    backend: "cuda",
    source: "env",
  });
  assert.deepEqual(chooseGpuPlugin(all), { file: builtCuda, backend: "cuda", source: "built" });
  assert.deepEqual(chooseGpuPlugin({ ...none, packaged: [packagedCuda] }), {
    file: packagedCuda,
    backend: "cuda",
    source: "packaged",
  });
  assert.equal(chooseGpuPlugin(none), null);
});

test("one plugin at most: CUDA before Vulkan, a plugin built here before any packaged one", () => {
  assert.equal(chooseGpuPlugin({ ...none, packaged: [packagedVulkan, packagedCuda] })?.file, packagedCuda);
  assert.equal(chooseGpuPlugin({ ...none, built: [builtVulkan, builtCuda] })?.file, builtCuda);
  assert.equal(
    chooseGpuPlugin({ ...none, built: [builtVulkan], packaged: [packagedCuda] })?.file,
    builtVulkan,
  );
});

test("CONTINUUM_LLAMA_GPU=0 means no GPU plugin, even one named by CONTINUUM_GPU_PLUGIN", () => {
  assert.equal(
    chooseGpuPlugin({ disabled: true, override: builtCuda, built: [builtCuda], packaged: [] }),
    null,
  );
});

test("an overriding plugin of another name is loaded as it is, its backend unknown", () => {
  assert.deepEqual(chooseGpuPlugin({ ...none, override: "/x/my-backend.so", packaged: [packagedCuda] }), {
    file: "/x/my-backend.so",
    backend: null,
    source: "env",
  });
});

test("the candidates on disk: only built plugins that exist; the environment's override made absolute", () => {
  const root = mkdtempSync(join(tmpdir(), "continuum-gpu-discovery-"));
  try {
    const built = builtPluginFile(root, "vulkan");
    mkdirSync(dirname(built), { recursive: true });
    writeFileSync(built, "");
    const candidates = gpuPluginCandidates(root, { CONTINUUM_GPU_PLUGIN: "plugins/libggml-cuda.so" });
    assert.deepEqual(candidates.built, [built]);
    assert.equal(candidates.override, join(process.cwd(), "plugins/libggml-cuda.so"));
    assert.equal(candidates.disabled, false);
    assert.equal(gpuPluginCandidates(root, { CONTINUUM_LLAMA_GPU: "0" }).disabled, true);
    assert.equal(gpuPluginCandidates(root, { CONTINUUM_GPU_PLUGIN: "" }).override, null);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
