import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { runPointJob } from "../../sim/point-job.js";
import { runSweep } from "../../sim/sweep.js";
import { smallJob } from "../../sim/test-support/small-jobs.js";
import { toJsonResult } from "./sim-output.js";

describe("simulate --json", () => {
  it("gives byte-identical JSON for the same seed, and different JSON for another seed", () => {
    const a = JSON.stringify(toJsonResult(runPointJob(smallJob("cachettl", 0.5))));
    const b = JSON.stringify(toJsonResult(runPointJob(smallJob("cachettl", 0.5))));
    const c = JSON.stringify(toJsonResult(runPointJob(smallJob("cachettl", 0.5, 8))));
    assert.equal(a, b);
    assert.notEqual(a, c);
  });

  it("returns sweep results in job order whatever the worker threads finish first", async () => {
    const jobs = [
      smallJob("vllm", 0.5),
      smallJob("cachettl", 0.5),
      smallJob("vllm", 1),
      smallJob("cachettl", 1),
    ];
    const threaded = await runSweep(jobs, { threads: 2 });
    const inline = await runSweep(jobs, { threads: 1 });
    assert.deepEqual(
      threaded.map((r) => JSON.stringify(toJsonResult(r))),
      inline.map((r) => JSON.stringify(toJsonResult(r))),
    );
    assert.deepEqual(
      threaded.map((r) => [r.policy, r.jps]),
      [
        ["vllm", 0.5],
        ["cachettl", 0.5],
        ["vllm", 1],
        ["cachettl", 1],
      ],
    );
  });
});
