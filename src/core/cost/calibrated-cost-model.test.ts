import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Rng } from "../rng.js";
import { anyDouble } from "../test-support/arbitraries.js";
import fc from "../test-support/fast-check.js";
import { CalibratedCostModel, type StepChunk, type StepPrice } from "./calibrated-cost-model.js";
import { quadraticCostModel } from "./cost-model.js";

const PRIOR = quadraticCostModel({
  prefillQuadratic: { a: 0, b: 2e-4, c: 0.005 },
  kvBytesPerToken: 1000,
  reloadBandwidthBps: { cpu: 4e9 },
});
const CHUNK = 512;

function stepS(price: StepPrice, chunks: readonly StepChunk[]): number {
  let s = price.perStepS;
  for (const [rows, context] of chunks) {
    s += price.perRowS * rows + price.perCellS * (rows * context + (rows * (rows + 1)) / 2);
  }
  return s;
}

/** A serving run: prompts prefilled in chunks after a cached prefix, then decoded a few sequences at a time. */
function observeServing(
  model: CalibratedCostModel,
  price: StepPrice,
  prompts: number,
  rng: Rng,
  noise = 0.05,
) {
  const observe = (chunks: StepChunk[]) =>
    model.observe(chunks, stepS(price, chunks) * (1 + noise * (2 * rng.next() - 1)));
  for (let p = 0; p < prompts; p++) {
    let context = rng.int(0, 3000);
    let left = rng.int(40, 2000);
    while (left > 0) {
      const rows = Math.min(CHUNK, left);
      observe([[rows, context]]);
      context += rows;
      left -= rows;
    }
    for (let t = 0; t < 20; t++) {
      observe(Array.from({ length: rng.int(1, 4) }, (): StepChunk => [1, context + t]));
    }
  }
}

describe("CalibratedCostModel", () => {
  const truth: StepPrice = { perStepS: 0.006, perRowS: 0.001, perCellS: 2e-8 };
  const truePrefillS = (tokens: number) =>
    truth.perStepS * Math.ceil(tokens / CHUNK) +
    truth.perRowS * tokens +
    (truth.perCellS * tokens * (tokens + 1)) / 2;

  it("prices prefill as the prior until it has seen enough prefill steps", () => {
    const model = new CalibratedCostModel(PRIOR, CHUNK);
    observeServing(model, truth, 1, new Rng(1));
    assert.equal(model.fitted, null);
    assert.equal(model.prefillS(4000), PRIOR.prefillS(4000));
  });

  it("learns what a context costs from the steps the engine ran (5x slower than the prior)", () => {
    const model = new CalibratedCostModel(PRIOR, CHUNK);
    observeServing(model, truth, 40, new Rng(2));
    for (const tokens of [300, 4000, 16000]) {
      const relative = model.prefillS(tokens) / truePrefillS(tokens);
      assert.ok(
        Math.abs(relative - 1) < 0.05,
        `${tokens} tokens: ${model.prefillS(tokens)} vs ${truePrefillS(tokens)}`,
      );
    }
    assert.ok(PRIOR.prefillS(4000) < truePrefillS(4000) / 4);
  });

  it("keeps its prefill steps when decode steps flood in", () => {
    const model = new CalibratedCostModel(PRIOR, CHUNK);
    observeServing(model, truth, 40, new Rng(3));
    for (let i = 0; i < 10_000; i++)
      model.observe([[1, 1000 + (i % 500)]], stepS(truth, [[1, 1000 + (i % 500)]]));
    const relative = model.prefillS(4000) / truePrefillS(4000);
    assert.ok(Math.abs(relative - 1) < 0.05, `relative ${relative}`);
  });

  it("prices reloads from a tier by the restores out of it, each tier apart, the prior until it saw a few", () => {
    const model = new CalibratedCostModel(PRIOR, CHUNK);
    observeServing(model, truth, 40, new Rng(4));
    assert.equal(
      model.reloadS(4000, "cpu"),
      PRIOR.reloadS(4000, "cpu"),
      "prefill steps say nothing of reloads",
    );
    // restores of 1000 and 3000 tokens at 2 us a token, 8x what the prior says (4 GB/s at 1 KB a token)
    for (let i = 0; i < 3; i++)
      model.observeReload("cpu", 1000 + 2000 * (i % 2), (1000 + 2000 * (i % 2)) * 2e-6);
    assert.equal(model.reloadS(4000, "cpu"), PRIOR.reloadS(4000, "cpu"), "three restores are not enough");
    model.observeReload("cpu", 3000, 3000 * 2e-6);
    assert.ok(Math.abs(model.reloadS(4000, "cpu") - 4000 * 2e-6) < 1e-12);
    assert.equal(model.reloadS(4000, "disk"), PRIOR.reloadS(4000, "disk"), "the disk tier was never read");
  });

  it("never fits a negative price, so longer contexts never cost less", () => {
    fc.assert(
      fc.property(
        fc.record({
          perStepS: anyDouble(0, 0.05),
          perRowS: anyDouble(0, 0.005),
          perCellS: anyDouble(0, 1e-7),
        }),
        fc.integer({ min: 1, max: 1000 }),
        anyDouble(0, 0.5),
        (price, seed, noise) => {
          const model = new CalibratedCostModel(PRIOR, CHUNK);
          observeServing(model, price, 12, new Rng(seed), noise);
          const fitted = model.fitted;
          if (fitted) for (const v of Object.values(fitted)) assert.ok(v >= 0, `negative price ${v}`);
          let previous = 0;
          for (const tokens of [1, 100, 1000, 10_000, 100_000]) {
            const s = model.prefillS(tokens);
            assert.ok(s >= previous, `${tokens} tokens cost ${s} < ${previous}`);
            previous = s;
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
