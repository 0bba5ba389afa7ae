import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { eventFromLine, eventToLine, type RecorderEvent } from "./events.js";

const at = { programId: "job_1", requestId: "r1", timeS: 12.5 };

const everyKind: RecorderEvent[] = [
  { ...at, kind: "arrival" },
  { ...at, kind: "arrival", reusableTokens: 3792 },
  { ...at, kind: "arrival", reusableTokens: 0 },
  { ...at, kind: "waiting_to_running", promptTokens: 4096, hitTokens: 3800 },
  { ...at, kind: "evicted_to_running", promptTokens: 4096, hitTokens: 0 },
  { ...at, kind: "preempted" },
  { ...at, kind: "departure", outputTokens: 128 },
  { ...at, kind: "departure", outputTokens: 64, tool: "str_replace_editor" },
  { ...at, kind: "departure", outputTokens: 9, side: true },
  { ...at, kind: "pinned", ttlS: 2 },
  { ...at, kind: "unpinned", reason: "last_step" },
  { ...at, kind: "evicted", tokens: 4224 },
  { ...at, kind: "offloaded", tokens: 4224, tier: "cpu" },
  { ...at, kind: "reloaded", tokens: 4224, tier: "disk" },
  { ...at, kind: "aborted" },
];

describe("recorder event lines", () => {
  it("writes compact JSON with the fork's field names", () => {
    const line = eventToLine({ ...at, kind: "waiting_to_running", promptTokens: 4096, hitTokens: 3800 });
    assert.equal(
      line,
      '{"t":12.5,"program":"job_1","request":"r1","event":"waiting_to_running","prompt_length":4096,"hit_length":3800}',
    );
  });

  it("writes an arrival's reusable prefix as reusable_length, and reads a log without it", () => {
    const line = eventToLine({ ...at, kind: "arrival", reusableTokens: 3792 });
    assert.equal(
      line,
      '{"t":12.5,"program":"job_1","request":"r1","event":"arrival","reusable_length":3792}',
    );
    assert.deepEqual(eventFromLine('{"t":12.5,"program":"job_1","request":"r1","event":"arrival"}'), {
      ...at,
      kind: "arrival",
    });
  });

  it("round-trips every event kind", () => {
    for (const event of everyKind) assert.deepEqual(eventFromLine(eventToLine(event)), event);
  });

  it("rejects lines that are not valid events, naming the problem", () => {
    const bad = [
      '{"t":1,"program":"a","request":"r","event":"waiting_to_running","prompt_length":10}',
      '{"t":1,"program":"a","request":"r","event":"evicted","tokens":-5}',
      '{"t":1,"program":"a","request":"r","event":"teleported"}',
      '{"t":1,"program":"a","request":"r","event":"unpinned","reason":"bored"}',
      '{"program":"a","request":"r","event":"arrival"}',
      '{"t":1,"program":"a","request":"r","event":"arrival","reusable_length":-16}',
      '{"t":1,"program":"a","request":"r","event":"arrival","reusable_length":"32"}',
    ];
    for (const line of bad) assert.throws(() => eventFromLine(line), /invalid recorder event/, line);
    assert.throws(() => eventFromLine("{not json"), SyntaxError);
  });
});
