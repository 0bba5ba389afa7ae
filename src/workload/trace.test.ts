import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { loadTrace, parseTraceJsonl, serializeTraceJsonl, type TraceProgram } from "./trace.js";
import { traceStats } from "./trace-stats.js";

const REAL_TRACE = fileURLToPath(new URL("../../../shared/traces/swe-agent-lm32b.jsonl", import.meta.url));
const skipReal = existsSync(REAL_TRACE) ? false : `shared trace absent: ${REAL_TRACE}`;

const line = (turns: object[], extra: object = {}) => JSON.stringify({ id: "p", ...extra, turns });
const T = (input: number, cached: number, output: number, tool: string | null, tool_s: number | null) => ({
  input,
  cached,
  output,
  tool,
  tool_s,
});

describe("parseTraceJsonl", () => {
  it("reads turns with toolS and keeps the source", () => {
    const text = `${line([T(100, 0, 10, "grep", 0.5), T(150, 110, 20, null, null)], { source: "run1" })}\n\n`;
    assert.deepEqual(parseTraceJsonl(text), [
      {
        id: "p",
        source: "run1",
        turns: [
          { input: 100, cached: 0, output: 10, tool: "grep", toolS: 0.5 },
          { input: 150, cached: 110, output: 20, tool: null, toolS: null },
        ],
      },
    ]);
  });

  it("names a missing tool 'unknown' on turns before the last", () => {
    const [program] = parseTraceJsonl(line([T(10, 0, 1, null, 0), T(20, 11, 1, null, null)]));
    assert.equal(program!.turns[0]!.tool, "unknown");
  });

  const rejects = (text: string, pattern: RegExp) => assert.throws(() => parseTraceJsonl(text), pattern);

  it("rejects cached above input, naming line and field", () => {
    const ok = line([T(10, 0, 1, null, null)]);
    rejects(`${ok}\n${line([T(10, 0, 1, "ls", 1), T(20, 21, 1, null, null)])}`, /:2 .*turns\[1\]\.cached/);
  });

  it("rejects fractional and negative token counts", () => {
    rejects(line([T(10.5, 0, 1, null, null)]), /:1 .*turns\[0\]\.input/);
    rejects(line([T(10, 0, -1, null, null)]), /:1 .*turns\[0\]\.output/);
  });

  it("rejects a tool on the last turn and a missing tool time before it", () => {
    rejects(line([T(10, 0, 1, "ls", 0.1)]), /turns\[0\]\.tool:.*last turn/);
    rejects(line([T(10, 0, 1, "ls", null), T(20, 0, 1, null, null)]), /turns\[0\]\.tool_s/);
    rejects(line([T(10, 0, 1, "ls", -2), T(20, 0, 1, null, null)]), /turns\[0\]\.tool_s/);
  });

  it("rejects invalid JSON and programs without turns", () => {
    rejects("{nope", /trace:1: invalid JSON/);
    rejects(JSON.stringify({ id: "x", turns: [] }), /:1 \(program x\): turns/);
  });
});

describe("serializeTraceJsonl", () => {
  it("round-trips programs with and without a source", () => {
    const programs: TraceProgram[] = [
      { id: "a", source: "s", turns: [{ input: 5, cached: 0, output: 2, tool: null, toolS: null }] },
      {
        id: "b",
        turns: [
          { input: 5, cached: 0, output: 2, tool: "python", toolS: 1.25 },
          { input: 9, cached: 7, output: 3, tool: null, toolS: null },
        ],
      },
    ];
    assert.deepEqual(parseTraceJsonl(serializeTraceJsonl(programs)), programs);
  });

  it("round-trips the real trace", { skip: skipReal }, () => {
    const programs = parseTraceJsonl(readFileSync(REAL_TRACE, "utf8"));
    assert.deepEqual(parseTraceJsonl(serializeTraceJsonl(programs)), programs);
  });
});

describe("traceStats", () => {
  it("reproduces the README's figures for the real trace", { skip: skipReal }, async () => {
    const s = traceStats(await loadTrace(REAL_TRACE));
    assert.equal(s.programs, 332);
    assert.equal(s.turns.mean.toFixed(1), "26.0");
    assert.equal(s.turns.std.toFixed(1), "18.1");
    assert.equal(s.turns.median, 20);
    assert.equal(s.turns.max, 76);
    assert.equal((s.promptTokens.mean / 1000).toFixed(1), "6.1");
    assert.equal((s.promptTokens.max / 1000).toFixed(1), "36.6");
    assert.equal(Math.round(s.outputTokens.mean), 145);
    assert.equal(s.toolS.mean.toFixed(2), "0.68");
    assert.equal(s.toolS.p50.toFixed(2), "0.15");
    assert.equal(s.toolS.p90.toFixed(2), "0.40");
    assert.equal(s.toolS.p99.toFixed(2), "2.15");
    assert.equal(Math.round(s.toolS.max), 302);
    assert.equal(Math.round(s.reusableFraction * 100), 64);
    const shares = s.tools.map(({ tool, share }) => [tool, Math.round(share * 100)]);
    assert.deepEqual(shares.slice(0, 4), [
      ["str_replace_editor", 62],
      ["python", 18],
      ["grep", 12],
      ["find", 7],
    ]);
  });

  it("counts reuse over all prompt tokens and shares over tool calls", () => {
    const s = traceStats([
      {
        id: "a",
        turns: [
          { input: 100, cached: 0, output: 10, tool: "grep", toolS: 1 },
          { input: 200, cached: 110, output: 10, tool: "grep", toolS: 3 },
          { input: 300, cached: 190, output: 10, tool: "ls", toolS: 2 },
          { input: 400, cached: 300, output: 10, tool: null, toolS: null },
        ],
      },
    ]);
    assert.equal(s.reusableFraction, 600 / 1000);
    assert.deepEqual(
      s.tools.map(({ tool, share }) => [tool, share]),
      [
        ["grep", 2 / 3],
        ["ls", 1 / 3],
      ],
    );
    assert.equal(s.toolS.p50, 2);
    assert.equal(s.finalContextTokens.mean, 410);
  });

  it("gives each tool its calls and times, and tokens per turn their spread", () => {
    const s = traceStats([
      {
        id: "a",
        turns: [
          { input: 100, cached: 0, output: 10, tool: "grep", toolS: 1 },
          { input: 200, cached: 110, output: 30, tool: "pytest", toolS: 10 },
          { input: 300, cached: 240, output: 20, tool: "grep", toolS: 3 },
          { input: 400, cached: 320, output: 20, tool: null, toolS: null },
        ],
      },
      { id: "b", turns: [{ input: 50, cached: 0, output: 5, tool: null, toolS: null }] },
    ]);
    assert.deepEqual(s.turns, { total: 5, mean: 2.5, std: 1.5, median: 2.5, max: 4 });
    assert.deepEqual(s.tools, [
      { tool: "grep", calls: 2, share: 2 / 3, meanS: 2, stdS: 1, p50S: 2, p99S: 2.98 },
      { tool: "pytest", calls: 1, share: 1 / 3, meanS: 10, stdS: 0, p50S: 10, p99S: 10 },
    ]);
    assert.deepEqual(s.promptTokens, { mean: 210, std: Math.sqrt(16400), max: 400 });
    assert.deepEqual(s.outputTokens, { mean: 17, std: Math.sqrt(76), max: 30 });
    assert.deepEqual(s.finalContextTokens, { mean: 237.5, std: 182.5, max: 420 });
  });
});
