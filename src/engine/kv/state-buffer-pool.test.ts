import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { StateBufferPool } from "./state-buffer-pool.js";

describe("StateBufferPool", () => {
  it("gives a dropped state's memory to the next save that fits, the smallest that fits first", () => {
    const pool = new StateBufferPool(4);
    const big = pool.take(4000);
    const small = pool.take(1000);
    assert.ok(big.length >= 4000 && small.length >= 1000);
    pool.give(big.subarray(0, 4000));
    pool.give(small.subarray(0, 1000));
    assert.equal(pool.take(900).buffer, small.buffer);
    assert.equal(pool.take(3000).buffer, big.buffer);
    assert.deepEqual({ reused: pool.reused, allocated: pool.allocated }, { reused: 2, allocated: 2 });
  });

  it("gives a short state new memory rather than a spare buffer over twice its size (the tier pays the buffer)", () => {
    const pool = new StateBufferPool(4);
    const big = pool.take(4_000_000);
    pool.give(big.subarray(0, 4_000_000));
    const small = pool.take(100_000);
    assert.notEqual(small.buffer, big.buffer);
    assert.ok(pool.capacityOf(small) < 200_000, "charged about its own size, not the spare's 4 MB");
    assert.equal(
      pool.take(2_500_000).buffer,
      big.buffer,
      "the spare still serves a state of over half its size",
    );
  });

  it("takes new memory from its allocator (page-locked memory when the KV lives on a GPU)", () => {
    const sizes: number[] = [];
    const pool = new StateBufferPool(4, (bytes) => {
      sizes.push(bytes);
      return Buffer.alloc(bytes);
    });
    const first = pool.take(1000);
    pool.give(first.subarray(0, 1000));
    pool.take(1000);
    pool.take(3000);
    assert.equal(sizes.length, 2, "a reused buffer is not allocated again");
    assert.ok((sizes[0] as number) >= 1000 && (sizes[1] as number) >= 3000);
  });

  it("leaves headroom so a program's next, slightly longer state reuses its last one's buffer", () => {
    const pool = new StateBufferPool(4);
    const first = pool.take(5_000_000);
    pool.give(first.subarray(0, 5_000_000));
    assert.equal(pool.take(5_400_000).buffer, first.buffer);
  });

  it("never hands out memory it did not allocate, and counts a state by the memory behind it", () => {
    const pool = new StateBufferPool(4);
    const foreign = Buffer.from("a small string lives in a shared slab");
    pool.give(foreign);
    assert.notEqual(pool.take(8).buffer, foreign.buffer);
    assert.equal(pool.capacityOf(foreign), foreign.length);
    const own = pool.take(1000);
    assert.equal(pool.capacityOf(own.subarray(0, 10)), own.buffer.byteLength);
  });

  it("keeps only the largest few spare buffers", () => {
    const pool = new StateBufferPool(2);
    const buffers = [100, 200, 300].map((n) => pool.take(n));
    for (const b of buffers) pool.give(b);
    assert.notEqual(pool.take(100).buffer, buffers[0]?.buffer, "the smallest was let go");
    assert.equal(pool.take(200).buffer, buffers[1]?.buffer);
  });
});
