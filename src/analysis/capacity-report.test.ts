import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { axisTicks, type CapacityRow, renderCapacityHtml } from "./capacity-report.js";

const row = (policy: string, sustainable_jps: number): CapacityRow => ({
  policy,
  sustainable_jps,
  light_jct_s: 100,
  jct_at_ref_s: 200,
  p99_jct_at_ref_s: 400,
  p99_first_turn_ttft_at_ref_s: 20,
  max_first_turn_ttft_at_ref_s: 60,
  max_program_wait_at_ref_s: 75,
});

const rows = [
  row("vllm", 0.04),
  row("cachettl", 0.06),
  row("program-fcfs", 0.05),
  row("cachettl-adaptive", 0.081),
];
const html = renderCapacityHtml({
  title: "capacity",
  settings: [],
  rows,
  boundJps: 0.084,
  kvBoundJps: 0.078,
  refJps: 0.032,
  baselines: ["vllm", "cachettl", "program-fcfs"],
});

/** x of every <text> with this class, and of the two ceiling lines. */
const xsOf = (cls: string) =>
  [...html.matchAll(new RegExp(`<text x="([\\d.]+)"[^>]*class="${cls}"`, "g"))].map((m) => Number(m[1]));
const lineX = (cls: string) => Number(new RegExp(`<line x1="([\\d.]+)"[^>]*class="${cls}"`).exec(html)?.[1]);

describe("the capacity report", () => {
  it("draws a jobs/s value axis with round ticks", () => {
    assert.deepEqual(axisTicks(0.0857), [0, 0.02, 0.04, 0.06, 0.08, 0.1]);
    assert.deepEqual(axisTicks(3.2), [0, 1, 2, 3, 4]);
    assert.match(html, />sustainable load \(jobs\/s\)<\/text>/);
    for (const tick of ["0", "0.02", "0.04", "0.06", "0.08", "0.1"])
      assert.match(html, new RegExp(`class="tick">${tick}</text>`));
    const ticks = xsOf("tick");
    for (let i = 1; i < ticks.length; i++)
      assert.ok(ticks[i]! - ticks[i - 1]! > 50, "tick labels stand apart");
  });

  it("gives every bar its ratio to vllm and to the best baseline, beside the plot where no ceiling line runs", () => {
    assert.match(html, /0\.0810 jobs\/s · 2\.02× vllm · 1\.35× best baseline ⚠<\/text>/);
    assert.match(html, /0\.0400 jobs\/s · 0\.667× best baseline|0\.0400 jobs\/s · 0\.67× best baseline/);
    assert.match(
      html,
      />0\.0600 jobs\/s · 1\.50× vllm<\/text>/,
      "the best baseline is not compared with itself",
    );
    const rightmostLine = Math.max(lineX("bound"), lineX("kv"));
    for (const x of xsOf("value"))
      assert.ok(x > rightmostLine + 10, "value labels sit right of both ceilings");
    const legend = [...html.matchAll(/<text x="[\d.]+" y="([\d.]+)" class="legend">([^<]*)</g)];
    assert.deepEqual(
      legend.map((m) => m[2]),
      ["physical ceiling 0.0840 jobs/s", "with decode batches the KV pool holds 0.0780 jobs/s"],
    );
    const axisY = Number(/y="([\d.]+)" text-anchor="middle" class="axis-title"/.exec(html)?.[1]);
    for (const m of legend)
      assert.ok(Number(m[1]) > axisY, "the ceilings are named below the axis, not over the bars");
  });

  it("has both ratios in the table and flags a load past the KV-limited ceiling", () => {
    assert.match(html, /<th>\/ vllm<\/th><th>\/ best baseline \(cachettl\)<\/th>/);
    assert.match(html, /<tr><td>cachettl-adaptive ⚠<\/td><td>0\.0810<\/td><td>2\.02×<\/td><td>1\.35×<\/td>/);
    assert.match(html, /⚠ past the KV-limited ceiling/);
  });
});
