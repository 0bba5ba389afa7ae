import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { SchedulingPolicy } from "../../core/policy.js";
import { createPolicy, loadPolicyModules } from "../../policies/index.js";
import { runSweep } from "../sweep.js";
import { smallJob } from "../test-support/small-jobs.js";
import {
  CONFORMANCE_WORKLOADS,
  checkedRun,
  checkPolicy,
  conformancePrograms,
  PolicyCheckError,
  type WorkloadVerdict,
} from "./policy-check.js";

const EXAMPLE = fileURLToPath(new URL("../../../examples/policies/tool-pin.mjs", import.meta.url));
const fixture = (name: string) => fileURLToPath(new URL(`../test-support/policies/${name}`, import.meta.url));

function failures(verdicts: readonly WorkloadVerdict[]) {
  return verdicts.flatMap((v) => (v.ok ? [] : [{ kind: v.kind, message: v.message }]));
}

describe("the policy check (policies --check) on policy modules", () => {
  it("the example policy passes every conformance workload, and pins and reuses KV doing it", async () => {
    await loadPolicyModules([EXAMPLE]);
    const verdicts = checkPolicy(() => createPolicy(EXAMPLE));
    assert.deepEqual(failures(verdicts), []);
    assert.equal(verdicts.length, CONFORMANCE_WORKLOADS.length);
    const reused = verdicts.reduce((n, v) => n + (v.ok ? v.report.scheduler.stats.pinsReused : 0), 0);
    assert.ok(reused > 0, "the example's pins are reused by the programs' next turns");
  });

  it("a policy that reorders a waiting turn outside prioritize breaks the waiting queue's order", async () => {
    const spec = fixture("reorders-held-turns.mjs");
    await loadPolicyModules([spec]);
    const found = failures(checkPolicy(() => createPolicy(spec)));
    assert.ok(found.length > 0);
    for (const f of found) {
      assert.deepEqual(f, {
        kind: "invariant",
        message: "scheduler invariant broken: waiting queue is out of order",
      });
    }
  });

  it("a NaN priority is a bad result of prioritize", async () => {
    const spec = fixture("nan-priority.mjs");
    await loadPolicyModules([spec]);
    const found = failures(checkPolicy(() => createPolicy(spec)));
    assert.equal(found.length, CONFORMANCE_WORKLOADS.length);
    assert.equal(found[0]?.kind, "bad result");
    assert.match(found[0]?.message ?? "", /^the policy's prioritize left request.priority \[1, NaN, \d+\]/);
  });

  it("a policy method that throws, or a retention that is none, is the policy's failure", () => {
    const vllm = () => createPolicy("vllm");
    const throwing = (): SchedulingPolicy => ({
      ...vllm(),
      retain: () => {
        throw new Error("no tool stats yet");
      },
    });
    assert.deepEqual(failures(checkPolicy(throwing))[0], {
      kind: "policy threw",
      message: "the policy's retain threw: no tool stats yet",
    });
    const noRetention = (): SchedulingPolicy => ({ ...vllm(), retain: () => ({ kind: "pin" }) as never });
    assert.match(
      failures(checkPolicy(noRetention))[0]?.message ?? "",
      /the policy's retain returned \{"kind":"pin"\}: \{ kind: "free" \} or \{ kind: "pin", ttlS: seconds >= 0 \}/,
    );
  });

  it("a run that never gets done is cut off as no progress", () => {
    const workload = CONFORMANCE_WORKLOADS[0]!;
    assert.throws(
      () =>
        checkedRun(conformancePrograms(workload), { ...workload, maxSchedules: 10 }, createPolicy("vllm")),
      (error: unknown) =>
        error instanceof PolicyCheckError &&
        error.kind === "no progress" &&
        /^no progress: 10 schedule\(\) calls/.test(error.message),
    );
  });
});

describe("a policy module in a sweep", () => {
  it("runs on the worker threads, each loading the module itself, labelled by its spec", async () => {
    const jobs = [smallJob(EXAMPLE, 0.2), smallJob("vllm", 0.2), smallJob(EXAMPLE, 0.4)];
    const results = await runSweep(jobs, { threads: 2 });
    assert.deepEqual(
      results.map((r) => r.policy),
      [EXAMPLE, "vllm", EXAMPLE],
    );
    for (const r of results) assert.equal(r.completed, r.programs);
    assert.ok((results[0]?.pins.created ?? 0) > 0, "the module's retain pinned");
    // the same point on one thread (the main one) gives the same numbers
    const [alone] = await runSweep([jobs[0]!], { threads: 1 });
    assert.deepEqual(alone?.jct, results[0]?.jct);
  });

  it("a module that does not load fails the sweep before any point runs", async () => {
    await assert.rejects(
      runSweep([smallJob("./no/such/policy.mjs", 0.2)], { threads: 2 }),
      /policy module \.\/no\/such\/policy\.mjs \(.*\): file not found/,
    );
  });
});
