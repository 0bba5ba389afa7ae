import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { runContinuum } from "../test-support/run-cli.js";

/** A Weka session: 5 calls whose prompts grow by 2048 tokens (32 ids of 64 tokens), a subagent after the second. */
function weka(id: string) {
  const call = (i: number, first = 1) => ({
    t: i * 4,
    type: "n",
    model: "m",
    in: (i + 1) * 2048,
    out: 40,
    hash_ids: Array.from({ length: (i + 1) * 32 }, (_, k) => first + k),
    stop: "tool_use",
    api_time: 2,
    think_time: 1,
  });
  return {
    id,
    models: ["m"],
    block_size: 64,
    hash_id_scope: "local",
    requests: [
      call(0),
      call(1),
      {
        t: 5,
        type: "subagent",
        agent_id: "a",
        subagent_type: "Explore",
        status: "completed",
        models: ["m"],
        requests: [call(1, 1000), call(2, 1000)].map((c) => ({ ...c, t: c.t + 5 })),
      },
      call(2),
      call(3),
      call(4),
    ],
  };
}

function traces(): string {
  const dir = mkdtempSync(join(tmpdir(), "continuum-closed-loop-"));
  writeFileSync(join(dir, "a.json"), JSON.stringify(weka("a")));
  writeFileSync(join(dir, "b.json"), JSON.stringify(weka("b")));
  return dir;
}

const common = ["--hardware", "h100", "--model", "llama-3.1-8b", "--threads", "1", "--duration", "120"];

describe("continuum simulate --concurrency (closed-loop replay)", () => {
  it("prints AgentX's metrics per policy, as a table, as JSON and as a report with the TPGS chart", async () => {
    const dir = traces();
    const report = join(dir, "report.html");
    const args = [
      "simulate",
      "--trace",
      dir,
      "--concurrency",
      "2",
      "--policies",
      "vllm,cachettl-adaptive",
      ...common,
    ];
    const table = await runContinuum([...args, "--report", report]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stderr, /2 lanes, seed 1/);
    assert.match(table.stdout, /^policy +conc +TPGS +interact p90/m);
    assert.match(table.stdout, /^cachettl-adaptive +2 +\d+/m);
    assert.ok(existsSync(report));
    assert.match(readFileSync(report, "utf8"), /Throughput against interactivity/);
    const json = await runContinuum([...args, "--json", "--no-report"]);
    assert.equal(json.code, 0, json.stderr);
    const { results } = JSON.parse(json.stdout) as { results: Record<string, unknown>[] };
    assert.deepEqual(
      results.map((r) => r.policy),
      ["vllm", "cachettl-adaptive"],
    );
    for (const r of results) {
      for (const field of ["tpgs", "p90_interactivity", "ttft_p90_s", "prefix_hit", "theoretical_prefix_hit"])
        assert.equal(typeof r[field], "number", field);
      assert.ok((r.prefix_hit as number) <= (r.theoretical_prefix_hit as number));
    }
  });

  it("refuses session traces without --concurrency, and --concurrency without session traces", async () => {
    const dir = traces();
    const open = await runContinuum(["simulate", "--trace", dir, "--no-report", ...common]);
    assert.equal(open.code, 1);
    assert.match(open.stderr, /replay in a closed loop.*give --concurrency N/);
    const generated = await runContinuum(["simulate", "--concurrency", "2", "--no-report", ...common]);
    assert.equal(generated.code, 1);
    assert.match(generated.stderr, /--concurrency replays session traces/);
  });
});

describe("continuum capacity --concurrency", () => {
  it("finds per policy the largest concurrency meeting the interactivity floor", async () => {
    const dir = traces();
    const run = await runContinuum([
      "capacity",
      "--trace",
      dir,
      "--concurrency",
      "8",
      "--policies",
      "vllm",
      "--interactivity-floor",
      "60",
      "--json",
      "--no-report",
      ...common,
    ]);
    assert.equal(run.code, 0, run.stderr);
    const out = JSON.parse(run.stdout) as {
      results: {
        policy: string;
        concurrency: number;
        max_concurrency_meeting_floor: number;
        tpgs: number;
        p90_interactivity: number;
      }[];
      points: { concurrency: number; meets_floor: boolean; p90_interactivity: number; tpgs: number }[];
    };
    const vllm = out.results[0]!;
    assert.equal(vllm.policy, "vllm");
    const passing = out.points.filter((p) => p.meets_floor);
    const failing = out.points.filter((p) => !p.meets_floor).map((p) => p.concurrency);
    const largest = Math.max(0, ...passing.map((p) => p.concurrency));
    assert.equal(vllm.max_concurrency_meeting_floor, largest);
    if (largest < 8) assert.ok(failing.includes(largest + 1), "the next one up missed it");
    // TPGS at the floor: the best of the points that meet it
    assert.equal(vllm.tpgs, Math.max(0, ...passing.map((p) => p.tpgs)));
    assert.ok(vllm.concurrency === 0 || vllm.p90_interactivity >= 60);
  });
});
