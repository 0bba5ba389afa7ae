import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { runContinuum } from "../test-support/run-cli.js";

describe("continuum build-cpu", () => {
  it("--dry-run prints the cmake commands of ggml's CPU backend for this CPU and where it goes", async () => {
    const run = await runContinuum(["build-cpu", "--dry-run", "--jobs", "3"]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(
      run.stdout,
      /^cmake -S \S+\/ggml -B \S+cpu-backend\/build .*-DGGML_BACKEND_DL=ON .*-march=native/m,
    );
    assert.match(run.stdout, /^cmake --build \S+ --target ggml-cpu -j 3$/m);
    assert.match(
      run.stdout,
      /^cp \S+\/bin\/libggml-cpu\.so \S+\.cache\/cpu-backend\/libggml-cpu-native\.so$/m,
    );
  });
});
