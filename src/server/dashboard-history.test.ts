import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DashboardHistory } from "./dashboard-history.js";
import type { DoneEvent } from "./generation.js";
import { FakeEngine } from "./test-support/fake-engine.js";

function done(e2eS: number, programJctS: number | null): DoneEvent {
  return {
    type: "done",
    finishReason: "stop",
    text: "",
    usage: { promptTokens: 1, completionTokens: 1, cachedTokens: 0 },
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
    assert.equal(history.history.at(-1)?.jctP50S, null, "a turn that did not end its program is no JCT");
    assert.equal(history.history.at(-1)?.latencyP50S, 1);
    for (const jct of [10, 20, 30]) history.observeDone(done(2, jct));
    nowS += 1;
    history.sample();
    assert.equal(history.history.at(-1)?.jctP50S, 20);
    assert.equal(history.history.at(-1)?.jctP99S, 30);
    assert.equal(history.history.at(-1)?.finishedPerS, 3);
    nowS += 60;
    history.sample();
    assert.equal(history.history.at(-1)?.latencyP50S, null, "request latencies look back 30 s");
    assert.equal(history.history.at(-1)?.jctP50S, 20, "program JCTs look back 5 minutes");
    nowS += 300;
    history.sample();
    assert.equal(history.history.at(-1)?.jctP50S, null);
  });
});
