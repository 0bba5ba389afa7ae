import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { archsFromComputeCaps, cudaArchitecturesValue, parseArchOption } from "./cuda-arch.js";

describe("archsFromComputeCaps (nvidia-smi --query-gpu=compute_cap --format=csv,noheader)", () => {
  it("turns one H100's 9.0 into 90", () => {
    assert.deepEqual(archsFromComputeCaps("9.0\n"), ["90"]);
  });

  it("builds once for each distinct GPU kind, lowest first", () => {
    assert.deepEqual(archsFromComputeCaps("9.0\n8.6\n9.0\n8.6\n"), ["86", "90"]);
    assert.equal(cudaArchitecturesValue(archsFromComputeCaps("9.0\n8.6\n")), "86-real;90-real");
  });

  it("refuses output that is not a compute capability", () => {
    assert.throws(() => archsFromComputeCaps("No devices were found\n"), /No devices were found/);
    assert.throws(() => archsFromComputeCaps("[N/A]\n"), /compute capability/);
    assert.throws(() => archsFromComputeCaps(""), /no GPU/);
  });
});

describe("parseArchOption (--arch)", () => {
  it("takes architectures and compute capabilities alike", () => {
    assert.deepEqual(parseArchOption("90"), ["90"]);
    assert.deepEqual(parseArchOption("9.0"), ["90"]);
    assert.deepEqual(parseArchOption("90;8.6"), ["86", "90"]);
    assert.deepEqual(parseArchOption("120,90a"), ["90a", "120"]);
  });

  it("refuses what cmake would not take", () => {
    assert.throws(() => parseArchOption("sm_90"), /expected CUDA architectures/);
    assert.throws(() => parseArchOption(";"), /expected CUDA architectures/);
  });
});
