import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { runContinuum } from "../test-support/run-cli.js";

/** The example policy module, as a user gives it: a path relative to the working directory. */
const EXAMPLE = `./${relative(process.cwd(), fileURLToPath(new URL("../../../examples/policies/tool-pin.mjs", import.meta.url)))}`;
const BROKEN = fileURLToPath(
  new URL("../../sim/test-support/policies/reorders-held-turns.mjs", import.meta.url),
);

describe("continuum policies --check", () => {
  it("passes the example policy module on every conformance workload", async () => {
    const { code, stdout, stderr } = await runContinuum(["policies", "--check", EXAMPLE]);
    assert.equal(code, 0, stderr);
    assert.match(stdout, new RegExp(`^policy ${EXAMPLE.replaceAll(".", "\\.")}: tool-pin, program-FCFS`));
    assert.equal(stdout.match(/^ {4}pass: 14 programs, \d+ turns in \d+ steps/gm)?.length, 4, stdout);
    assert.match(stdout, /conformance: passed all 4 workloads/);
  });

  it("fails a broken policy, workload by workload, with exit code 1", async () => {
    const { code, stdout } = await runContinuum(["policies", "--check", BROKEN]);
    assert.equal(code, 1);
    assert.match(stdout, /FAIL \(invariant\): scheduler invariant broken: waiting queue is out of order/);
    assert.match(stdout, /conformance: FAILED [1-4] of 4 workloads/);
  });

  it("checks a built-in policy too; an unknown one or a module that does not load is an error", async () => {
    const builtin = await runContinuum(["policies", "--check", "cachettl-adaptive"]);
    assert.equal(builtin.code, 0, builtin.stderr);
    assert.match(builtin.stdout, /conformance: passed all 4 workloads/);
    const unknown = await runContinuum(["policies", "--check", "lifo"]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^continuum: unknown policy "lifo"; choose one of: vllm, .*policy module/);
    const missing = await runContinuum(["policies", "--check", "./no/such/policy.mjs"]);
    assert.equal(missing.code, 1);
    assert.match(
      missing.stderr,
      /^continuum: policy module \.\/no\/such\/policy\.mjs \(.*\): file not found\n$/,
    );
  });
});

describe("continuum simulate and sweep with a policy module", () => {
  it("simulate runs a built-in and the module side by side, the module labelled by its path", async () => {
    const dir = mkdtempSync(join(tmpdir(), "continuum-module-record-"));
    try {
      const args = ["simulate", "--policies", `vllm,${EXAMPLE}`, "--programs", "20", "--threads", "1"];
      const { code, stdout, stderr } = await runContinuum([
        ...args,
        "--json",
        "--no-report",
        "--record",
        dir,
      ]);
      assert.equal(code, 0, stderr);
      const { results } = JSON.parse(stdout) as {
        results: { policy: string; programs: number; completed: number }[];
      };
      assert.deepEqual(
        results.map((r) => [r.policy, r.completed]),
        [
          ["vllm", 20],
          [EXAMPLE, 20],
        ],
      );
      assert.ok(existsSync(join(dir, "examples_policies_tool-pin.mjs-jps0.3.jsonl")), "record file name");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("sweep runs the module on worker threads", async () => {
    const args = ["sweep", "--policies", EXAMPLE, "--jps", "0.2,0.4", "--programs", "6", "--threads", "2"];
    const { code, stdout, stderr } = await runContinuum([...args, "--json", "--no-report"]);
    assert.equal(code, 0, stderr);
    const { results, failures } = JSON.parse(stdout) as {
      results: { policy: string; jps: number; completed: number }[];
      failures?: unknown;
    };
    assert.equal(failures, undefined);
    assert.deepEqual(
      results.map((r) => [r.policy, r.jps, r.completed]),
      [
        [EXAMPLE, 0.2, 6],
        [EXAMPLE, 0.4, 6],
      ],
    );
  });

  it("a module that does not load stops the run before it starts, naming the file", async () => {
    const { code, stdout, stderr } = await runContinuum([
      "simulate",
      "--policies",
      `vllm,${BROKEN.replace("reorders-held-turns", "missing")}`,
      "--programs",
      "4",
      "--no-report",
    ]);
    assert.equal(code, 1);
    assert.equal(stdout, "");
    assert.match(stderr, /^continuum: policy module .*missing\.mjs: file not found\n$/);
  });
});
