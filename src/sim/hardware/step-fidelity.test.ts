import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { parseReferenceSteps, type ReferenceStep } from "../../core/profile/step-reference.js";
import { GPUS, type GpuSpec } from "./gpu-specs.js";
import { LLAMA_3_1_8B } from "./model-specs.js";
import { getRooflineModel } from "./profiles.js";
import { RooflineLatencyModel } from "./roofline-model.js";
import { rooflineSpecFor } from "./roofline-spec.js";
import { chunksOf, type Fidelity, fidelityOf } from "./step-fidelity.js";

const gpuDir = fileURLToPath(new URL("../../../../shared/calibration/gpu/", import.meta.url));
const skip = existsSync(gpuDir) ? false : `GPU step measurements not found at ${gpuDir}`;

const GPU_IDS = ["h100", "h200"] as const;
type HopperId = (typeof GPU_IDS)[number];

function measuredSteps(gpu: HopperId): ReferenceStep[] {
  return parseReferenceSteps(readFileSync(`${gpuDir}${gpu}-llama-3.1-8b-steps.jsonl`, "utf8"));
}

const percent = (error: number) => `${error >= 0 ? "+" : ""}${(error * 100).toFixed(1)}%`;

function summary(fidelity: Fidelity): string {
  const { worst } = fidelity;
  return `median |error| ${percent(fidelity.medianAbsError)}, worst ${worst.shape} ${percent(worst.error)}`;
}

function assertWithin(fidelity: Fidelity, what: string): void {
  for (const row of fidelity.rows) {
    assert.ok(Math.abs(row.error) <= 0.15, `${what}: ${row.shape} off by ${percent(row.error)}`);
  }
  assert.ok(fidelity.medianAbsError <= 0.05, `${what}: ${summary(fidelity)}`);
}

describe("the roofline step model against whole PyTorch steps of Llama-3.1-8B on H100 and H200", {
  skip,
}, () => {
  for (const gpu of GPU_IDS) {
    test(`${gpu}: every shape within 15%, the median within 5%`, (t) => {
      const fidelity = fidelityOf(getRooflineModel(gpu, "llama-3.1-8b"), measuredSteps(gpu));
      for (const row of fidelity.rows) {
        t.diagnostic(
          `${row.shape}: measured ${row.measuredMs.toFixed(2)} ms, model ${row.modelMs.toFixed(2)} ms (${percent(row.error)})`,
        );
      }
      t.diagnostic(summary(fidelity));
      assert.equal(fidelity.rows.length, 27);
      assertWithin(fidelity, gpu);
    });
  }
});

/**
 * The three efficiencies fitted to whole steps (GEMMs, attention's tensor-core work, KV reads); every other
 * number of the Hopper spec comes from datasheets and Vidur's operator profiles.
 */
const FITTED = ["matmulEfficiency", "attentionMatmulEfficiency", "kvReadEfficiency"] as const;
type Fitted = Record<(typeof FITTED)[number], number>;

function modelWith(gpu: HopperId, efficiencies: Fitted): RooflineLatencyModel {
  const spec: GpuSpec = { ...GPUS[gpu], ...efficiencies };
  return new RooflineLatencyModel(rooflineSpecFor(spec, LLAMA_3_1_8B, 1));
}

type Sample = ReferenceStep & { readonly gpu: HopperId };

/** Sum of squared log errors of the models' kernel time over the samples. */
function logLoss(efficiencies: Fitted, samples: readonly Sample[]): number {
  const models = new Map(GPU_IDS.map((gpu) => [gpu, modelWith(gpu, efficiencies)]));
  let loss = 0;
  for (const s of samples) {
    const model = models.get(s.gpu) as RooflineLatencyModel;
    const kernelMs = (model.stepS(chunksOf([s.shape])) - model.spec.stepOverheadS) * 1e3;
    loss += Math.log(kernelMs / s.ms) ** 2;
  }
  return loss;
}

interface Vertex {
  readonly x: readonly number[];
  readonly f: number;
}

/** Nelder-Mead over the logs of the fitted efficiencies, from `start` until the simplex agrees. */
function fit(samples: readonly Sample[], start: Fitted = GPUS.h100, step = 0.2): Fitted {
  const toEfficiencies = (x: readonly number[]) =>
    Object.fromEntries(FITTED.map((name, i) => [name, Math.exp(x[i] as number)])) as Fitted;
  const vertex = (x: readonly number[]): Vertex => ({ x, f: logLoss(toEfficiencies(x), samples) });
  const x0 = FITTED.map((name) => Math.log(start[name]));
  const n = x0.length;
  let simplex = [x0, ...x0.map((_, i) => x0.map((v, j) => (i === j ? v + step : v)))].map(vertex);
  for (let iteration = 0; iteration < 500; iteration++) {
    simplex.sort((a, b) => a.f - b.f);
    const best = simplex[0] as Vertex;
    const worst = simplex[n] as Vertex;
    if (worst.f - best.f < 1e-9) break;
    const centroid = x0.map(
      (_, j) => simplex.slice(0, n).reduce((sum, p) => sum + (p.x[j] as number), 0) / n,
    );
    const toward = (t: number) => vertex(centroid.map((c, j) => c + t * ((worst.x[j] as number) - c)));
    const reflected = toward(-1);
    if (reflected.f < best.f) {
      const expanded = toward(-2);
      simplex[n] = expanded.f < reflected.f ? expanded : reflected;
    } else if (reflected.f < (simplex[n - 1] as Vertex).f) {
      simplex[n] = reflected;
    } else {
      const contracted = toward(0.5);
      if (contracted.f < worst.f) simplex[n] = contracted;
      else
        simplex = simplex.map((p, i) =>
          i === 0 ? p : vertex(p.x.map((v, j) => (best.x[j] as number) + 0.5 * (v - (best.x[j] as number)))),
        );
    }
  }
  simplex.sort((a, b) => a.f - b.f);
  return toEfficiencies((simplex[0] as Vertex).x);
}

const describeFit = (e: Fitted) => FITTED.map((name) => `${name} ${e[name].toFixed(3)}`).join(", ");

describe("held out: efficiencies fitted without the steps they are checked on", { skip }, () => {
  const samples = (gpu: HopperId): Sample[] => measuredSteps(gpu).map((s) => ({ ...s, gpu }));

  test("the shipped Hopper efficiencies are the H100 file's fit, rounded", (t) => {
    const fitted = fit(samples("h100"));
    t.diagnostic(`fitted to H100: ${describeFit(fitted)}`);
    for (const name of FITTED) {
      assert.ok(Math.abs(GPUS.h100[name] / fitted[name] - 1) < 0.02, `${name}: shipped ${GPUS.h100[name]}`);
    }
  });

  for (const [fitOn, checkOn] of [
    ["h100", "h200"],
    ["h200", "h100"],
  ] as const) {
    test(`fitted to ${fitOn} alone, ${checkOn} within 15% and its median within 5%`, (t) => {
      const fitted = fit(samples(fitOn));
      const fidelity = fidelityOf(modelWith(checkOn, fitted), measuredSteps(checkOn));
      t.diagnostic(`fitted to ${fitOn}: ${describeFit(fitted)}; ${checkOn}: ${summary(fidelity)}`);
      assertWithin(fidelity, `${checkOn} from ${fitOn}'s fit`);
    });
  }

  test("each shape priced by efficiencies fitted to the other shapes of both files", (t) => {
    const all = [...samples("h100"), ...samples("h200")];
    const both = fit(all);
    const shapes = [...new Set(all.map((s) => JSON.stringify(s.shape)))];
    const errors: number[] = [];
    for (const shape of shapes) {
      const fitted = fit(
        all.filter((s) => JSON.stringify(s.shape) !== shape),
        both,
        0.05,
      );
      for (const gpu of GPU_IDS) {
        const step = all.find((s) => s.gpu === gpu && JSON.stringify(s.shape) === shape) as Sample;
        const [row] = fidelityOf(modelWith(gpu, fitted), [step]).rows;
        errors.push(Math.abs((row as { error: number }).error));
        assert.ok(
          Math.abs((row as { error: number }).error) <= 0.15,
          `${gpu} ${shape}: ${percent(row?.error ?? 0)}`,
        );
      }
    }
    errors.sort((a, b) => a - b);
    const median = ((errors[errors.length / 2 - 1] as number) + (errors[errors.length / 2] as number)) / 2;
    t.diagnostic(
      `${shapes.length} shapes left out one at a time: median |error| ${percent(median)}, worst ${percent(errors[errors.length - 1] as number)}`,
    );
    assert.ok(median <= 0.05, `held-out median ${percent(median)}`);
  });
});

describe("fidelity against reference steps", () => {
  test("the median error is the middle row's, or the mean of the two middle ones", () => {
    const model = getRooflineModel("h100", "llama-3.1-8b");
    const at = (shape: ReferenceStep["shape"], error: number): ReferenceStep => ({
      shape,
      ms: ((model.stepS(chunksOf([shape])) - model.spec.stepOverheadS) * 1e3) / (1 + error),
    });
    const steps = [
      at({ kind: "decode", B: 4, L: 100 }, 0.1),
      at({ kind: "prefill", N: 100, P: 0 }, -0.02),
      at({ kind: "decode", B: 64, L: 5000 }, 0.04),
    ];
    const odd = fidelityOf(model, steps);
    assert.ok(Math.abs(odd.medianAbsError - 0.04) < 1e-12);
    assert.equal(odd.worst.shape, "decode 4 x 100");
    const even = fidelityOf(model, [...steps, at({ kind: "prefill", N: 2000, P: 9000 }, -0.2)]);
    assert.ok(Math.abs(even.medianAbsError - 0.07) < 1e-12);
    assert.equal(even.worst.shape, "prefill 2000 after 9000");
    assert.throws(() => fidelityOf(model, []), /no prefill or decode steps/);
  });
});
