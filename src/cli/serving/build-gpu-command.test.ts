import assert from "node:assert/strict";
import { mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { runContinuum } from "../test-support/run-cli.js";

/** A PATH holding node alone: no nvcc, nvidia-smi, cmake or compiler. */
function pathWithNodeOnly(): string {
  const dir = mkdtempSync(join(tmpdir(), "node-only-"));
  symlinkSync(process.execPath, join(dir, "node"));
  return dir;
}

describe("continuum build-gpu", () => {
  it("--dry-run --arch 90 prints the cmake commands for sm_90 machine code, without any toolkit", async () => {
    const run = await runContinuum(["build-gpu", "--dry-run", "--arch", "90", "--jobs", "4"], {
      PATH: pathWithNodeOnly(),
    });
    assert.equal(run.code, 0, run.stderr);
    assert.match(
      run.stdout,
      /^cmake -S \S+\/ggml -B .* -DGGML_CUDA=ON .*-DCMAKE_CUDA_ARCHITECTURES=90-real/m,
    );
    assert.match(run.stdout, /^cmake --build \S+ --target ggml-cuda -j 4$/m);
    assert.match(run.stdout, /llama-src\//);
  });

  it("without nvcc, fails naming the CUDA toolkit to install", async () => {
    const run = await runContinuum(["build-gpu", "--arch", "90"], { PATH: pathWithNodeOnly() });
    assert.notEqual(run.code, 0);
    assert.match(
      run.stderr,
      /nvcc not found on PATH: install the CUDA toolkit \(Debian: nvidia-cuda-toolkit/,
    );
    assert.match(run.stderr, /no newer than the CUDA version nvidia-smi shows for the driver/);
    assert.equal(run.stdout, "");
  });
});
