import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import type { EngineProfileJson } from "../../core/profile/engine-profile-format.js";
import { loadEngineProfile } from "./engine-profile.js";
import { getProfile, PREFILL_PROFILE_CHUNK_TOKENS, PREFILL_PROFILE_TOKENS } from "./profiles.js";
import { RooflineLatencyModel } from "./roofline-model.js";
import type { LatencyModel, StepChunk } from "./step-latency.js";

const decodes = (batch: number, contextTokens: number): StepChunk[] =>
  Array.from({ length: batch }, () => ({ numTokens: 1, contextTokens }));

// A CPU engine whose costs are known exactly: bilinear decode, quadratic prefill.
const truth = {
  overheadS: 0.02,
  decodeS: (batch: number, context: number) => 0.02 + 0.004 * batch + 2e-7 * batch * context,
  prefill: { a: 1e-8, b: 5e-4, c: 0.02 },
};

function syntheticProfile(): EngineProfileJson {
  const { a, b, c } = truth.prefill;
  return {
    format: "continuum-profile",
    version: 1,
    device: "cpu-test",
    model: "tiny-test",
    threads: 2,
    kvBytesPerToken: 18432,
    kvCapacityTokens: 65536,
    prefill: {
      points: [512, 1024, 2048, 4096].map((tokens) => ({
        tokens,
        seconds: a * tokens * tokens + b * tokens + c,
      })),
      quadratic: truth.prefill,
    },
    decode: {
      points: [1, 2, 4, 8].flatMap((batch) =>
        [0, 2048, 8192].map((contextTokens) => ({
          batch,
          contextTokens,
          seconds: truth.decodeS(batch, contextTokens),
        })),
      ),
    },
    stepOverheadS: truth.overheadS,
    offload: { cpuBandwidthBps: 8e9, diskBandwidthBps: 2e9 },
  };
}

/** What `continuum profile` would write if the engine behaved exactly like `latency`. */
function profileMeasuring(latency: LatencyModel, overheadS: number): EngineProfileJson {
  return {
    ...syntheticProfile(),
    prefill: {
      points: PREFILL_PROFILE_TOKENS.map((tokens) => ({
        tokens,
        seconds: latency.prefillS(tokens, PREFILL_PROFILE_CHUNK_TOKENS),
      })),
    },
    decode: {
      points: [1, 4, 16, 64, 256].flatMap((batch) =>
        [0, 1024, 4096, 16384].map((contextTokens) => ({
          batch,
          contextTokens,
          seconds: latency.stepS(decodes(batch, contextTokens)),
        })),
      ),
    },
    stepOverheadS: overheadS,
  };
}

const close = (actual: number, expected: number, tolerance: number, what: string) =>
  assert.ok(Math.abs(actual / expected - 1) <= tolerance, `${what}: ${actual} vs ${expected}`);

describe("loadEngineProfile round trip", () => {
  const profile = loadEngineProfile(JSON.parse(JSON.stringify(syntheticProfile())));

  test("carries the file's identity, KV and offload numbers into the HardwareProfile", () => {
    assert.equal(profile.id, "engine/cpu-test/tiny-test");
    assert.equal(profile.gpu, "cpu-test");
    assert.equal(profile.model, "tiny-test");
    assert.equal(profile.tensorParallel, 1);
    assert.equal(profile.kvBytesPerToken, 18432);
    assert.equal(profile.kvCapacityTokens, 65536);
    assert.equal(profile.cpuOffloadBandwidthBps, 8e9);
    assert.equal(profile.diskBandwidthBps, 2e9);
    assert.deepEqual(profile.prefillQuadratic, truth.prefill);
  });

  test("reproduces measured decode steps and interpolates between and beyond them", () => {
    for (const [batch, context] of [
      [1, 0],
      [8, 8192],
      [3, 1000],
      [6, 5000],
      [20, 30000],
    ] as const) {
      close(
        profile.latency.stepS(decodes(batch, context)),
        truth.decodeS(batch, context),
        1e-9,
        `${batch}@${context}`,
      );
    }
    const mixedContexts = [...decodes(2, 1000), ...decodes(2, 3000)];
    close(
      profile.latency.stepS(mixedContexts),
      truth.decodeS(4, 2000),
      1e-9,
      "decodes use their mean context",
    );
  });

  test("prices prefill chunks from the quadratic and whole prefills like the measurements", () => {
    const { a, b } = truth.prefill;
    close(
      profile.latency.stepS([{ numTokens: 1000, contextTokens: 3000 }]),
      truth.overheadS + a * (4000 ** 2 - 3000 ** 2) + b * 1000,
      1e-9,
      "one chunk after context",
    );
    close(
      profile.latency.prefillS(4096, 8192),
      a * 4096 ** 2 + b * 4096 + truth.prefill.c,
      1e-9,
      "one-shot prefill",
    );
    assert.ok(
      profile.latency.prefillS(4096, 512) > profile.latency.prefillS(4096, 8192),
      "smaller chunks cost more",
    );
    const mixed = profile.latency.stepS([...decodes(4, 2000), { numTokens: 256, contextTokens: 0 }]);
    close(mixed, truth.decodeS(4, 2000) + a * 256 ** 2 + b * 256, 1e-9, "decodes plus a prefill chunk");
  });

  test("prices prefill chunks from the measured chunk grid when the file has one", () => {
    // short chunks after a long context cost far more per token than the quadratic says (CPU attention)
    const chunkS = (n: number, c: number) => truth.overheadS + 0.002 * n + 4e-6 * c * Math.sqrt(n);
    const json = syntheticProfile();
    json.prefill.chunks = [16, 64, 256, 512].flatMap((tokens) =>
      [0, 512, 2048].map((contextTokens) => ({
        tokens,
        contextTokens,
        seconds: chunkS(tokens, contextTokens),
      })),
    );
    const gridded = loadEngineProfile(json);
    const step = (n: number, c: number) => gridded.latency.stepS([{ numTokens: n, contextTokens: c }]);
    close(step(64, 2048), chunkS(64, 2048), 1e-9, "a measured point");
    close(step(64, 1280), (chunkS(64, 512) + chunkS(64, 2048)) / 2, 1e-9, "between contexts");
    close(step(160, 512), (chunkS(64, 512) + chunkS(256, 512)) / 2, 1e-9, "between sizes");
    close(
      gridded.latency.stepS([...decodes(4, 2000), { numTokens: 64, contextTokens: 2048 }]),
      truth.decodeS(4, 2000) + chunkS(64, 2048) - truth.overheadS,
      1e-9,
      "decodes plus a chunk pay the fixed step cost once",
    );
    assert.ok(step(32, 2048) > profile.latency.stepS([{ numTokens: 32, contextTokens: 2048 }]));
  });

  test("a chunk grid may get cheaper with more rows (CPU kernels switch), and is priced so between sizes", () => {
    const json = syntheticProfile();
    json.prefill.chunks = [
      { tokens: 48, contextTokens: 1024, seconds: 0.146 },
      { tokens: 64, contextTokens: 1024, seconds: 0.06 },
      { tokens: 128, contextTokens: 1024, seconds: 0.1 },
    ];
    const gridded = loadEngineProfile(json);
    const step = (n: number) => gridded.latency.stepS([{ numTokens: n, contextTokens: 1024 }]);
    close(step(48), 0.146, 1e-9, "48 rows as measured");
    close(step(64), 0.06, 1e-9, "64 rows as measured");
    close(step(56), 0.103, 1e-9, "56 rows halfway down");
    assert.ok(step(32) <= step(48), "below the grid, fewer rows never cost more than the smallest measured");
  });

  test("fits the quadratic from the prefill points when the file leaves it out", () => {
    const json = syntheticProfile();
    delete json.prefill.quadratic;
    const fitted = loadEngineProfile(json).prefillQuadratic;
    close(fitted.a, truth.prefill.a, 1e-6, "a");
    close(fitted.b, truth.prefill.b, 1e-6, "b");
    close(fitted.c, truth.prefill.c, 1e-6, "c");
  });

  test("a profile measured from the A100 8B model predicts that model off the measured grid within 2%", () => {
    const reference = getProfile("a100", "llama-3.1-8b").latency;
    assert.ok(reference instanceof RooflineLatencyModel);
    const measured = loadEngineProfile(profileMeasuring(reference, reference.spec.stepOverheadS)).latency;
    for (const [batch, context] of [
      [2, 500],
      [10, 3000],
      [40, 10000],
      [128, 12000],
    ] as const) {
      close(
        measured.stepS(decodes(batch, context)),
        reference.stepS(decodes(batch, context)),
        0.02,
        `${batch}@${context}`,
      );
    }
    for (const tokens of [3000, 12000, 24000]) {
      close(measured.prefillS(tokens), reference.prefillS(tokens), 0.02, `prefill ${tokens}`);
    }
  });
});

describe("loadEngineProfile rejects bad files with the reason", () => {
  test("another format", () => {
    assert.throws(
      () => loadEngineProfile({ ...syntheticProfile(), format: "vidur" }),
      /not a continuum profile/,
    );
  });

  test("a newer version", () => {
    assert.throws(() => loadEngineProfile({ ...syntheticProfile(), version: 2 }), /unsupported .*version 2/);
  });

  test("missing or invalid fields, naming their paths", () => {
    const { decode: _decode, ...withoutDecode } = syntheticProfile();
    assert.throws(() => loadEngineProfile(withoutDecode), /decode/);
    const negative = syntheticProfile();
    negative.decode.points[0] = { batch: 1, contextTokens: 0, seconds: -1 };
    assert.throws(() => loadEngineProfile(negative), /decode\.points\[0\]\.seconds/);
    assert.throws(() => loadEngineProfile("{}"), /invalid continuum profile/);
  });

  test("a quadratic-less file with too few prefill points to fit one", () => {
    const json = syntheticProfile();
    delete json.prefill.quadratic;
    json.prefill.points = json.prefill.points.slice(0, 2);
    assert.throws(() => loadEngineProfile(json), /fewer than 3/);
  });
});

test("the example in docs/profile-format.md loads", () => {
  const doc = readFileSync(
    fileURLToPath(new URL("../../../docs/profile-format.md", import.meta.url)),
    "utf8",
  );
  const example = /```json\n([\s\S]*?)```/.exec(doc)?.[1];
  assert.ok(example, "no json block in the doc");
  const profile = loadEngineProfile(JSON.parse(example));
  assert.equal(profile.id, "engine/cpu-epyc-7b13/qwen2.5-0.5b-instruct-q8_0");
  assert.ok(profile.latency.stepS([{ numTokens: 1, contextTokens: 1000 }]) > 0.031);
});
