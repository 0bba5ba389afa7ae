import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ToolCallTracker, UNKNOWN_TOOL } from "./tool-call-tracker.js";

describe("ToolCallTracker", () => {
  it("measures a tool call from the request's finish to the program's next arrival", () => {
    const tracker = new ToolCallTracker();
    tracker.onRequestFinished("p1", "pytest", 10);
    assert.deepEqual(tracker.onRequestArrived("p1", 13.5), { tool: "pytest", durationS: 3.5 });
  });

  it("records an unidentified tool as unknown", () => {
    const tracker = new ToolCallTracker();
    tracker.onRequestFinished("p1", null, 1);
    assert.deepEqual(tracker.onRequestArrived("p1", 3), { tool: UNKNOWN_TOOL, durationS: 2 });
    assert.equal(UNKNOWN_TOOL, "unknown");
  });

  it("gives no sample for a program's first arrival", () => {
    assert.equal(new ToolCallTracker().onRequestArrived("p1", 5), null);
  });

  it("uses each finish for one sample only", () => {
    const tracker = new ToolCallTracker();
    tracker.onRequestFinished("p1", "ls", 1);
    assert.notEqual(tracker.onRequestArrived("p1", 2), null);
    assert.equal(tracker.onRequestArrived("p1", 3), null);
  });

  it("keeps programs apart", () => {
    const tracker = new ToolCallTracker();
    tracker.onRequestFinished("a", "git", 1);
    tracker.onRequestFinished("b", "make", 2);
    assert.deepEqual(tracker.onRequestArrived("b", 10), { tool: "make", durationS: 8 });
    assert.deepEqual(tracker.onRequestArrived("a", 4), { tool: "git", durationS: 3 });
  });

  it("measures from the most recent finish when two requests of a program were in flight", () => {
    const tracker = new ToolCallTracker();
    tracker.onRequestArrived("p1", 0);
    tracker.onRequestArrived("p1", 1);
    tracker.onRequestFinished("p1", "grep", 5);
    tracker.onRequestFinished("p1", "python", 6);
    assert.deepEqual(tracker.onRequestArrived("p1", 9), { tool: "python", durationS: 3 });
    assert.equal(tracker.onRequestArrived("p1", 10), null);
  });

  it("copes with an arrival before the previous request finished", () => {
    const tracker = new ToolCallTracker();
    tracker.onRequestFinished("p1", "ls", 10);
    assert.deepEqual(tracker.onRequestArrived("p1", 12), { tool: "ls", durationS: 2 });
    assert.equal(tracker.onRequestArrived("p1", 13), null);
    tracker.onRequestFinished("p1", "cat", 15);
    tracker.onRequestFinished("p1", "pytest", 16);
    assert.deepEqual(tracker.onRequestArrived("p1", 20), { tool: "pytest", durationS: 4 });
  });

  it("clamps a negative duration from clock skew to zero", () => {
    const tracker = new ToolCallTracker();
    tracker.onRequestFinished("p1", "ls", 10);
    assert.deepEqual(tracker.onRequestArrived("p1", 9.2), { tool: "ls", durationS: 0 });
  });

  it("rejects non-finite times", () => {
    const tracker = new ToolCallTracker();
    assert.throws(() => tracker.onRequestFinished("p1", "ls", Number.NaN), RangeError);
    assert.throws(() => tracker.onRequestArrived("p1", Number.POSITIVE_INFINITY), RangeError);
  });

  it("holds only programs waiting on a tool call, and forgets them on request", () => {
    const tracker = new ToolCallTracker();
    for (let i = 0; i < 1000; i++) tracker.onRequestFinished(`p${i}`, "ls", i);
    assert.equal(tracker.trackedPrograms, 1000);
    for (let i = 0; i < 600; i++) tracker.onRequestArrived(`p${i}`, i + 1);
    assert.equal(tracker.trackedPrograms, 400);
    for (let i = 600; i < 1000; i++) tracker.forgetProgram(`p${i}`);
    assert.equal(tracker.trackedPrograms, 0);
    assert.equal(tracker.onRequestArrived("p999", 2000), null);
  });
});
