import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import {
  builtCpuBackendProblem,
  type CpuBackendStamp,
  cpuIdentity,
  loadedGgmlBase,
} from "./cpu-backend-location.js";

const sapphire =
  "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu avx2 avx512f amx_int8\n";

describe("cpuIdentity", () => {
  it("is the same for the same model and flags in any order, and differs for another feature set", () => {
    const reordered = "model name : Intel(R) Xeon(R) Processor\nflags : amx_int8 fpu avx512f avx2\n";
    assert.equal(cpuIdentity(sapphire), cpuIdentity(reordered));
    assert.notEqual(cpuIdentity(sapphire), cpuIdentity(sapphire.replace(" amx_int8", "")));
    assert.equal(cpuIdentity(""), "");
  });
});

describe("loadedGgmlBase", () => {
  it("finds the mapped libggml-base.so among the process's mappings", () => {
    const maps = [
      "7f00 r--p 00000000 00:2e 123 /usr/lib/x86_64-linux-gnu/libc.so.6",
      "7f10 r-xp 00010000 00:2e 456 /work/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so",
      "7f20 rw-p 00000000 00:00 0 [heap]",
    ].join("\n");
    assert.equal(
      loadedGgmlBase(maps),
      "/work/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so",
    );
    assert.equal(loadedGgmlBase("7f00 r--p 0 00:2e 1 /usr/lib/libggml-base.so.0\n"), undefined);
  });
});

describe("builtCpuBackendProblem", () => {
  const dir = mkdtempSync(join(tmpdir(), "cpu-backend-"));
  const file = join(dir, "libggml-cpu-native.so");
  writeFileSync(file, "");
  const host = { cpu: cpuIdentity(sapphire), ggmlBase: "a".repeat(64) };
  const stamp: CpuBackendStamp = {
    commit: "de3ff815ea7d559ee917f063901b8986f038abc6",
    llamaCppTag: "v0.5.0",
    nodeLlamaCppVersion: "3.22.1",
    cmakeFlags: ["-DCMAKE_C_FLAGS=-march=native"],
    compiler: "c++ (Debian 12.2.0-14) 12.2.0",
    cpu: host.cpu,
    ggmlBase: host.ggmlBase,
    buildSeconds: 27,
    builtAt: "2026-12-07T21:00:00.000Z",
  };

  it("loads a backend built on this CPU against the engine's ggml-base", () => {
    assert.equal(builtCpuBackendProblem(file, stamp, host), undefined);
  });

  it("names why it does not: not built, no stamp, another CPU, another llama.cpp release", () => {
    assert.match(
      builtCpuBackendProblem(join(dir, "none.so"), stamp, host) ?? "",
      /is not built \(continuum build-cpu/,
    );
    assert.match(builtCpuBackendProblem(file, undefined, host) ?? "", /no readable stamp\.json/);
    assert.match(
      builtCpuBackendProblem(file, { ...stamp, cpu: "0123456789abcdef" }, host) ?? "",
      /another CPU/,
    );
    assert.match(builtCpuBackendProblem(file, stamp, { ...host, cpu: "" }) ?? "", /another CPU/);
    assert.match(
      builtCpuBackendProblem(file, { ...stamp, ggmlBase: "b".repeat(64) }, host) ?? "",
      /another llama\.cpp release/,
    );
  });
});
