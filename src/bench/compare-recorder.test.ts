import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { LogEntry } from "../analysis/recorder/recorder-report.js";
import type { BenchRun, ProgramResult } from "./bench-metrics.js";
import { checkRecorderEntries } from "./compare-recorder.js";

function result(id: string, turns: number, jct: number | null): ProgramResult {
  return {
    id,
    trace_id: id,
    status: jct === null ? "failed" : "completed",
    turns,
    turns_done: turns,
    arrival_s: 0,
    start_s: 0,
    end_s: jct,
    jct_s: jct,
    error: null,
  };
}

const run = (programs: ProgramResult[]) => ({ label: "r", program_results: programs }) as unknown as BenchRun;

/** A program's requests as the recorder logs them: arrival, admission, departure per turn. */
function entries(programId: string, startS: number, turns: number, turnS: number): LogEntry[] {
  return Array.from({ length: turns }, (_, i) => {
    const requestId = `${programId}-${i}`;
    const t = startS + i * turnS;
    return [
      { kind: "arrival", programId, requestId, timeS: t },
      { kind: "waiting_to_running", programId, requestId, timeS: t, promptTokens: 10, hitTokens: 0 },
      { kind: "departure", programId, requestId, timeS: t + turnS * 0.9 },
    ] as LogEntry[];
  }).flat();
}

describe("bench run vs recorder export", () => {
  test("matching programs pass; JCT differences are reported", () => {
    // recorder JCT of a: 2 * 1 + 0.9 = 2.9 s; the client saw 2.95 s
    const check = checkRecorderEntries(run([result("a", 3, 2.95), result("f", 2, null)]), [
      ...entries("a", 100, 3, 1),
      ...entries("other", 100, 1, 1),
    ]);
    assert.ok(check.ok, check.problems.join("; "));
    assert.equal(check.checked, 1);
    assert.equal(check.recorderPrograms, 2);
    assert.ok(Math.abs(check.jctDiffS.mean - 0.05) < 1e-9);
  });

  test("missing programs, turn-count and JCT mismatches are problems", () => {
    const check = checkRecorderEntries(
      run([result("missing", 2, 1), result("short", 3, 2.9), result("slow", 2, 5)]),
      [...entries("short", 0, 2, 1), ...entries("slow", 0, 2, 1)],
      { toleranceS: 0.5, toleranceRel: 0.05 },
    );
    assert.equal(check.ok, false);
    assert.equal(check.matched, 0);
    assert.equal(check.problems.length, 3);
    assert.match(check.problems[0]!, /missing: not in the recorder export/);
    assert.match(check.problems[1]!, /short: 3 turns sent but 2 finished requests recorded/);
    assert.match(check.problems[2]!, /slow: JCT 5.000 s \(bench\) vs 1.900 s/);
  });

  test("a run without completed programs cannot be checked", () => {
    const check = checkRecorderEntries(run([result("f", 2, null)]), []);
    assert.equal(check.ok, false);
    assert.throws(() => checkRecorderEntries({ label: "x" } as BenchRun, []), /save it with --out/);
  });
});
