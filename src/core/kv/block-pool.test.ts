import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { BlockPool } from "./block-pool.js";

/** Order in which the pool would hand out its free blocks: drain with allocate(1) on a copy of the state. */
function nextAllocations(pool: BlockPool, n: number): number[] {
  const got = pool.allocate(n);
  assert.ok(got, `expected ${n} free blocks`);
  return got;
}

describe("BlockPool", () => {
  it("validates its size", () => {
    assert.throws(() => new BlockPool(0, 16), /numBlocks/);
    assert.throws(() => new BlockPool(4, 0), /blockSizeTokens/);
    assert.throws(() => new BlockPool(2.5, 16), /numBlocks/);
  });

  it("allocates from the head of the free queue and reports usage", () => {
    const pool = new BlockPool(8, 16);
    assert.equal(pool.numFreeBlocks, 8);
    assert.equal(pool.usageFraction(), 0);
    const a = pool.allocate(3);
    assert.deepEqual(a, [0, 1, 2]);
    for (const b of a ?? []) assert.equal(pool.refCount(b), 1);
    assert.equal(pool.numUsedBlocks, 3);
    assert.equal(pool.numFreeBlocks, 5);
    assert.equal(pool.usageFraction(), 3 / 8);
    assert.equal(pool.allocate(6), null, "more than free must fail");
    assert.equal(pool.numFreeBlocks, 5, "a failed allocation takes nothing");
    pool.checkInvariants();
  });

  it("free puts blocks at the LRU tail in the given order, so tail-first freeing reuses a request's last blocks first", () => {
    const pool = new BlockPool(6, 16);
    const req = pool.allocate(4) as number[]; // [0,1,2,3]; 4,5 still free
    // The caller (KvCacheManager) frees tail first.
    pool.free([...req].reverse());
    // Free queue: 4, 5 (never used), then 3, 2, 1, 0.
    assert.deepEqual(nextAllocations(pool, 6), [4, 5, 3, 2, 1, 0]);
    pool.checkInvariants();
  });

  it("keeps a freed block's hash so a later lookup hits it until it is handed out again", () => {
    const pool = new BlockPool(4, 16);
    const [a, b] = pool.allocate(2) as number[];
    pool.cacheFullBlock(a as number, 111);
    pool.cacheFullBlock(b as number, 222);
    assert.equal(pool.numCachedBlocks, 2);
    pool.free([b as number, a as number]);
    assert.equal(pool.numFreeBlocks, 4);
    // Still cached while free.
    assert.equal(pool.lookup(111), a);
    assert.equal(pool.lookup(222), b);
    // A hit revives the block: it leaves the free queue with ref count 1.
    pool.touch([a as number]);
    assert.equal(pool.refCount(a as number), 1);
    assert.equal(pool.numFreeBlocks, 3);
    pool.checkInvariants();
    // Allocate everything else: blocks 2, 3 (never used) then b (the LRU free block) is reused.
    const rest = pool.allocate(3) as number[];
    assert.deepEqual(rest, [2, 3, b]);
    assert.equal(pool.lookup(222), -1, "reusing a block drops its cached content");
    assert.equal(pool.hashOf(b as number), 0);
    assert.equal(pool.lookup(111), a, "the revived block is still cached");
    assert.equal(pool.numCachedBlocks, 1);
    pool.checkInvariants();
  });

  it("shares an in-use block: touch adds a reference, each free drops one", () => {
    const pool = new BlockPool(2, 16);
    const [a] = pool.allocate(1) as number[];
    pool.cacheFullBlock(a as number, 7);
    pool.touch([a as number]);
    assert.equal(pool.refCount(a as number), 2);
    pool.free([a as number]);
    assert.equal(pool.refCount(a as number), 1);
    assert.equal(pool.numFreeBlocks, 1, "still held by one owner");
    pool.free([a as number]);
    assert.equal(pool.numFreeBlocks, 2);
    pool.checkInvariants();
  });

  it("throws on a double free and leaves the pool consistent", () => {
    const pool = new BlockPool(2, 16);
    const blocks = pool.allocate(1) as number[];
    pool.free(blocks);
    assert.throws(() => pool.free(blocks), /double free of block 0/);
    assert.throws(() => pool.free([1]), /double free of block 1/);
    pool.checkInvariants();
  });

  it("first writer wins when two blocks carry the same hash", () => {
    const pool = new BlockPool(3, 16);
    const [a, b] = pool.allocate(2) as number[];
    pool.cacheFullBlock(a as number, 99);
    pool.cacheFullBlock(b as number, 99);
    assert.equal(pool.lookup(99), a);
    assert.equal(pool.hashOf(b as number), 0);
    pool.cacheFullBlock(a as number, 100);
    assert.equal(pool.lookup(100), -1, "a cached block keeps its first hash");
    pool.checkInvariants();
  });

  it("LRU: the least recently freed cached block is the first evicted", () => {
    const pool = new BlockPool(3, 16);
    const blocks = pool.allocate(3) as number[];
    blocks.forEach((b, i) => {
      pool.cacheFullBlock(b, 1000 + i);
    });
    pool.free([blocks[1] as number]);
    pool.free([blocks[0] as number]);
    pool.free([blocks[2] as number]);
    // Hit block 1 and free it again: now it is the most recently freed.
    pool.touch([blocks[1] as number]);
    pool.free([blocks[1] as number]);
    const [first] = pool.allocate(1) as number[];
    assert.equal(first, blocks[0]);
    assert.equal(pool.lookup(1000), -1);
    assert.equal(pool.lookup(1001), blocks[1]);
    assert.equal(pool.lookup(1002), blocks[2]);
    pool.checkInvariants();
  });
});
