import { BinaryHeap } from "./binary-heap.js";

interface Entry<T> {
  readonly key: number;
  readonly order: number;
  readonly value: T;
}

/** Min-heap ordered by a numeric key, ties broken by insertion order (deterministic replays). */
export class MinHeap<T> {
  private readonly heap = new BinaryHeap<Entry<T>>(
    (a, b) => a.key < b.key || (a.key === b.key && a.order < b.order),
  );
  private inserted = 0;

  get size(): number {
    return this.heap.size;
  }

  peekKey(): number | undefined {
    return this.heap.peek()?.key;
  }

  push(key: number, value: T): void {
    this.heap.push({ key, order: this.inserted++, value });
  }

  pop(): T | undefined {
    return this.heap.pop()?.value;
  }
}
