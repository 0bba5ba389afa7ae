import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { agentxMetrics, type MeasuredCall } from "./agentx-metrics.js";
import { LogHistogram } from "./log-histogram.js";

const done = (
  session: number,
  sendS: number,
  ttftS: number,
  decodeS: number,
  output: number,
): MeasuredCall => ({
  session,
  sendS,
  firstTokenS: sendS + ttftS,
  finishS: sendS + ttftS + decodeS,
  input: 1000,
  output,
  cachedTokens: 600,
  theoreticalHitTokens: 900,
  overflow: false,
});

describe("LogHistogram", () => {
  it("gives percentiles within 1% of the samples", () => {
    const h = new LogHistogram();
    for (let i = 1; i <= 1000; i++) h.add(i / 1000);
    assert.equal(h.count, 1000);
    for (const [p, want] of [
      [50, 0.5],
      [90, 0.9],
      [99, 0.99],
    ] as const) {
      const got = h.percentile(p);
      assert.ok(got >= want && got <= want * 1.0101, `p${p}: ${got}`);
    }
    assert.equal(new LogHistogram().percentile(50), 0);
  });
});

describe("agentxMetrics", () => {
  it("computes TPGS, interactivity at P90, hits, overflow and session JCT", () => {
    // 10 calls of 101 output tokens: 100 gaps each, decoding in 1..10 s -> 100..10 tokens/s per user
    const calls = Array.from({ length: 10 }, (_, i) => done(i % 2, i, 0.5, i + 1, 101));
    calls.push({ ...done(1, 3, 0, 0, 5), overflow: true, firstTokenS: null });
    const m = agentxMetrics({
      concurrency: 2,
      durationS: 100,
      devices: 1,
      deviceKind: "gpu",
      interactivityFloor: 50,
      calls,
      sessions: [
        { startS: 0, endS: 40, warm: false },
        { startS: 10, endS: 30, warm: false },
        { startS: 0, endS: 5, warm: true },
        { startS: 50, endS: null, warm: false },
      ],
      itl: new LogHistogram(),
    });
    assert.equal(m.requests.completed, 10);
    assert.equal(m.requests.overflowed, 1);
    assert.equal(m.total_tokens, 10 * 1101);
    assert.equal(m.tpgs, (10 * 1101) / 100);
    // time per output token 0.01..0.1 s; its p90 (numpy's linear) is 0.091 s -> 10.99 tokens/s
    assert.ok(Math.abs(m.interactivity.p90 - 1 / 0.091) < 1e-9);
    assert.equal(m.meets_floor, false);
    assert.equal(m.prefix_hit, 0.6);
    assert.equal(m.theoretical_prefix_hit, 0.9);
    assert.equal(m.context_overflow.request_rate, 1 / 11);
    assert.equal(m.context_overflow.session_rate, 0.5);
    assert.equal(m.context_overflow.invalid, true);
    assert.deepEqual(
      [m.session_jct_s.sessions, m.session_jct_s.unfinished, m.session_jct_s.mean],
      [2, 1, 30],
    );
  });
});
