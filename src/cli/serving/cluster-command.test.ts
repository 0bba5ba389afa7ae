import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { runContinuum } from "../test-support/run-cli.js";
import { drainTimeoutMsOf, replicaDevices, serveFlagOf } from "./cluster-command.js";

describe("continuum cluster --devices", () => {
  it("gives each replica its GPUs: one each, or several joined by +", () => {
    assert.deepEqual(replicaDevices("0,1,2"), ["0", "1", "2"]);
    assert.deepEqual(replicaDevices("0+1, 2+3"), ["0,1", "2,3"]);
    assert.deepEqual(replicaDevices("GPU-8f2a+GPU-77c1"), ["GPU-8f2a,GPU-77c1"]);
    assert.throws(() => replicaDevices("0,,1"), /one entry per replica/);
    assert.throws(() => replicaDevices("0;1"), /one entry per replica/);
  });
});

describe("continuum cluster with a policy module", () => {
  it("finds the policy among the serve flags, in either form, the last one winning", () => {
    const policyOf = (args: string[]) => serveFlagOf(args, "--scheduling-policy");
    assert.equal(policyOf(["--threads", "1"]), null);
    assert.equal(policyOf(["--scheduling-policy", "./p.mjs", "--threads", "1"]), "./p.mjs");
    assert.equal(policyOf(["--scheduling-policy=vllm", "--scheduling-policy", "./p.mjs"]), "./p.mjs");
  });
});

describe("continuum cluster, stopping", () => {
  it("lets the requests in flight finish for the replicas' --drain-timeout, serve's default without one", () => {
    assert.equal(drainTimeoutMsOf(["--threads", "1"]), 30_000);
    assert.equal(drainTimeoutMsOf(["--drain-timeout", "60"]), 60_000);
    assert.equal(drainTimeoutMsOf(["--drain-timeout=0.5"]), 500);
    assert.throws(() => drainTimeoutMsOf(["--drain-timeout", "soon"]), /--drain-timeout: expected seconds/);
  });

  it("a policy module that does not load stops the cluster before any replica or HAProxy starts", async () => {
    const { code, stderr } = await runContinuum([
      "cluster",
      "--replicas",
      "1",
      "--haproxy",
      "/no/such/haproxy",
      "--scheduling-policy",
      "./no/such/policy.mjs",
    ]);
    assert.equal(code, 1);
    assert.match(stderr, /^continuum: policy module \.\/no\/such\/policy\.mjs \(.*\): file not found\n$/);
  });
});
