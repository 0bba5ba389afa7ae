import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import type { CapacityResult } from "../../sim/capacity.js";
import { runContinuum } from "../test-support/run-cli.js";
import { capacityTable, shortRunWarning } from "./capacity-command.js";

function resultWith(sustainable: Record<string, number>): CapacityResult {
  return {
    results: Object.entries(sustainable).map(([policy, jps]) => ({
      policy,
      sustainable_jps: jps,
      sustainable_by_seed: [jps],
      light_jct_s: 10,
      jct_at_ref_s: 12,
      p99_jct_at_ref_s: 30,
      p99_first_turn_ttft_at_ref_s: 2,
      max_first_turn_ttft_at_ref_s: 5,
      p99_program_wait_at_ref_s: 4,
      max_program_wait_at_ref_s: 9,
    })),
    ref_jps: 0.2,
    bound_jps: 0.5,
    kv_bound_jps: 0.4,
    light_jps: 0.01,
    reference_light_jct_s: 10,
    slo_jct_s: 30,
    points: 1,
  };
}

describe("continuum capacity's table", () => {
  it("puts each policy's ratio to vllm and to the best baseline beside its sustainable load", () => {
    const kv = { dtype: "bf16", bytes_per_token: 131072, pool_tokens: 464696 };
    const text = capacityTable(resultWith({ vllm: 0.04, thunderagent: 0.05, "cachettl-adaptive": 0.06 }), kv);
    const line = (policy: string) => text.split("\n").find((l) => l.startsWith(`${policy} `)) ?? "";
    assert.match(line("cachettl-adaptive"), /0\.0600\s+1\.50x\s+1\.20x/);
    assert.match(line("vllm"), /0\.0400\s+1\.00x\s+0\.80x/);
    assert.match(text, /best baseline: thunderagent 0\.0500 jobs\/s/);
  });

  it("says when no baseline was measured", () => {
    const kv = { dtype: "bf16", bytes_per_token: 131072, pool_tokens: 464696 };
    const text = capacityTable(resultWith({ "cachettl-adaptive": 0.06 }), kv);
    assert.match(text, /best baseline: none measured/);
    assert.match(text.split("\n")[1] ?? "", /0\.0600\s+-\s+-/);
  });
});

describe("continuum capacity's short-run warning", () => {
  it("names the policies credited past the KV-limited ceiling and asks for more programs", () => {
    const warning = shortRunWarning(resultWith({ vllm: 0.3, ours: 0.45 }), 500);
    assert.ok(warning?.includes("ours") && !warning.includes("vllm"), warning ?? "");
    assert.match(warning ?? "", /500 programs .* more --programs/);
  });

  it("says nothing when every policy stays below it", () => {
    assert.equal(shortRunWarning(resultWith({ vllm: 0.3, ours: 0.39 }), 500), null);
  });
});

function capacity(args: readonly string[]) {
  return runContinuum(
    [
      "capacity",
      "--programs",
      "4",
      "--seeds",
      "1",
      "--policies",
      "vllm",
      "--threads",
      "1",
      "--no-report",
    ].concat(args),
  );
}

describe("continuum capacity --kv-cache-dtype", () => {
  it("says which KV dtype ran, and fp8 holds twice bf16's pool", async () => {
    const runs = await Promise.all([capacity(["--json"]), capacity(["--json", "--kv-cache-dtype", "fp8"])]);
    const kv = runs.map(({ code, stdout, stderr }) => {
      assert.equal(code, 0, stderr);
      return (
        JSON.parse(stdout) as { kv_cache: { dtype: string; bytes_per_token: number; pool_tokens: number } }
      ).kv_cache;
    });
    const [bf16, fp8] = kv as [(typeof kv)[0], (typeof kv)[0]];
    assert.equal(bf16.dtype, "bf16");
    assert.equal(fp8.dtype, "fp8");
    assert.equal(fp8.bytes_per_token * 2, bf16.bytes_per_token);
    assert.ok(Math.abs(fp8.pool_tokens - 2 * bf16.pool_tokens) <= 1);
    assert.match(runs[1]?.stderr ?? "", /hardware h100 \/ llama-3\.1-8b, KV cache fp8/);
    const table = await capacity(["--kv-cache-dtype", "fp8"]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /KV cache fp8: 65536 bytes per token, a pool of \d+ tokens per replica/);
  });

  it("refuses fp8 with a measured --profile, whose KV bytes are the engine's", async () => {
    const profile = fileURLToPath(
      new URL("../../../docs/gpu/h100-llama-3.1-8b-q8_0-profile.json", import.meta.url),
    );
    const run = await capacity(["--profile", profile, "--kv-cache-dtype", "fp8"]);
    assert.notEqual(run.code, 0);
    assert.match(run.stderr, /--kv-cache-dtype fp8 applies to --hardware\/--model/);
  });
});
