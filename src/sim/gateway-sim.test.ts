import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { runPointJob } from "./point-job.js";
import { SMALL_POOL, smallJob } from "./test-support/small-jobs.js";

const inGateway = (policy: string, jps: number) => {
  const job = smallJob(policy, jps);
  return runPointJob({ ...job, engine: { ...job.engine, gateway: true } });
};

describe("simulate --gateway: a policy in a gateway in front of an LRU engine without pins", () => {
  it("a vllm gateway forwards every turn at once: the engine's run is the one it has alone", () => {
    const alone = runPointJob(smallJob("vllm", 1));
    const behind = inGateway("vllm", 1);
    assert.deepEqual(behind.jcts, alone.jcts);
    assert.equal(behind.hit_ratio, alone.hit_ratio);
    assert.equal(behind.pins.created, 0);
  });

  it("under memory pressure the gateway holds turns back, pins, and every program still finishes", () => {
    const result = inGateway("cachettl-adaptive", 1);
    assert.equal(result.completed, 20);
    assert.ok(result.pins.created > 0, "finished turns pinned in the gateway's model");
    assert.ok(result.queue_delay.mean > 0, "turns waited in the gateway for the engine's memory");
    assert.ok(result.gateway !== undefined, "the keep-alive tally is reported");
    assert.ok(result.gateway.keepalive_token_share >= 0 && result.gateway.keepalive_token_share < 1);
    const thunder = inGateway("thunderagent", 1);
    assert.equal(thunder.completed, 20);
    assert.equal(thunder.pins.created, 0, "ThunderAgent never pins");
    assert.equal(thunder.gateway?.keepalives, 0);
  });

  it("runs one engine", () => {
    const job = smallJob("vllm", 1);
    assert.throws(
      () => runPointJob({ ...job, engine: { ...SMALL_POOL, gateway: true, replicas: 2 } }),
      /--replicas 1/,
    );
  });
});
