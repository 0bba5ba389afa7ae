import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { isNativeAvailable } from "../engine/native/llama-native.js";
import { loadEngineProfile } from "../sim/hardware/engine-profile.js";
import { measureProfileToFile } from "./profile-file.js";
import { planFor, QUICK_PLAN } from "./run-profile.js";

const native = isNativeAvailable();

describe("planFor", () => {
  it("keeps lengths within the model's context and the pool", () => {
    const plan = planFor(QUICK_PLAN, { maxContextTokens: 1024, kvCells: 16384 });
    assert.deepEqual(plan.prefillTokens, [128, 256, 512, 1024]);
    assert.deepEqual(plan.decodeContexts, [0, 512]);
    assert.equal(plan.offloadTokens, 1024);
    assert.throws(() => planFor(QUICK_PLAN, { maxContextTokens: 300, kvCells: 16384 }), /fewer than 3/);
  });
});

describe("continuum profile --quick (tiny model)", { skip: !native && "native addon not built" }, () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "continuum-profile-test-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("--kv-layout streams measures each sequence in its own stream and leaves out lengths beyond one", async () => {
    const lines: string[] = [];
    const file = await measureProfileToFile(
      {
        quick: true,
        threads: 1,
        out: join(dir, "streams.json"),
        json: false,
        decodeBatches: [1, 2, 4, 8],
        decodeContexts: [0, 256],
        kvCacheTokens: 9 * 512,
        kvLayout: "streams",
      },
      (line) => lines.push(line),
      () => {},
    );
    // 8 sequences and one more: 9 streams of 512 cells
    assert.ok(
      lines.some((l) => l.includes("in 9 streams of 512")),
      lines[0],
    );
    assert.deepEqual(
      file.prefill.points.map((p) => p.tokens),
      [128, 256, 512],
    );
    assert.equal(file.decode.points.length, 8, "every batch at both contexts: each sequence has its stream");
    assert.ok(loadEngineProfile(JSON.parse(await readFile(join(dir, "streams.json"), "utf8")) as unknown));
  });

  it("writes a profile that loads and prices each measured step as measured", async () => {
    const out = join(dir, "nested", "tiny.json");
    const lines: string[] = [];
    const file = await measureProfileToFile(
      {
        quick: true,
        threads: 1,
        out,
        json: false,
        prefillTokens: [128, 256, 512, 1024],
        decodeBatches: [1, 2, 4],
        decodeContexts: [0, 256],
        kvCacheTokens: 4096,
      },
      (line) => lines.push(line),
      () => {},
    );
    assert.ok(lines.some((l) => l.startsWith("prefill 1024 tokens")));
    const json = JSON.parse(await readFile(out, "utf8")) as unknown;
    const profile = loadEngineProfile(json);
    assert.equal(profile.model, "continuum-tiny");
    assert.equal(profile.kvBytesPerToken, 1024); // tiny: 4 layers x 2 KV heads x 32 dims x (K+V) x f16
    assert.equal(file.threads, 1);
    // measured where the test runs: the CPU, holding all 4 layers and their KV
    assert.match(file.device, /^cpu-/);
    assert.deepEqual(
      [file.deviceInfo?.backend, file.deviceInfo?.layersOffloaded, file.deviceInfo?.layersTotal],
      ["cpu", 0, 4],
    );
    assert.equal(file.deviceInfo?.kvCache, "cpu");
    assert.equal(file.decode.points.length, 6);
    // a measured chunk is priced as measured (the simulator's chunk prices come from this grid), except that
    // more context never costs less and no step costs less than the step overhead: a noisy measurement below
    // the same chunk at context 0 is priced as that one
    const chunkS = (tokens: number, contextTokens: number) =>
      file.prefill.chunks?.find((c) => c.tokens === tokens && c.contextTokens === contextTokens)?.seconds;
    const at512 = chunkS(16, 512);
    const at0 = chunkS(16, 0);
    assert.ok(at512 !== undefined && at0 !== undefined);
    const expectedS = Math.max(at512, at0, file.stepOverheadS);
    assert.ok(
      Math.abs(profile.latency.stepS([{ numTokens: 16, contextTokens: 512 }]) / expectedS - 1) < 1e-9,
    );
    assert.deepEqual(
      file.prefill.chunks?.map((c) => [c.tokens, c.contextTokens]),
      [
        [16, 0],
        [128, 0],
        [16, 512],
        [128, 512],
      ],
    );
  });
});
