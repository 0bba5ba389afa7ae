import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseLogitBiasSpec, resolveLogitBias, withRequestBias } from "./logit-bias.js";

describe("serve --logit-bias", () => {
  test("reads llama.cpp's TOKEN+BIAS / TOKEN-BIAS with a token id or eos, and nothing else", () => {
    assert.deepEqual(parseLogitBiasSpec("15043+1.5"), { token: 15043, bias: 1.5 });
    assert.deepEqual(parseLogitBiasSpec("eos-100"), { token: "eos", bias: -100 });
    assert.deepEqual(parseLogitBiasSpec(" eos+8 "), { token: "eos", bias: 8 });
    for (const bad of ["15043", "eos", "+5", "x+1", "12+101", "12+1e3", "12 + 1", "-3+1"]) {
      assert.equal(parseLogitBiasSpec(bad), null, bad);
    }
  });

  test("eos becomes the model's end token id; a token the model lacks is an error naming it", () => {
    const specs = [
      { token: "eos" as const, bias: 8 },
      { token: 5, bias: -1 },
    ];
    assert.deepEqual(resolveLogitBias(specs, 100, 2), [
      { token: 2, bias: 8 },
      { token: 5, bias: -1 },
    ]);
    assert.throws(
      () => resolveLogitBias(specs, 100, null),
      /eos: the model names no end-of-generation token/,
    );
    assert.throws(() => resolveLogitBias([{ token: 100, bias: 1 }], 100, 2), /--logit-bias 100: .*0 to 99/);
  });

  test("a request's own logit_bias is added to the server's and wins for the same token", () => {
    assert.deepEqual(
      withRequestBias(
        [
          { token: 2, bias: 8 },
          { token: 3, bias: 1 },
        ],
        [{ token: 2, bias: -100 }],
      ),
      [
        { token: 3, bias: 1 },
        { token: 2, bias: -100 },
      ],
    );
  });
});
