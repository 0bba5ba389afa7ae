import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { type GpuBuildStamp, readBuildStamp, rebuildReason } from "./build-stamp.js";

const inputs = {
  commit: "de3ff815ea7d559ee917f063901b8986f038abc6",
  cmakeFlags: ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90-real"],
  toolkit: "Cuda compilation tools, release 13.0, V13.0.88",
};
const stamp: GpuBuildStamp = {
  ...inputs,
  backend: "cuda",
  nodeLlamaCppVersion: "3.22.1",
  llamaCppTag: "v0.5.0",
  arch: "90",
  buildSeconds: 196,
  builtAt: "2026-11-26T00:00:00.000Z",
};

describe("rebuildReason", () => {
  it("is up to date for the same commit, flags and toolkit", () => {
    assert.equal(rebuildReason(stamp, { ...inputs, cmakeFlags: [...inputs.cmakeFlags] }), undefined);
  });

  it("rebuilds when nothing was built", () => {
    assert.match(rebuildReason(undefined, inputs) ?? "", /no plugin built yet/);
  });

  it("rebuilds after a toolkit upgrade, naming both versions", () => {
    const reason = rebuildReason(stamp, {
      ...inputs,
      toolkit: "Cuda compilation tools, release 13.1, V13.1.2",
    });
    assert.match(reason ?? "", /toolkit changed .*release 13\.0.* -> .*release 13\.1/);
  });

  it("rebuilds for another llama.cpp commit", () => {
    assert.match(rebuildReason(stamp, { ...inputs, commit: "0123456789ab" }) ?? "", /commit changed/);
  });

  it("rebuilds for another architecture", () => {
    const flags = ["-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=86-real;90-real"];
    assert.match(rebuildReason(stamp, { ...inputs, cmakeFlags: flags }) ?? "", /flags changed/);
  });
});

describe("readBuildStamp", () => {
  it("reads back a written stamp and treats a missing or broken one as absent", () => {
    const dir = mkdtempSync(join(tmpdir(), "gpu-stamp-"));
    const path = join(dir, "stamp.json");
    assert.equal(readBuildStamp(path), undefined);
    writeFileSync(path, JSON.stringify(stamp));
    assert.deepEqual(readBuildStamp(path), stamp);
    writeFileSync(path, "{ half a stamp");
    assert.equal(readBuildStamp(path), undefined);
  });
});
