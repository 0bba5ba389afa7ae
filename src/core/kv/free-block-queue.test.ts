import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FreeBlockQueue } from "./free-block-queue.js";

function queueOf(capacity: number, ids: readonly number[]): FreeBlockQueue {
  const q = new FreeBlockQueue(capacity);
  for (const id of ids) q.pushTail(id);
  return q;
}

describe("FreeBlockQueue", () => {
  it("pops in push order (least recently freed first)", () => {
    const q = queueOf(8, [5, 2, 7, 0]);
    assert.deepEqual(q.toArray(), [5, 2, 7, 0]);
    assert.equal(q.popHead(), 5);
    assert.equal(q.popHead(), 2);
    q.pushTail(5);
    assert.deepEqual(q.toArray(), [7, 0, 5]);
    assert.equal(q.length, 3);
  });

  it("removes from the head, the middle and the tail, keeping the order of the rest", () => {
    const q = queueOf(6, [0, 1, 2, 3, 4, 5]);
    q.remove(3);
    assert.deepEqual(q.toArray(), [0, 1, 2, 4, 5]);
    q.remove(0);
    assert.deepEqual(q.toArray(), [1, 2, 4, 5]);
    q.remove(5);
    assert.deepEqual(q.toArray(), [1, 2, 4]);
    assert.equal(q.has(3), false);
    assert.equal(q.has(2), true);
    q.pushTail(3);
    assert.deepEqual(q.toArray(), [1, 2, 4, 3]);
    for (const id of [2, 1, 3, 4]) q.remove(id);
    assert.equal(q.length, 0);
    assert.deepEqual(q.toArray(), []);
    assert.throws(() => q.popHead(), /no free block/);
    q.pushTail(2);
    assert.deepEqual(q.toArray(), [2]);
  });

  it("rejects pushing a block twice and removing a block that is not free", () => {
    const q = queueOf(4, [1]);
    assert.throws(() => q.pushTail(1), /already free/);
    assert.throws(() => q.remove(2), /not free/);
  });

  it("removes from the middle in O(1): 200k middle removals on a 200k queue stay fast", () => {
    const n = 200_000;
    const q = new FreeBlockQueue(n);
    for (let b = 0; b < n; b++) q.pushTail(b);
    const start = performance.now();
    // Remove every block from the middle outwards: a linear-time remove would cost ~n^2/4 = 1e10 steps.
    for (let k = 0; k < n / 2; k++) {
      q.remove(n / 2 + k);
      q.remove(n / 2 - 1 - k);
    }
    const elapsedMs = performance.now() - start;
    assert.equal(q.length, 0);
    assert.ok(elapsedMs < 500, `200k removals took ${elapsedMs.toFixed(0)} ms`);
  });

  it("matches a reference array under random pushes, pops and removals", () => {
    const capacity = 64;
    const q = new FreeBlockQueue(capacity);
    const ref: number[] = [];
    let seed = 12345;
    const rand = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return seed % n;
    };
    for (let i = 0; i < 20_000; i++) {
      const op = rand(3);
      if (op === 0) {
        const b = rand(capacity);
        if (!ref.includes(b)) {
          q.pushTail(b);
          ref.push(b);
        }
      } else if (op === 1 && ref.length > 0) {
        assert.equal(q.popHead(), ref.shift());
      } else if (ref.length > 0) {
        const b = ref[rand(ref.length)] as number;
        q.remove(b);
        ref.splice(ref.indexOf(b), 1);
      }
      assert.equal(q.length, ref.length);
    }
    assert.deepEqual(q.toArray(), ref);
  });
});
