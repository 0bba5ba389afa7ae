import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { DoneEvent } from "../generation/generation.js";
import { FakeEngine } from "../test-support/fake-engine.js";
import { DashboardHistory, HISTORY_S, LATENCY_BUCKETS_S, latencyBucket } from "./dashboard-history.js";

function done(
  e2eS: number,
  programJctS: number | null,
  { completionTokens = 1, finishReason = "stop" as DoneEvent["finishReason"] } = {},
): DoneEvent {
  return {
    type: "done",
    finishReason,
    text: "",
    usage: { promptTokens: 1, completionTokens, cachedTokens: 0 },
    queueS: 0,
    ttftS: e2eS / 2,
    e2eS,
    programJctS,
  };
}

describe("the dashboard's time series", () => {
  it("program JCT percentiles count only turns that ended their program, over the last 5 minutes", () => {
    let nowS = 1000;
    const history = new DashboardHistory(new FakeEngine(), () => nowS);
    history.observeDone(done(1, null));
    history.sample();
    assert.equal(history.since(0).at(-1)?.jctP50S, null, "a turn that did not end its program is no JCT");
    assert.equal(history.since(0).at(-1)?.latencyP50S, 1);
    for (const jct of [10, 20, 30]) history.observeDone(done(2, jct));
    nowS += 1;
    history.sample();
    assert.equal(history.since(0).at(-1)?.jctP50S, 20);
    assert.equal(history.since(0).at(-1)?.jctP99S, 30);
    assert.equal(history.since(0).at(-1)?.finishedPerS, 3);
    nowS += 60;
    history.sample();
    assert.equal(history.since(0).at(-1)?.latencyP50S, null, "request latencies look back 30 s");
    assert.equal(history.since(0).at(-1)?.jctP50S, 20, "program JCTs look back 5 minutes");
    nowS += 300;
    history.sample();
    assert.equal(history.since(0).at(-1)?.jctP50S, null);
  });

  it("keeps an hour of points whatever the load, and hands a page only the points after the last it holds", () => {
    let nowS = 5000;
    const history = new DashboardHistory(new FakeEngine(), () => nowS);
    for (let i = 0; i < HISTORY_S + 500; i++) {
      history.sample();
      nowS += 1;
    }
    const all = history.since(0);
    assert.equal(all.length, HISTORY_S, "one point a second for an hour, no more");
    assert.equal((all.at(-1)?.timeS ?? 0) - (all[0]?.timeS ?? 0), HISTORY_S - 1);
    assert.deepEqual(
      history.since(all.at(-3)?.timeS ?? 0).map((p) => p.timeS),
      all.slice(-2).map((p) => p.timeS),
    );
    assert.deepEqual(history.since(nowS), []);
  });

  it("turns the engine's counters into prompt, reused and generated tokens per second", () => {
    let nowS = 100;
    const metrics = { prefixQueryTokens: 0, prefixHitTokens: 0, generatedTokens: 0, pinnedPrograms: 0 };
    const engine = new FakeEngine({ metrics });
    const history = new DashboardHistory(engine, () => nowS);
    history.sample();
    Object.assign(metrics, {
      prefixQueryTokens: 4000,
      prefixHitTokens: 3000,
      generatedTokens: 200,
      pinnedPrograms: 2,
    });
    nowS += 2;
    history.sample();
    const point = history.since(0).at(-1);
    assert.equal(point?.promptTokensPerS, 2000);
    assert.equal(point?.cachedTokensPerS, 1500);
    assert.equal(point?.generatedTokensPerS, 100);
    assert.equal(point?.hitRatio, 0.75);
    assert.equal(point?.pinnedPrograms, 2);
  });

  it("counts TTFT, per-request inter-token latency, JCT and finish reasons over the last hour", () => {
    let nowS = 60_000;
    const history = new DashboardHistory(new FakeEngine(), () => nowS);
    // TTFT 1.5 s, then 10 more tokens over 1.5 s: 0.15 s between tokens
    history.observeDone(done(3, 40, { completionTokens: 11 }));
    history.observeDone(done(0.02, null, { finishReason: "length" }));
    nowS += 30 * 60;
    history.observeDone(done(3, null, { finishReason: "abort", completionTokens: 11 }));
    let d = history.distributions();
    assert.deepEqual(d.finishReasons, { stop: 1, length: 1, abort: 1, kv_capacity: 0 });
    assert.equal(d.ttft[latencyBucket(1.5)], 2);
    assert.equal(d.ttft[latencyBucket(0.01)], 1);
    assert.equal(d.itl[latencyBucket(0.15)], 2, "requests with one token have no inter-token latency");
    assert.equal(
      d.itl.reduce((a, b) => a + b),
      2,
    );
    assert.equal(d.jct[latencyBucket(40)], 1);
    assert.equal(d.bucketsS, LATENCY_BUCKETS_S);
    assert.ok((LATENCY_BUCKETS_S[latencyBucket(0.15)] as number) >= 0.15);
    assert.ok((LATENCY_BUCKETS_S[latencyBucket(0.15) - 1] as number) < 0.15);
    nowS += 40 * 60;
    d = history.distributions();
    assert.deepEqual(
      d.finishReasons,
      { stop: 0, length: 0, abort: 1, kv_capacity: 0 },
      "an hour back, no more",
    );
    assert.equal(
      latencyBucket(1e6),
      LATENCY_BUCKETS_S.length - 1,
      "anything longer lands in the last bucket",
    );
  });
});
