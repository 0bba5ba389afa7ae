import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { runContinuum } from "../test-support/run-cli.js";

const gpuProfile = fileURLToPath(
  new URL("../../../docs/gpu/h100-llama-3.1-8b-q8_0-profile.json", import.meta.url),
);

describe("continuum simulate --batch", () => {
  it("starts every program at once and reports the run as a batch", async () => {
    const args = [
      "simulate",
      "--batch",
      "--programs",
      "8",
      "--policies",
      "vllm",
      "--threads",
      "1",
      "--no-report",
    ];
    const table = await runContinuum(args);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stderr, /8 programs arriving together at 0 \(a batch\)/);
    assert.match(table.stdout, /^vllm\s+batch\s+8\/8/m);
  });

  it("has no arrival rate to take", async () => {
    const { code, stderr } = await runContinuum(["simulate", "--batch", "--jps", "0.5", "--no-report"]);
    assert.notEqual(code, 0);
    assert.match(stderr, /'--batch' cannot be used with option '--jps/);
  });
});

describe("continuum simulate --profile", () => {
  it("runs on the profile `continuum profile` took on an H100 (docs/gpu/)", async () => {
    const { code, stdout, stderr } = await runContinuum([
      "simulate",
      "--profile",
      gpuProfile,
      "--programs",
      "6",
      "--jps",
      "0.5",
      "--policies",
      "vllm,cachettl-adaptive",
      "--threads",
      "1",
      "--json",
      "--no-report",
    ]);
    assert.equal(code, 0, stderr);
    assert.match(stderr, /engine profile .*h100-llama-3\.1-8b-q8_0-profile\.json/);
    const { results } = JSON.parse(stdout) as {
      results: { policy: string; completed: number; steps: number; gpu: { decode_step_s: number } }[];
    };
    assert.deepEqual(
      results.map((r) => r.policy),
      ["vllm", "cachettl-adaptive"],
    );
    for (const r of results) {
      assert.equal(r.completed, 6, `${r.policy} finished every program`);
      assert.ok(r.steps > 0 && r.gpu.decode_step_s > 0, `${r.policy} ran priced steps`);
    }
  });
});
