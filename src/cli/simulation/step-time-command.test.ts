import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { getRooflineModel } from "../../sim/hardware/profiles.js";
import { chunksOf, stepTimeOf } from "../../sim/hardware/step-fidelity.js";
import { runContinuum } from "../test-support/run-cli.js";
import { decodePart, prefillPart } from "./step-time-command.js";

describe("continuum step-time", () => {
  it("reads BxL decodes and N+P prefill chunks, and refuses other spellings", () => {
    assert.deepEqual(decodePart("64x2048", []), [{ kind: "decode", B: 64, L: 2048 }]);
    assert.deepEqual(prefillPart("512+0", [{ kind: "decode", B: 1, L: 9 }]), [
      { kind: "decode", B: 1, L: 9 },
      { kind: "prefill", N: 512, P: 0 },
    ]);
    for (const bad of ["0x2048", "64*2048", "64x", "x2048", "-1x5"]) {
      assert.throws(() => decodePart(bad, []), /expected BxL/, bad);
    }
    for (const bad of ["0+10", "512-0", "512", "+5"]) {
      assert.throws(() => prefillPart(bad, []), /expected N\+P/, bad);
    }
  });

  it("--json: a decode batch and a prefill chunk in one step, kernels apart from the fixed overhead", async () => {
    const run = await runContinuum([
      "step-time",
      "--hardware",
      "h100",
      "--model",
      "llama-3.1-8b",
      "--decode",
      "64x2048",
      "--prefill",
      "512+0",
      "--json",
    ]);
    assert.equal(run.code, 0, run.stderr);
    const out = JSON.parse(run.stdout) as Record<string, unknown> & {
      ms: number;
      overhead_ms: number;
      step_ms: number;
      kernels_ms: Record<string, number>;
    };
    assert.deepEqual(out.decode, [{ B: 64, L: 2048 }]);
    assert.deepEqual(out.prefill, [{ N: 512, P: 0 }]);
    const model = getRooflineModel("h100", "llama-3.1-8b");
    const expected = stepTimeOf(
      model,
      chunksOf([
        { kind: "decode", B: 64, L: 2048 },
        { kind: "prefill", N: 512, P: 0 },
      ]),
    );
    assert.ok(Math.abs(out.ms - expected.kernelS * 1e3) < 1e-9, `${out.ms}`);
    assert.equal(out.overhead_ms, 1.5);
    assert.ok(Math.abs(out.step_ms - out.ms - out.overhead_ms) < 1e-9);
    const parts = Object.values(out.kernels_ms).reduce((sum, v) => sum + v, 0);
    assert.ok(Math.abs(parts - out.ms) < 1e-9, "the kernels' parts add up to ms");
    assert.ok(out.kernels_ms["decode_attention"] && out.kernels_ms["prefill_attention"]);
    const decodeAlone = stepTimeOf(model, chunksOf([{ kind: "decode", B: 64, L: 2048 }])).kernelS * 1e3;
    assert.ok(out.ms > decodeAlone, "the prefill chunk adds to the decode batch's step");
  });

  it("--reference: every measured step beside the model's kernel time, with the median and the worst", async () => {
    const model = getRooflineModel("h200", "llama-3.1-8b");
    const modelMs = (part: Parameters<typeof chunksOf>[0][number]) =>
      stepTimeOf(model, chunksOf([part])).kernelS * 1e3;
    const file = join(mkdtempSync(join(tmpdir(), "step-ref-")), "steps.jsonl");
    writeFileSync(
      file,
      [
        { kind: "info", gpu: "test" },
        { kind: "decode", B: 32, L: 4096, ms: modelMs({ kind: "decode", B: 32, L: 4096 }) / 1.1 },
        { kind: "prefill", N: 2048, P: 8192, ms: modelMs({ kind: "prefill", N: 2048, P: 8192 }) / 0.95 },
        { kind: "decode", B: 1, L: 0, ms: modelMs({ kind: "decode", B: 1, L: 0 }) },
        { kind: "done", s: 1 },
      ]
        .map((line) => JSON.stringify(line))
        .join("\n"),
    );
    const run = await runContinuum(["step-time", "--hardware", "h200", "--reference", file]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /^\| step \| measured ms \| model ms \| error \|$/m);
    assert.match(run.stdout, /^\| decode 32 x 4096 \| [\d.]+ \| [\d.]+ \| \+10\.0% \|$/m);
    assert.match(run.stdout, /^\| prefill 2048 after 8192 \| [\d.]+ \| [\d.]+ \| -5\.0% \|$/m);
    assert.match(run.stdout, /^3 steps: median \|error\| 5\.0%, worst decode 32 x 4096 \+10\.0%$/m);
  });

  it("without a step or with an unknown GPU, fails saying what it needs", async () => {
    const none = await runContinuum(["step-time", "--hardware", "h100"]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /give the step: --decode BxL and\/or --prefill N\+P/);
    const unknown = await runContinuum(["step-time", "--hardware", "v100", "--decode", "1x10"]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /unknown hardware profile v100\/llama-3\.1-8b/);
  });
});
