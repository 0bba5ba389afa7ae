import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseReferenceSteps } from "./step-reference.js";

describe("reference steps", () => {
  test("reads prefill and decode lines, skips the others, and names a bad line", () => {
    const steps = parseReferenceSteps(
      [
        '{"kind": "info", "gpu": "x"}',
        '{"kind": "prefill", "N": 512, "P": 0, "ms": 14.5}',
        "",
        '{"kind": "decode", "B": 8, "L": 1024, "ms": 7.2, "ms_eager": 7.9}',
        '{"kind": "done", "s": 1}',
      ].join("\n"),
    );
    assert.deepEqual(steps, [
      { shape: { kind: "prefill", N: 512, P: 0 }, ms: 14.5 },
      { shape: { kind: "decode", B: 8, L: 1024 }, ms: 7.2 },
    ]);
    assert.throws(
      () => parseReferenceSteps('{"kind":"info"}\n{"kind":"decode","B":0,"L":5,"ms":1}'),
      /line 2: .*B >= 1/,
    );
    assert.throws(() => parseReferenceSteps('{"kind":"prefill","N":5,"P":0}'), /line 1: .*ms > 0/);
    assert.throws(() => parseReferenceSteps("{kind"), /line 1: not JSON/);
    assert.throws(
      () => parseReferenceSteps('{"kind": "decode", "B": 8, "ms": 1}'),
      /line 1: a decode step needs an integer L/,
    );
  });
});
