import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "../test-support/fast-check.js";
import { BinaryHeap } from "./binary-heap.js";
import { MinHeap } from "./min-heap.js";

describe("BinaryHeap", () => {
  test("pops in its order, for any pushes", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -50, max: 50 })), (xs) => {
        const heap = new BinaryHeap<number>((a, b) => a > b);
        for (const x of xs) heap.push(x);
        const out: number[] = [];
        while (heap.size > 0) out.push(heap.pop() as number);
        assert.deepEqual(
          out,
          [...xs].sort((a, b) => b - a),
        );
        assert.equal(heap.pop(), undefined);
      }),
    );
  });

  test("MinHeap breaks key ties by insertion order (deterministic replays)", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5 })), (keys) => {
        const heap = new MinHeap<number>();
        for (const [i, k] of keys.entries()) heap.push(k, i);
        const out: number[] = [];
        while (heap.size > 0) out.push(heap.pop() as number);
        const expected = keys.map((k, i) => [k, i] as const).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
        assert.deepEqual(
          out,
          expected.map(([, i]) => i),
        );
      }),
    );
  });
});
