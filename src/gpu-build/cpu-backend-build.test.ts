import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { cpuBackendRebuildReason, planCpuBackendBuild } from "./cpu-backend-build.js";

describe("planCpuBackendBuild", () => {
  const plan = planCpuBackendBuild({
    ggmlDir: "/src/ggml",
    buildDir: "/cache/cpu-backend/build",
    jobs: 2,
    ninja: true,
    workarounds: [
      "-DCMAKE_C_FLAGS=-mno-avx512fp16",
      "-DCMAKE_CXX_FLAGS=-fno-tree-dse -fno-dse -mno-avx512fp16",
    ],
  });

  it("compiles the loadable CPU backend alone for this CPU, keeping the compiler workarounds", () => {
    assert.ok(plan.cmakeFlags.includes("-DGGML_BACKEND_DL=ON"));
    assert.ok(plan.cmakeFlags.includes("-DGGML_OPENMP=OFF"));
    assert.ok(plan.cmakeFlags.includes("-DCMAKE_C_FLAGS=-march=native -mno-avx512fp16"));
    assert.ok(
      plan.cmakeFlags.includes("-DCMAKE_CXX_FLAGS=-march=native -fno-tree-dse -fno-dse -mno-avx512fp16"),
    );
    assert.deepEqual(plan.buildArgs, [
      "--build",
      "/cache/cpu-backend/build",
      "--target",
      "ggml-cpu",
      "-j",
      "2",
    ]);
    assert.equal(plan.builtLibrary, "/cache/cpu-backend/build/bin/libggml-cpu.so");
  });

  it("passes -march=native alone where no workaround applies (clang, or a compiler without AVX512-FP16)", () => {
    const bare = planCpuBackendBuild({
      ggmlDir: "/g",
      buildDir: "/b",
      jobs: 1,
      ninja: false,
      workarounds: [],
    });
    assert.ok(bare.cmakeFlags.includes("-DCMAKE_C_FLAGS=-march=native"));
    assert.ok(bare.cmakeFlags.includes("-DCMAKE_CXX_FLAGS=-march=native"));
    assert.ok(!bare.configureArgs.includes("Ninja"));
  });
});

describe("cpuBackendRebuildReason", () => {
  const now = {
    commit: "de3ff815ea7d559ee917f063901b8986f038abc6",
    cmakeFlags: ["-DCMAKE_C_FLAGS=-march=native"],
    compiler: "c++ (Debian 12.2.0-14) 12.2.0",
    cpu: "0123456789abcdef",
    ggmlBase: "a".repeat(64),
  };
  const stamp = {
    ...now,
    llamaCppTag: "v0.5.0",
    nodeLlamaCppVersion: "3.22.1",
    buildSeconds: 27,
    builtAt: "",
  };

  it("is up to date for the same source, libraries, CPU, compiler and flags; else says what changed", () => {
    assert.equal(cpuBackendRebuildReason(stamp, now), undefined);
    assert.match(cpuBackendRebuildReason(undefined, now) ?? "", /not built yet/);
    assert.match(
      cpuBackendRebuildReason({ ...stamp, commit: "f".repeat(40) }, now) ?? "",
      /llama\.cpp commit changed/,
    );
    assert.match(
      cpuBackendRebuildReason({ ...stamp, ggmlBase: "b".repeat(64) }, now) ?? "",
      /libraries changed/,
    );
    assert.match(cpuBackendRebuildReason({ ...stamp, cpu: "fedcba9876543210" }, now) ?? "", /another CPU/);
    assert.match(cpuBackendRebuildReason({ ...stamp, compiler: "clang 16" }, now) ?? "", /compiler changed/);
    assert.match(cpuBackendRebuildReason({ ...stamp, cmakeFlags: [] }, now) ?? "", /cmake flags changed/);
  });
});
