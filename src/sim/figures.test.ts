import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { buildFigure, type Panel, panelComparisons } from "./figures.js";
import type { PointResult } from "./simulate.js";

const result = (mean: number) => ({ jct: { mean } }) as unknown as PointResult;

describe("panelComparisons", () => {
  it("names every policy that beats ours and the loads where it does, and the loads where all tie", () => {
    const figure = buildFigure("fig15", { programs: 10, seed: 1 });
    const panel = figure.panels[0] as Panel;
    // fig15: vllm-offload, autellix-offload, infercept, cachettl-offload (ours) at five loads
    const means: Record<string, number[]> = {
      "vllm-offload": [10, 10.1, 30, 60, 90],
      "autellix-offload": [10, 10.1, 25, 50, 80],
      infercept: [10, 10.1, 18, 35, 50],
      "cachettl-offload": [10, 10, 20, 40, 45],
    };
    const xs = [...new Set(panel.jobs.map((j) => j.x))];
    const results = panel.jobs.map((j) => result(means[j.job.policy]?.[xs.indexOf(j.x)] as number));
    const { comparisons, tiedXs } = panelComparisons(panel, results, "mean");
    const infercept = comparisons.find((c) => c.policy === "infercept");
    assert.deepEqual(infercept?.losses, [xs[2], xs[3]]);
    assert.deepEqual(infercept?.wins, [xs[4]]);
    assert.deepEqual(comparisons.find((c) => c.policy === "vllm-offload")?.losses, []);
    assert.deepEqual(tiedXs, [xs[0], xs[1]]);
  });
});
