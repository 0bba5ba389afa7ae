import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { TraceProgram } from "./trace.js";
import { parseTraceJsonl, serializeTraceJsonl } from "./trace.js";
import { traceStats } from "./trace-stats.js";
import { repeatTurns, scaleTokens, scaleToolTime, truncateContext } from "./transforms.js";

const program: TraceProgram = {
  id: "p",
  turns: [
    { input: 1000, cached: 0, output: 100, tool: "grep", toolS: 0.5 },
    { input: 3000, cached: 1100, output: 3, tool: "python", toolS: 2 },
    { input: 5000, cached: 3003, output: 200, tool: null, toolS: null },
  ],
};

/** Valid per the trace format: parse(serialize) accepts it. */
const assertValid = (programs: TraceProgram[]) =>
  assert.deepEqual(parseTraceJsonl(serializeTraceJsonl(programs)), programs);

describe("scaleTokens", () => {
  it("scales all token counts and keeps at least one output token", () => {
    const [scaled] = scaleTokens([program], 0.1);
    assert.deepEqual(
      scaled!.turns.map((t) => [t.input, t.cached, t.output]),
      [
        [100, 0, 10],
        [300, 110, 1],
        [500, 300, 20],
      ],
    );
    assertValid([scaled!]);
  });

  it("never lets the cached part exceed the prompt or what the previous request held", () => {
    const odd: TraceProgram = {
      id: "o",
      turns: [
        { input: 3, cached: 0, output: 1, tool: "ls", toolS: 1 },
        { input: 5, cached: 4, output: 1, tool: null, toolS: null },
      ],
    };
    const [scaled] = scaleTokens([odd], 1 / 3);
    const [a, b] = scaled!.turns;
    assert.ok(b!.cached <= a!.input + a!.output && b!.cached <= b!.input);
    assert.throws(() => scaleTokens([odd], 0), /positive/);
  });
});

describe("scaleToolTime", () => {
  it("multiplies tool times and leaves the last turn's null", () => {
    const [scaled] = scaleToolTime([program], 3);
    assert.deepEqual(
      scaled!.turns.map((t) => t.toolS),
      [1.5, 6, null],
    );
  });
});

describe("repeatTurns", () => {
  it("repeats the turns with tokens scaled down, ending near the original context", () => {
    const [repeated] = repeatTurns([program], 2);
    const turns = repeated!.turns;
    assert.equal(turns.length, 6);
    assertValid([repeated!]);
    const finalContext = turns.at(-1)!.input + turns.at(-1)!.output;
    assert.ok(Math.abs(finalContext - (5000 + 200)) <= 2, `final context ${finalContext}`);
    assert.deepEqual(
      turns.map((t) => t.tool),
      ["grep", "python", "python", "grep", "python", null],
    );
    assert.equal(turns[2]!.toolS, 2);
  });

  it("continues the conversation: each pass starts on the previous pass's whole context", () => {
    const [repeated] = repeatTurns([program], 3);
    const turns = repeated!.turns;
    for (const start of [3, 6]) {
      const prev = turns[start - 1]!;
      assert.equal(turns[start]!.cached, prev.input + prev.output);
      assert.ok(turns[start]!.input > turns[start]!.cached);
    }
    // Within a pass, reuse matches the original's (scaled) reuse, shifted by the earlier context.
    assert.equal(turns[4]!.cached - turns[3]!.cached, turns[1]!.cached - turns[0]!.cached);
  });

  it("raises reuse across passes, is the identity for 1 and rejects fractions", () => {
    const before = traceStats([program]).reusableFraction;
    const after = traceStats(repeatTurns([program], 4)).reusableFraction;
    assert.ok(after > before, "later passes reuse the earlier passes' context");
    assert.deepEqual(repeatTurns([program], 1), [program]);
    assert.throws(() => repeatTurns([program], 1.5), /integer/);
  });
});

describe("truncateContext", () => {
  it("cuts programs at their first request that does not fit and drops those that never fit", () => {
    const small: TraceProgram = {
      id: "s",
      turns: [{ input: 10, cached: 0, output: 1, tool: null, toolS: null }],
    };
    const result = truncateContext([program, small], 3100);
    assert.equal(result.truncatedPrograms, 1);
    assert.equal(result.droppedPrograms, 0);
    assert.equal(result.droppedTurns, 1);
    assert.deepEqual(
      result.programs.map((p) => p.turns.length),
      [2, 1],
    );
    assertValid(result.programs);

    const none = truncateContext([program, small], 1000);
    assert.deepEqual(
      [none.programs.map((p) => p.id), none.droppedPrograms, none.droppedTurns],
      [["s"], 1, 3],
    );
    assert.equal(truncateContext([program], 5200).programs[0], program);
  });
});
