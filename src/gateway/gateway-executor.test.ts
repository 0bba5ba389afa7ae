import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { RealClock } from "../core/clock.js";
import { addRequest } from "../core/test-support/drive.js";
import { testScheduler } from "../core/test-support/harness.js";
import { createCacheTtlPolicy } from "../policies/cachettl.js";
import { type ExecutorEntry, GatewayExecutor, TurnProgress } from "./gateway-executor.js";

function setup() {
  const { scheduler } = testScheduler(createCacheTtlPolicy({ offload: false }), { numBlocks: 64 });
  const entries = new Map<string, ExecutorEntry>();
  const forwarded: string[] = [];
  const executor = new GatewayExecutor({
    clock: new RealClock(),
    entries,
    forward: (id) => forwarded.push(id),
    hasPosts: () => false,
    nextWakeS: () => null,
    applyKvChanges: () => {},
  });
  const track = (id: string) => {
    const progress = new TurnProgress();
    entries.set(id, { progress, forwarded: false });
    return progress;
  };
  const step = async () => {
    const plan = scheduler.schedule();
    const result = await executor.execute(plan);
    return { plan, result, ...scheduler.update(plan, result) };
  };
  return { scheduler, forwarded, track, step };
}

describe("the gateway's executor: the scheduler follows what the backend streamed", () => {
  it("forwards an admitted turn once, holds its prompt until the first token, counts a token a step, stops with the answer", async () => {
    const { scheduler, forwarded, track, step } = setup();
    const progress = track("A");
    const a = addRequest(scheduler, "A", 40, { maxOutputTokens: 100 });
    const first = await step();
    assert.deepEqual(forwarded, ["A"]);
    assert.ok(first.result.held?.has("A"), "no token yet: the prompt's chunk is held");
    assert.equal(a.numComputedTokens, 0);
    progress.received = 3;
    await step();
    assert.equal(a.numComputedTokens, 40, "the first token carried the prompt");
    assert.equal(a.numOutputTokens, 1);
    await step();
    await step();
    assert.equal(a.numOutputTokens, 3, "one streamed token a step");
    const waiting = await step();
    assert.ok(waiting.result.held?.has("A"), "nothing more streamed: held");
    progress.ended = true;
    progress.total = 5;
    progress.tool = "bash";
    await step();
    const last = await step();
    assert.deepEqual(
      last.finished.map((r) => r.id),
      ["A"],
    );
    assert.equal(a.numOutputTokens, 5, "the answer's own count of tokens");
    assert.equal(a.calledTool, "bash", "the tool the answer called reaches the scheduler");
    assert.deepEqual(forwarded, ["A"], "forwarded once");
    scheduler.checkInvariants();
  });

  it("a turn whose answer failed ends as aborted, its KV freed", async () => {
    const { scheduler, track, step } = setup();
    const progress = track("B");
    const b = addRequest(scheduler, "B", 20, { maxOutputTokens: 10 });
    progress.received = 1;
    await step();
    progress.failed = true;
    progress.ended = true;
    await step();
    assert.equal(b.status, "aborted");
    assert.equal(scheduler.kvUsageFraction(), 0);
  });
});
