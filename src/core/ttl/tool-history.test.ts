import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { MAX_TOOL_NAME_CHARS, OVERFLOW_TOOL, ToolHistory } from "./tool-history.js";

describe("ToolHistory", () => {
  it("keeps each tool's durations apart and all of them in the global window", () => {
    const h = new ToolHistory();
    h.record("grep", 0.2);
    h.record("grep", 0.4);
    h.record("pytest", 30);
    assert.equal(h.forTool("grep")?.size, 2);
    assert.equal(h.forTool("grep")?.cdf(0.3), 0.5);
    assert.equal(h.forTool("pytest")?.cdf(0.4), 0);
    assert.equal(h.global.size, 3);
    assert.equal(h.global.cdf(0.4), 2 / 3);
    assert.equal(h.forTool("ls"), undefined);
    assert.equal(h.recordedFor("ls"), 0);
  });

  it("counts every sample ever recorded, beyond the window", () => {
    const h = new ToolHistory({ sampleWindow: 2 });
    for (let i = 0; i < 5; i++) h.record("ls", i);
    assert.equal(h.global.size, 2);
    assert.equal(h.forTool("ls")?.size, 2);
    assert.equal(h.totalRecorded, 5);
    assert.equal(h.recordedFor("ls"), 5);
  });

  it("folds tool names past the limit into one overflow bucket", () => {
    const h = new ToolHistory({ maxTools: 2 });
    h.record("a", 1);
    h.record("b", 2);
    for (let i = 0; i < 1000; i++) h.record(`junk-${i}`, 3);
    assert.equal(h.recordedFor("a"), 1);
    assert.equal(h.recordedFor("b"), 1);
    assert.equal(h.recordedFor(OVERFLOW_TOOL), 1000);
    // A name never seen before now reads the overflow bucket, where its samples would go.
    assert.equal(h.recordedFor("never-seen"), 1000);
    assert.equal(h.forTool("junk-5"), h.forTool(OVERFLOW_TOOL));
    assert.equal(h.totalRecorded, 1002);
  });

  it("treats names that differ only past the length cap as one tool", () => {
    const h = new ToolHistory();
    const base = "x".repeat(MAX_TOOL_NAME_CHARS);
    h.record(`${base}-one`, 1);
    h.record(`${base}-two`, 2);
    assert.equal(h.recordedFor(base), 2);
  });

  it("ignores a rejected sample entirely", () => {
    const h = new ToolHistory({ maxTools: 1 });
    assert.throws(() => h.record("bad", -1), RangeError);
    assert.equal(h.totalRecorded, 0);
    assert.equal(h.forTool("bad"), undefined);
    // The rejected name did not use up the only tool slot.
    h.record("good", 1);
    assert.equal(h.recordedFor(OVERFLOW_TOOL), 0);
    assert.equal(h.recordedFor("good"), 1);
  });
});
