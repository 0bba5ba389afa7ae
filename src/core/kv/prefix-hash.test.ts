import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { blockHashes } from "../test-support/drive.js";
import fc from "../test-support/fast-check.js";
import { extendHash, hashTokenBlock, ROOT_HASH } from "./prefix-hash.js";
import { BlockHashContent, TokenIdContent } from "./token-content.js";

describe("prefix hashes", () => {
  it("equal prefixes give equal hashes, whatever follows", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 200_000 }), { minLength: 16, maxLength: 96 }),
        fc.array(fc.integer({ min: 0, max: 200_000 }), { maxLength: 64 }),
        fc.array(fc.integer({ min: 0, max: 200_000 }), { maxLength: 64 }),
        (prefix, tailA, tailB) => {
          const a = blockHashes([...prefix, ...tailA], 8);
          const b = blockHashes([...prefix, ...tailB], 8);
          const shared = Math.floor(prefix.length / 8);
          assert.deepEqual(a.slice(0, shared), b.slice(0, shared));
        },
      ),
    );
  });

  it("changing one early token changes that block's hash and every later one", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 100_000 }), { minLength: 32, maxLength: 128 }),
        fc.nat(),
        (tokens, pick) => {
          const position = pick % tokens.length;
          const changed = tokens.slice();
          changed[position] = (changed[position] as number) + 1;
          const a = blockHashes(tokens, 8);
          const b = blockHashes(changed, 8);
          const firstChanged = Math.floor(position / 8);
          for (let i = 0; i < a.length; i++) {
            if (i < firstChanged) assert.equal(a[i], b[i], `block ${i} precedes the change`);
            else assert.notEqual(a[i], b[i], `block ${i} follows the change at ${position}`);
          }
        },
      ),
    );
  });

  it("hashes are positive integers below 2^52, never the root hash", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 2 ** 31 - 1 }), { minLength: 4, maxLength: 64 }),
        (tokens) => {
          for (const h of blockHashes(tokens, 4)) {
            assert.ok(Number.isSafeInteger(h) && h > 0 && h < 2 ** 52, `bad hash ${h}`);
            assert.notEqual(h, ROOT_HASH);
          }
        },
      ),
    );
  });

  it("the same tokens in a different block position (different parent) hash differently", () => {
    const block = [1, 2, 3, 4];
    assert.notEqual(
      hashTokenBlock(ROOT_HASH, block, 0, 4),
      hashTokenBlock(extendHash(ROOT_HASH, 9), block, 0, 4),
    );
    const [h0, h1] = blockHashes([...block, ...block], 4);
    assert.notEqual(h0, h1);
  });

  it("TokenIdContent hashes lazily as tokens are appended and agrees with the chained hash", () => {
    const tokens = Array.from({ length: 40 }, (_, i) => i * 7);
    const content = new TokenIdContent(tokens.slice(0, 20), 16);
    assert.equal(content.blockHash(0), blockHashes(tokens, 16)[0]);
    assert.throws(() => content.blockHash(1), /not full yet/);
    for (let i = 20; i < 32; i++) content.append(tokens[i] as number);
    assert.equal(content.blockHash(1), blockHashes(tokens, 16)[1]);
    assert.equal(content.length, 32);
    assert.throws(() => new BlockHashContent([1, 2]).blockHash(2), /beyond/);
  });
});
