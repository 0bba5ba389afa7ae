import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { BlockHashContent } from "../../core/kv/token-content.js";
import fc from "../../core/test-support/fast-check.js";
import { blockIdContent } from "./block-id-content.js";

/** Leading blocks two contents share. */
function shared(a: BlockHashContent, b: BlockHashContent): number {
  const n = Math.min(a.hashes.length, b.hashes.length);
  let k = 0;
  while (k < n && a.hashes[k] === b.hashes[k]) k++;
  return k;
}

describe("blockIdContent", () => {
  it("shares exactly the scheduler blocks whose tokens equal ids cover (64-token ids, 16-token blocks)", () => {
    // 200 tokens: ids [1,2,3,4] cover 0-255; the next call resends [1,2,3] then differs
    const a = blockIdContent([1, 2, 3, 4], 64, 200, 20, 16, "s", 1);
    const b = blockIdContent([1, 2, 3, 9, 10], 64, 300, 20, 16, "s", 2);
    assert.equal(a.hashes.length, Math.floor(220 / 16));
    // blocks 0-11 (tokens 0-191) lie within ids 1-3; block 12 (192-207) reaches id 4 vs 9
    assert.equal(shared(a, b), 12);
  });

  it("never shares generated tokens' blocks, nor anything across cache scopes", () => {
    const a = blockIdContent([1, 2], 64, 100, 60, 16, "s", 1);
    const b = blockIdContent([1, 2, 3], 64, 192, 10, 16, "s", 2);
    // a's prompt: 100 tokens -> 6 full blocks from ids; block 6 (96-111) holds generated tokens
    assert.equal(shared(a, b), 6);
    assert.equal(
      shared(blockIdContent([1, 2], 64, 128, 1, 16, "s", 1), blockIdContent([1, 2], 64, 128, 1, 16, "t", 1)),
      0,
    );
  });

  it("treats a prompt its ids do not cover as the call's own past the ids", () => {
    const a = blockIdContent([1], 64, 128, 1, 16, "s", 1);
    const b = blockIdContent([1], 64, 128, 1, 16, "s", 2);
    assert.equal(shared(a, b), 4);
  });

  it("keeps prefix identity at any pair of block sizes (property)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 600 }),
        fc.constantFrom(16, 32),
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 12 }),
        fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 3000 }),
        fc.integer({ min: 1, max: 3000 }),
        (traceBlock, block, idsA, idsB, inputA, inputB) => {
          const a = blockIdContent(idsA, traceBlock, inputA, 5, block, "s", 1);
          const b = blockIdContent(idsB, traceBlock, inputB, 5, block, "s", 2);
          let sameIds = 0;
          while (sameIds < Math.min(idsA.length, idsB.length) && idsA[sameIds] === idsB[sameIds]) sameIds++;
          // tokens the common ids cover, within both prompts and both id lists
          const coveredTokens = Math.min(sameIds * traceBlock, inputA, inputB);
          assert.equal(shared(a, b), Math.floor(coveredTokens / block));
        },
      ),
      { seed: 55, numRuns: 500 },
    );
  });
});
