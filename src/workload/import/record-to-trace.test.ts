import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { eventToLine, type RecorderEvent } from "../../core/recorder/events.js";
import { parseTraceJsonl, serializeTraceJsonl } from "../trace.js";
import { recordFileToTrace, recordToTrace } from "./record-to-trace.js";

/** The events of one request served without trouble: arrival, admission, departure. */
function served(
  programId: string,
  requestId: string,
  arrivalS: number,
  prompt: number,
  departureS: number,
  output: number,
): RecorderEvent[] {
  const base = { programId, requestId };
  return [
    { ...base, kind: "arrival", timeS: arrivalS },
    { ...base, kind: "waiting_to_running", timeS: arrivalS, promptTokens: prompt, hitTokens: 0 },
    { ...base, kind: "departure", timeS: departureS, outputTokens: output },
  ];
}

const byTime = (events: RecorderEvent[]) => [...events].sort((a, b) => a.timeS - b.timeS);

describe("recordToTrace", () => {
  it("makes each program's requests its turns: tool_s the gap; without a recorded prefix, cached append-only", async () => {
    const { programs, skips } = await recordToTrace(
      byTime([
        ...served("p", "r0", 0, 100, 2, 10),
        ...served("p", "r1", 5, 150, 6, 20),
        // The harness dropped a reminder: the prompt shrank, so all of it is credited as reusable.
        ...served("p", "r2", 6.5, 160, 8, 5),
      ]),
    );
    assert.deepEqual(programs, [
      {
        id: "p",
        turns: [
          { input: 100, cached: 0, output: 10, tool: "unknown", toolS: 3 },
          { input: 150, cached: 110, output: 20, tool: "unknown", toolS: 0.5 },
          { input: 160, cached: 160, output: 5, tool: null, toolS: null },
        ],
      },
    ]);
    assert.deepEqual(skips, {
      anonymousRequests: 0,
      abortedRequests: 0,
      sideRequests: 0,
      unfinishedPrograms: 0,
      programsWithoutTurns: 0,
      overlappingTurns: 0,
      assumedReuse: 2,
    });
  });

  it("takes cached from the reusable prefix the arrival recorded, capped at input", async () => {
    const withReusable = (events: RecorderEvent[], reusableTokens: number) =>
      events.map((e) => (e.kind === "arrival" ? { ...e, reusableTokens } : e));
    const { programs } = await recordToTrace(
      byTime([
        ...served("p", "r0", 0, 100, 2, 10),
        // The harness edited its history: 64 of the previous 110 tokens are still its prompt's prefix.
        ...withReusable(served("p", "r1", 5, 150, 6, 20), 64),
        // A measure beyond the prompt (none the scheduler writes) is capped.
        ...withReusable(served("p", "r2", 6.5, 160, 8, 5), 176),
        // A turn without the measure (an older log's) falls back to the append-only assumption.
        ...served("p", "r3", 9, 200, 10, 5),
      ]),
    );
    assert.deepEqual(
      programs[0]!.turns.map((t) => [t.input, t.cached]),
      [
        [100, 0],
        [150, 64],
        [160, 160],
        [200, 165],
      ],
    );
  });

  it("takes the prompt of the first admission, not of a re-admission after preemption", async () => {
    const base = { programId: "p", requestId: "r0" };
    const { programs } = await recordToTrace([
      { ...base, kind: "arrival", timeS: 0 },
      { ...base, kind: "waiting_to_running", timeS: 0, promptTokens: 100, hitTokens: 0 },
      { ...base, kind: "preempted", timeS: 1 },
      { ...base, kind: "evicted_to_running", timeS: 2, promptTokens: 130, hitTokens: 0 },
      { ...base, kind: "departure", timeS: 3, outputTokens: 40 },
    ]);
    assert.deepEqual(programs[0]!.turns, [{ input: 100, cached: 0, output: 40, tool: null, toolS: null }]);
  });

  it("keeps the tool each departure names, and leaves a side request out of the turns", async () => {
    const title = served("p", "title", 0.5, 30, 0.9, 8);
    const departure = title[2]!;
    const { programs, skips } = await recordToTrace(
      byTime([
        ...served("p", "r0", 0, 100, 2, 10).map((e) => (e.kind === "departure" ? { ...e, tool: "bash" } : e)),
        ...title.slice(0, 2),
        { ...departure, kind: "departure", side: true } as RecorderEvent,
        ...served("p", "r1", 5, 150, 6, 20),
      ]),
    );
    assert.deepEqual(programs[0]!.turns, [
      { input: 100, cached: 0, output: 10, tool: "bash", toolS: 3 },
      { input: 150, cached: 110, output: 20, tool: null, toolS: null },
    ]);
    assert.equal(skips.sideRequests, 1);
  });

  it("leaves out anonymous and aborted requests and unfinished programs, and says so", async () => {
    const events = byTime([
      ...served("anonymous:x", "x", 0, 50, 1, 5),
      // An aborted retry between two turns of a: dropped, its time falls into the gap.
      ...served("a", "a0", 0, 100, 1, 10),
      { programId: "a", requestId: "a1", kind: "arrival", timeS: 2 },
      { programId: "a", requestId: "a1", kind: "aborted", timeS: 3 },
      ...served("a", "a2", 4, 120, 5, 10),
      // b's second turn was still running when the log ended.
      ...served("b", "b0", 0, 100, 1, 10),
      { programId: "b", requestId: "b1", kind: "arrival", timeS: 2 },
      // c's only request was aborted.
      { programId: "c", requestId: "c0", kind: "arrival", timeS: 0 },
      { programId: "c", requestId: "c0", kind: "aborted", timeS: 1 },
      // d sent its second request before the first departed.
      ...served("d", "d0", 0, 100, 3, 10),
      ...served("d", "d1", 2, 100, 4, 10),
    ]);
    const { programs, skips } = await recordToTrace(events);
    assert.deepEqual(
      programs.map((p) => [p.id, p.turns.map((t) => t.toolS)]),
      [
        ["a", [3, null]],
        ["d", [0, null]],
      ],
    );
    assert.deepEqual(skips, {
      anonymousRequests: 1,
      abortedRequests: 2,
      sideRequests: 0,
      unfinishedPrograms: 1,
      programsWithoutTurns: 1,
      overlappingTurns: 1,
      assumedReuse: 2,
    });
  });

  it("refuses a departure whose admission the log lacks", async () => {
    await assert.rejects(
      recordToTrace([
        { programId: "p", requestId: "r0", kind: "arrival", timeS: 0 },
        { programId: "p", requestId: "r0", kind: "departure", timeS: 1, outputTokens: 3 },
      ]),
      /request r0 of program p departed without an admission/,
    );
  });

  it("writes a trace the loader reads back", async () => {
    const { programs } = await recordToTrace(
      byTime([...served("p", "r0", 0, 100, 2, 10), ...served("p", "r1", 2.25, 150, 3, 20)]),
    );
    assert.deepEqual(parseTraceJsonl(serializeTraceJsonl(programs)), programs);
  });
});

describe("recordFileToTrace", () => {
  const dir = mkdtempSync(join(tmpdir(), "record-to-trace-"));

  it("reads a JSONL event log", async () => {
    const path = join(dir, "events.jsonl");
    writeFileSync(
      path,
      served("p", "r0", 0, 100, 2, 10)
        .map((e) => `${eventToLine(e)}\n`)
        .join(""),
    );
    const { programs } = await recordFileToTrace(path);
    assert.equal(programs[0]!.turns[0]!.output, 10);
  });

  it("refuses the fork's scheduler_timestamps and a trace, which are no event logs of ours", async () => {
    const fork = join(dir, "scheduler_timestamps");
    writeFileSync(fork, JSON.stringify({ job: [{ Request_arrival_time: 1 }] }, null, 2));
    await assert.rejects(recordFileToTrace(fork), /not a scheduler event log.*records no output lengths/);
    const trace = join(dir, "trace.jsonl");
    writeFileSync(
      trace,
      serializeTraceJsonl([
        { id: "p", turns: [{ input: 1, cached: 0, output: 1, tool: null, toolS: null }] },
      ]),
    );
    await assert.rejects(recordFileToTrace(trace), /trace\.jsonl: not a scheduler event log/);
  });
});
