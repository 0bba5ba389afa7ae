import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KvBlockObserver, StoredBlocks } from "./block-events.js";
import { BlockPool } from "./block-pool.js";
import { hashTokenBlock, ROOT_HASH } from "./prefix-hash.js";
import { BlockHashContent, TokenIdContent } from "./token-content.js";

/** An observer that records what it hears and mirrors the cache's hash set from it. */
function mirror(
  needsTokenIds = true,
): KvBlockObserver & { stored: StoredBlocks[]; removed: number[][]; hashes: Set<number> } {
  const stored: StoredBlocks[] = [];
  const removed: number[][] = [];
  const hashes = new Set<number>();
  return {
    needsTokenIds,
    stored,
    removed,
    hashes,
    blocksStored(s) {
      stored.push(s);
      for (const h of s.hashes) hashes.add(h);
    },
    blocksRemoved(h) {
      removed.push([...h]);
      for (const x of h) hashes.delete(x);
    },
  };
}

function registered(pool: BlockPool): Set<number> {
  const out = new Set<number>();
  for (let b = 0; b < pool.numBlocks; b++) if (pool.hashOf(b) !== 0) out.add(pool.hashOf(b));
  return out;
}

const B = 4;

describe("BlockPool observer", () => {
  it("hears each run of newly cached blocks with its parent hash and tokens, and every eviction", () => {
    const events = mirror();
    const pool = new BlockPool(6, B, events);
    const a = new TokenIdContent([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13], B);
    const aBlocks = pool.allocate(4) as number[];
    pool.cacheSequenceBlocks(aBlocks, a, 0, 3);
    assert.deepEqual(events.stored, [
      {
        hashes: [a.blockHash(0), a.blockHash(1), a.blockHash(2)],
        parentHash: null,
        tokenIds: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
        blockSizeTokens: B,
      },
    ]);
    // the hashes chain: each block's hash covers its tokens after its parent's hash
    assert.equal(a.blockHash(0), hashTokenBlock(ROOT_HASH, [1, 2, 3, 4], 0, 4));
    assert.equal(a.blockHash(1), hashTokenBlock(a.blockHash(0), [5, 6, 7, 8], 0, 4));
    pool.cacheSequenceBlocks(aBlocks, a, 0, 3);
    assert.equal(events.stored.length, 1, "blocks already cached are not told again");

    // b shares a's first block (cached by a's block, so b's copy is not registered) and then differs
    const b = new TokenIdContent([1, 2, 3, 4, 50, 60, 70, 80], B);
    const bBlocks = pool.allocate(2) as number[];
    pool.cacheSequenceBlocks(bBlocks, b, 0, 2);
    assert.deepEqual(events.stored[1], {
      hashes: [b.blockHash(1)],
      parentHash: a.blockHash(0),
      tokenIds: [50, 60, 70, 80],
      blockSizeTokens: B,
    });
    assert.deepEqual(events.hashes, registered(pool));
    assert.deepEqual(events.removed, []);

    // freed blocks stay cached (no event) until they are handed out for new content
    pool.free([...bBlocks].reverse());
    pool.free([...aBlocks].reverse());
    assert.deepEqual(events.removed, []);
    pool.allocate(3);
    assert.deepEqual(
      events.removed,
      [[b.blockHash(1)]],
      "b's second block, b's first (no hash), a's unfull 4th",
    );
    pool.allocate(3);
    assert.deepEqual(events.removed[1], [a.blockHash(2), a.blockHash(1), a.blockHash(0)]);
    assert.deepEqual(events.hashes, registered(pool));
    assert.equal(events.hashes.size, 0);
    pool.checkInvariants();
  });

  it("leaves the tokens out for an observer that needs hashes only", () => {
    const events = mirror(false);
    const pool = new BlockPool(6, B, events);
    const a = new TokenIdContent([1, 2, 3, 4, 5, 6, 7, 8, 9], B);
    pool.cacheSequenceBlocks(pool.allocate(3) as number[], a, 0, 2);
    assert.deepEqual(events.stored, [
      { hashes: [a.blockHash(0), a.blockHash(1)], parentHash: null, tokenIds: [], blockSizeTokens: B },
    ]);
  });

  it("a duplicate block in the middle of a run splits it; the next run's parent is the duplicate's hash", () => {
    const events = mirror();
    const pool = new BlockPool(8, B, events);
    const tokens = [1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3];
    const first = new TokenIdContent(tokens, B);
    const firstBlocks = pool.allocate(3) as number[];
    pool.cacheSequenceBlocks(firstBlocks, first, 1, 2); // only the middle block
    const second = new TokenIdContent(tokens, B);
    const secondBlocks = pool.allocate(3) as number[];
    pool.cacheSequenceBlocks(secondBlocks, second, 0, 3);
    assert.deepEqual(
      events.stored.map((s) => [s.hashes, s.parentHash]),
      [
        [[first.blockHash(1)], first.blockHash(0)],
        [[second.blockHash(0)], null],
        [[second.blockHash(2)], second.blockHash(1)],
      ],
    );
    assert.deepEqual(events.hashes, registered(pool));
  });

  it("content without token ids (the simulator's) reports empty tokens", () => {
    const events = mirror();
    const pool = new BlockPool(2, B, events);
    pool.cacheSequenceBlocks(pool.allocate(2) as number[], new BlockHashContent([11, 12]), 0, 2);
    assert.deepEqual(events.stored, [
      { hashes: [11, 12], parentHash: null, tokenIds: [], blockSizeTokens: B },
    ]);
  });
});
