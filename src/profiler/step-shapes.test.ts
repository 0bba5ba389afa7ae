import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { parseReferenceSteps, type StepPart } from "../core/profile/step-reference.js";
import { DecodeBatch, type LlamaModel, loadModel } from "../engine/native/llama-native.js";
import { ensureBuiltinModel } from "../gguf/index.js";
import { compareSteps, measureStepShapes } from "./step-shapes.js";

const supported = process.platform === "linux" && process.arch === "x64";

describe("reference steps", () => {
  it("puts each measured step beside the reference at the same shape, within the tolerance either way", () => {
    const reference = parseReferenceSteps(
      ['{"kind":"prefill","N":512,"P":0,"ms":10}', '{"kind":"decode","B":1,"L":1024,"ms":8}'].join("\n"),
    );
    const wallOnly = (shape: StepPart, ms: number) => ({
      shape,
      ms,
      samplesMs: [ms],
      computeMs: null,
      computeSamplesMs: [],
      phasesMs: null,
    });
    const rows = compareSteps(
      [
        wallOnly({ kind: "prefill", N: 512, P: 0 }, 13),
        wallOnly({ kind: "decode", B: 1, L: 1024 }, 5),
        wallOnly({ kind: "decode", B: 2, L: 1024 }, 5),
      ],
      reference,
      0.25,
    );
    assert.deepEqual(
      rows.map((r) => [r.shape.kind, r.basis, r.ratio, r.within]),
      [
        ["prefill", "wall", 1.3, false],
        ["decode", "wall", 0.625, false],
      ],
    );
    assert.equal(compareSteps([wallOnly(reference[0]!.shape, 11)], reference, 0.25)[0]?.within, true);
  });

  it("holds the model's compute time against a kernel-time reference, and keeps the wall time beside it", () => {
    const reference = parseReferenceSteps('{"kind":"prefill","N":512,"P":0,"ms":10}');
    const [row] = compareSteps(
      [
        {
          shape: reference[0]!.shape,
          ms: 14,
          samplesMs: [14],
          computeMs: 11,
          computeSamplesMs: [11],
          phasesMs: { prepare: 1, inputs: 1, compute: 11, finish: 1 },
        },
      ],
      reference,
      0.25,
    );
    assert.deepEqual(
      [row?.basis, row?.ms, row?.ratio, row?.within, row?.wallMs, row?.wallRatio],
      ["compute", 11, 1.1, true, 14, 1.4],
    );
  });
});

describe("step shapes on the engine", {
  skip: supported ? false : "llama.cpp engine is linux-x64 only",
}, () => {
  let model: LlamaModel;
  before(async () => {
    model = await loadModel(await ensureBuiltinModel({ preset: "tiny" }), { gpuLayers: 0 });
  });
  after(() => model?.free());

  it("times every shape that fits, each sequence with its own context, and says why the others were skipped", async () => {
    const shapes: StepPart[] = [
      { kind: "prefill", N: 64, P: 0 },
      { kind: "prefill", N: 32, P: 128 },
      { kind: "decode", B: 2, L: 64 },
      { kind: "decode", B: 4, L: 2048 },
    ];
    const { steps, skipped } = await measureStepShapes(model, shapes, {
      maxKvCells: 2048,
      ubatchTokens: 512,
      repeats: 2,
    });
    assert.deepEqual(
      steps.map((s) => s.shape),
      shapes.slice(0, 3),
    );
    for (const s of steps) {
      assert.equal(s.samplesMs.length, 2);
      assert.ok(s.ms > 0 && Number.isFinite(s.ms));
      // the model's compute is part of the step: timed, and never longer than the whole llama_decode
      assert.equal(s.computeSamplesMs.length, 2);
      assert.ok(s.computeMs !== null && s.computeMs > 0 && s.computeMs <= s.ms, `${s.computeMs} vs ${s.ms}`);
      // the step's time in phases, none negative, the model's compute among them
      const p = s.phasesMs;
      assert.ok(p !== null);
      assert.equal(p.compute, s.computeMs);
      for (const ms of Object.values(p)) assert.ok(ms >= 0, JSON.stringify(p));
    }
    assert.deepEqual(skipped, [
      { shape: shapes[3], why: "more KV than this run allows, or longer than the model's context" },
    ]);
  });

  it("splits a decode of several micro-batches into phases that add up to its whole time", async () => {
    const ctx = await model.createContext({ nCtx: 512, nBatch: 256, nUBatch: 64, computeTiming: true });
    try {
      const batch = new DecodeBatch(256);
      for (let p = 0; p < 200; p++) batch.add(p % model.info.nVocab, p, 0, p === 199);
      const d = await ctx.decode(batch, { sample: false });
      const p = d.phasesMs;
      assert.ok(p !== null);
      assert.equal(p.compute, d.computeMs);
      for (const ms of Object.values(p)) assert.ok(ms >= 0, JSON.stringify(p));
      const sum = p.prepare + p.inputs + p.compute + p.finish;
      assert.ok(Math.abs(sum - d.decodeMs) < 1e-9, `${sum} vs ${d.decodeMs}`);
    } finally {
      ctx.free();
    }
    const untimed = await model.createContext({ nCtx: 256 });
    try {
      const batch = new DecodeBatch(8);
      batch.add(1, 0, 0, true);
      const d = await untimed.decode(batch, { sample: false });
      assert.equal(d.phasesMs, null);
    } finally {
      untimed.free();
    }
  });
});
