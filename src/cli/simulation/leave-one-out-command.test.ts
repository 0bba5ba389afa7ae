import assert from "node:assert/strict";
import { mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { runContinuum } from "../test-support/run-cli.js";

describe("continuum leave-one-out", () => {
  it("prints each family's held-out row, keeps each case's runs, and measures only a policy added later", async () => {
    const dir = mkdtempSync(join(tmpdir(), "loo-"));
    const args = (candidates: string) => [
      "leave-one-out",
      "--families",
      "bfcl,web-agent",
      "--tiers",
      "0",
      "--programs",
      "3",
      "--seeds",
      "1",
      "--threads",
      "1",
      "--candidates",
      candidates,
      "--save-dir",
      dir,
      "--json",
    ];
    const first = await runContinuum(args("cachettl-adaptive"));
    assert.equal(first.code, 0, first.stderr);
    const { cases, rows } = JSON.parse(first.stdout);
    assert.deepEqual(
      rows.map((r: { family: string; setting: string }) => [r.family, r.setting]),
      [
        ["bfcl", "no tier"],
        ["web-agent", "no tier"],
      ],
    );
    for (const c of cases)
      assert.ok(c.sustainable.vllm > 0 && c.sustainable.thunderagent > 0 && c.sustainable.mori > 0, c.family);
    assert.deepEqual(readdirSync(dir).sort(), ["bfcl-0gb.json", "web-agent-0gb.json"]);

    const more = await runContinuum(args("cachettl-adaptive,cachettl-adaptive:no-admission"));
    assert.equal(more.code, 0, more.stderr);
    assert.match(more.stderr, /bfcl, no tier: 5 policies read from/);
    const widened = JSON.parse(more.stdout);
    for (const [i, c] of widened.cases.entries()) {
      assert.equal(c.sustainable["cachettl-adaptive"], cases[i].sustainable["cachettl-adaptive"]);
      assert.ok(c.sustainable["cachettl-adaptive:no-admission"] > 0);
    }

    const again = await runContinuum(args("cachettl-adaptive,cachettl-adaptive:no-admission"));
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stderr, /bfcl, no tier: measured before/);
    assert.deepEqual(JSON.parse(again.stdout), widened);
  });

  it("refuses a family that is neither a generator nor name=<trace>", async () => {
    const run = await runContinuum(["leave-one-out", "--families", "nope"]);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /family "nope" is neither a generator/);
  });
});
