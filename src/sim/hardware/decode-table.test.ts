import assert from "node:assert/strict";
import { test } from "node:test";
import { DecodeTable } from "./decode-table.js";

const noPrefillSlope = { a: 0, b: 0 };

test("measurement noise never makes a longer context cheaper", () => {
  const table = new DecodeTable(
    [
      { batch: 4, contextTokens: 0, seconds: 0.1 },
      { batch: 4, contextTokens: 1000, seconds: 0.12 },
      { batch: 4, contextTokens: 2000, seconds: 0.115 },
      { batch: 4, contextTokens: 4000, seconds: 0.14 },
    ],
    noPrefillSlope,
  );
  let previous = 0;
  for (let context = 0; context <= 5000; context += 250) {
    const s = table.seconds(4, context);
    assert.ok(s >= previous, `${context}: ${s} < ${previous}`);
    previous = s;
  }
});

test("a single measured point borrows its slopes from the prefill quadratic", () => {
  const tokenCost = { a: 1e-8, b: 1e-3 };
  const table = new DecodeTable([{ batch: 1, contextTokens: 1000, seconds: 0.05 }], tokenCost);
  // one more key per sequence costs 2a; one more sequence costs a token at that context, b + 2ac
  assert.ok(Math.abs(table.seconds(1, 3000) - (0.05 + 2000 * 2e-8)) < 1e-12);
  assert.ok(Math.abs(table.seconds(3, 1000) - (0.05 + 2 * (1e-3 + 2e-5))) < 1e-12);
});

test("batches below the smallest measured one extrapolate down, never below zero", () => {
  const table = new DecodeTable(
    [
      { batch: 8, contextTokens: 0, seconds: 0.2 },
      { batch: 16, contextTokens: 0, seconds: 0.3 },
    ],
    noPrefillSlope,
  );
  assert.ok(Math.abs(table.seconds(4, 0) - 0.15) < 1e-12);
  assert.ok(Math.abs(table.seconds(1, 0) - 0.1125) < 1e-12);
  const steep = new DecodeTable(
    [
      { batch: 2, contextTokens: 0, seconds: 0.01 },
      { batch: 3, contextTokens: 0, seconds: 1 },
    ],
    noPrefillSlope,
  );
  assert.equal(steep.seconds(1, 0), 0);
});
