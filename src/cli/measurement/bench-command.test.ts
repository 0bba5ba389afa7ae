/** `continuum bench compare` / `check-recorder` wired as main.ts registers commands. */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { Command } from "commander";
import { type BenchRun, summarizeReplay } from "../../bench/bench-metrics.js";
import type { ProgramRecord, ReplayRecords } from "../../bench/replay/replay-runner.js";
import { eventToLine, type RecorderEvent } from "../../core/recorder/events.js";
import { benchCommand } from "./bench-command.js";

function records(ids: string[]): ReplayRecords {
  const programs: ProgramRecord[] = ids.map((id, i) => ({
    id,
    traceId: id,
    turns: 1,
    turnsDone: 1,
    arrivalS: i,
    startS: i,
    endS: i + 1.5,
    status: "completed",
    error: null,
    errorMessage: null,
  }));
  return { programs, requests: [], tools: [], wallS: ids.length + 1 };
}

function runOf(label: string, ids: string[]): BenchRun {
  const info = { label, url: "http://127.0.0.1:1/", api: "chat", model: "m", jps: 1, seed: 1, settings: [] };
  return summarizeReplay(info, records(ids));
}

async function cli(args: string[]): Promise<void> {
  const root = new Command("continuum").addCommand(benchCommand()).exitOverride();
  await root.parseAsync(["node", "continuum", ...args]);
}

describe("bench CLI subcommands", () => {
  test("compare merges saved runs; check-recorder accepts a matching export and flags a bad one", async () => {
    const dir = await mkdtemp(join(tmpdir(), "bench-cli-"));
    try {
      const a = join(dir, "a.json");
      const b = join(dir, "b.json");
      writeFileSync(a, JSON.stringify({ runs: [runOf("A", ["p1", "p2"])] }));
      writeFileSync(b, JSON.stringify({ runs: [runOf("B", ["q1"])] }));
      const html = join(dir, "out.html");
      const merged = join(dir, "merged.json");
      await cli(["bench", "compare", a, b, "--report", html, "--out", merged, "--title", "A vs B"]);
      assert.ok(readFileSync(html, "utf8").includes("A vs B"));
      const runs = (JSON.parse(readFileSync(merged, "utf8")) as { runs: BenchRun[] }).runs;
      assert.deepEqual(
        runs.map((r) => r.label),
        ["A", "B"],
      );
      assert.equal(runs[0]!.program_results!.length, 2);

      const events: RecorderEvent[] = ["p1", "p2"].flatMap((programId, i) => [
        { kind: "arrival", programId, requestId: `${programId}-0`, timeS: 10 + i },
        { kind: "departure", programId, requestId: `${programId}-0`, timeS: 11.45 + i, outputTokens: 4 },
      ]);
      const record = join(dir, "record.jsonl");
      writeFileSync(record, events.map((e) => `${eventToLine(e)}\n`).join(""));
      const before = process.exitCode;
      try {
        await cli(["bench", "check-recorder", a, record, "--tolerance-s", "0.1"]);
        assert.ok(!process.exitCode, "A matches");
        await cli(["bench", "check-recorder", merged, record, "--run", "B"]);
        assert.equal(process.exitCode, 1, "B's program is not in the export");
      } finally {
        process.exitCode = before;
      }
      assert.ok(!existsSync(join(dir, "continuum-report.html")));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
