import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { smoothUsage } from "./report-charts.js";
import { type ReportRun, renderReportHtml } from "./report-html.js";
import { seriesStyles } from "./series-style.js";

function run(label: string, jps: number, meanJct: number, extra: Partial<ReportRun> = {}): ReportRun {
  return {
    label,
    jps,
    jct: { mean: meanJct, p50: meanJct, p90: meanJct * 1.5, p95: meanJct * 1.6, p99: meanJct * 2 },
    throughputJps: jps,
    hitRatio: 0.5,
    completed: 10,
    programs: 10,
    jcts: [meanJct * 0.5, meanJct, meanJct * 1.5],
    kvUsage: Array.from({ length: 500 }, (_, i) => ({ timeS: i, used: (i % 2) * 0.8, pinned: 0.1 })),
    ...extra,
  };
}

const LOADS = [0.05, 0.15, 0.35];
const LONG = "cachettl-adaptive:holding-memory";
const runs = LOADS.flatMap((jps, i) => [
  run("vllm", jps, 100 * (i + 1)),
  run("cachettl", jps, 50 * (i + 1)),
  run(LONG, jps, 200 * (i + 1), { completed: i === 2 ? 8 : 10 }),
]);

describe("the simulation report", () => {
  it("puts the JCT-vs-load chart and each run's ratio to the baseline before any table", async () => {
    const html = await renderReportHtml({ title: "sweep", settings: ["seed 7"], runs });
    const chart = html.indexOf("<svg");
    assert.ok(chart > 0 && chart < html.indexOf("<table"), "the headline chart comes first");
    assert.match(html, /Mean job completion time vs load/);
    assert.match(html, /<td class="win">2\.00×<\/td>/, "cachettl halves vllm's JCT: a win of 2x");
    assert.match(html, /<td class="loss">0\.50×\*<\/td>/, "losses are printed too, unfinished runs starred");
    assert.match(html, /vllm \(baseline\)/);
    assert.ok(html.indexOf("All runs</h2>") < html.indexOf("<h2>Settings</h2>"));
    assert.match(html, /<li>seed 7<\/li>/);
  });

  it("names a run without an arrival rate (a batch) in its load cells instead of printing 0", async () => {
    const batch = [run("vllm", 0, 100), run("cachettl", 0, 50)];
    const html = await renderReportHtml({ title: "a batch", settings: [], runs: batch });
    const fullTable = html.slice(html.indexOf("All runs</h2>"));
    assert.match(fullTable, /vllm<\/td><td>all programs<\/td>/);
    assert.doesNotMatch(fullTable, /vllm<\/td><td>0<\/td>/);
  });

  it("marks every load point on the x axis and prints legend labels in full", async () => {
    const html = await renderReportHtml({ title: "sweep", settings: [], runs });
    for (const load of LOADS) assert.ok(html.includes(`>${load}</text>`), `tick at ${load}`);
    assert.ok(html.includes(`>${LONG}</text>`), "the long policy name is not cut in the legend");
  });

  it("gives each policy its own colour, marker and dash, even for identical curves", () => {
    const labels = ["vllm", "cachettl", "continuum-heuristic", "infercept", "program-fcfs", "static-ttl"];
    const styles = [...seriesStyles(labels).values()];
    for (const key of ["colour", "marker"] as const) {
      assert.equal(new Set(styles.map((s) => s[key])).size, labels.length, `distinct ${key}s`);
    }
  });

  it("draws the KV cache as one small chart per policy, smoothed", async () => {
    const html = await renderReportHtml({ title: "sweep", settings: [], runs });
    assert.match(html, /one panel per run/);
    for (const label of ["vllm", "cachettl", LONG]) {
      assert.ok(html.includes(`>${label}</text>`), `a panel titled ${label}`);
    }
    const smoothed = smoothUsage(runs[0]?.kvUsage ?? [], 50);
    assert.equal(smoothed.length, 50);
    for (const s of smoothed) assert.ok(Math.abs(s.used - 0.4) < 1e-9, "alternating 0/0.8 averages to 0.4");
  });

  it("compares each panel of a figure with that panel's own baseline on its own axis", async () => {
    const panelRuns = [
      { ...run("vllm-offload", 16, 80), group: "max-num-seqs" },
      { ...run("infercept", 16, 40), group: "max-num-seqs" },
      { ...run("vllm-offload", 64, 90), group: "max-num-seqs" },
      { ...run("infercept", 64, 45), group: "max-num-seqs" },
    ];
    const html = await renderReportHtml({
      title: "fig",
      settings: [],
      runs: panelRuns,
      panels: new Map([["max-num-seqs", { baseline: "vllm-offload", xTitle: "max-num-seqs" }]]),
    });
    assert.match(html, /<h2>max-num-seqs<\/h2>/);
    assert.match(html, /vllm-offload \(baseline\)/);
    assert.match(html, /<th>max-num-seqs<\/th><th>16<\/th><th>64<\/th>/);
    assert.match(html, /<td class="win">2\.00×<\/td>/);
  });

  it("marks loads past the simulator's ceiling on the chart, in both tables, and warns on their ratios", async () => {
    const ceiling = { jps: 0.1, fullBatchJps: 0.12 };
    const html = await renderReportHtml({ title: "sweep", settings: [], runs, ceiling });
    assert.match(html, /<th>0\.05<\/th><th class="past">0\.15 ⚠<\/th><th class="past">0\.35 ⚠<\/th>/);
    assert.match(html, /<td class="win">2\.00×<\/td>/, "a ratio below the ceiling carries no warning");
    assert.match(html, /<td class="win past">2\.00× ⚠<\/td>/, "past it, the same ratio does");
    assert.match(
      html,
      /<p class="warning">⚠ 0\.15, 0\.35 jobs\/s are past the simulator's ceiling for this setup \(0\.100 jobs\/s/,
    );
    assert.match(
      html,
      />simulator's ceiling 0\.100 jobs\/s ⚠<\/text>/,
      "the chart names the ceiling where it shades",
    );
    assert.equal(
      html.match(/<td>0\.35 ⚠ past the ceiling<\/td>/g)?.length,
      3,
      "every run at that load, in the full table",
    );
    const below = await renderReportHtml({
      title: "sweep",
      settings: [],
      runs,
      ceiling: { jps: 1, fullBatchJps: 1 },
    });
    assert.doesNotMatch(below, /⚠|past the ceiling/, "loads within the ceiling are not marked");
  });
});
