import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { planGpuBuild } from "./build-plan.js";

const dirs = { ggmlDir: "/src/ggml", buildDir: "/out/build", jobs: 16 };

describe("planGpuBuild", () => {
  it("configures standalone ggml with CUDA for the GPU's real architecture only", () => {
    const plan = planGpuBuild({ target: { backend: "cuda", archs: ["90"] }, ...dirs, ninja: true });
    for (const flag of [
      "-DCMAKE_BUILD_TYPE=Release",
      "-DGGML_CUDA=ON",
      "-DGGML_BACKEND_DL=ON",
      "-DBUILD_SHARED_LIBS=ON",
      "-DGGML_NATIVE=OFF",
      "-DGGML_CPU=OFF",
      "-DGGML_BUILD_TESTS=OFF",
      "-DGGML_BUILD_EXAMPLES=OFF",
      "-DCMAKE_CUDA_ARCHITECTURES=90-real",
    ]) {
      assert.ok(plan.cmakeFlags.includes(flag), flag);
    }
    assert.ok(!plan.cmakeFlags.some((flag) => flag.includes("VULKAN")));
    assert.deepEqual(plan.configureArgs.slice(0, 6), ["-S", "/src/ggml", "-B", "/out/build", "-G", "Ninja"]);
    assert.deepEqual(plan.buildArgs, ["--build", "/out/build", "--target", "ggml-cuda", "-j", "16"]);
    assert.equal(plan.builtPlugin, "/out/build/bin/libggml-cuda.so");
  });

  it("links the plugin to libggml-base.so, the name of the engine's ggml-base, not ggml's libggml-base.so.0", () => {
    const plan = planGpuBuild({ target: { backend: "cuda", archs: ["90"] }, ...dirs, ninja: true });
    assert.ok(plan.cmakeFlags.includes("-DCMAKE_PLATFORM_NO_VERSIONED_SONAME=ON"));
    assert.ok(plan.cmakeFlags.includes("-DCMAKE_BUILD_RPATH_USE_ORIGIN=ON"));
  });

  it("builds Vulkan without a CUDA architecture, with make when ninja is missing", () => {
    const plan = planGpuBuild({ target: { backend: "vulkan" }, ...dirs, ninja: false });
    assert.ok(plan.cmakeFlags.includes("-DGGML_VULKAN=ON"));
    assert.ok(!plan.cmakeFlags.some((flag) => flag.includes("CUDA")));
    assert.ok(!plan.configureArgs.includes("-G"));
    assert.deepEqual(plan.buildArgs.slice(2, 4), ["--target", "ggml-vulkan"]);
    assert.equal(plan.builtPlugin, "/out/build/bin/libggml-vulkan.so");
  });
});
