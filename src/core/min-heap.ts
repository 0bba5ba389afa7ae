/** Binary min-heap ordered by a numeric key, ties broken by insertion order (deterministic replays). */
export class MinHeap<T> {
  private readonly keys: number[] = [];
  private readonly orders: number[] = [];
  private readonly values: T[] = [];
  private inserted = 0;

  get size(): number {
    return this.values.length;
  }

  peekKey(): number | undefined {
    return this.keys[0];
  }

  push(key: number, value: T): void {
    this.keys.push(key);
    this.orders.push(this.inserted++);
    this.values.push(value);
    this.siftUp(this.values.length - 1);
  }

  pop(): T | undefined {
    const n = this.values.length;
    if (n === 0) return undefined;
    const top = this.values[0] as T;
    this.move(n - 1, 0);
    this.keys.pop();
    this.orders.pop();
    this.values.pop();
    if (this.values.length > 0) this.siftDown(0);
    return top;
  }

  private less(i: number, j: number): boolean {
    const a = this.keys[i] as number;
    const b = this.keys[j] as number;
    return a < b || (a === b && (this.orders[i] as number) < (this.orders[j] as number));
  }

  private swap(i: number, j: number): void {
    [this.keys[i], this.keys[j]] = [this.keys[j] as number, this.keys[i] as number];
    [this.orders[i], this.orders[j]] = [this.orders[j] as number, this.orders[i] as number];
    [this.values[i], this.values[j]] = [this.values[j] as T, this.values[i] as T];
  }

  private move(from: number, to: number): void {
    this.keys[to] = this.keys[from] as number;
    this.orders[to] = this.orders[from] as number;
    this.values[to] = this.values[from] as T;
  }

  private siftUp(i: number): void {
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) return;
      this.swap(i, parent);
      i = parent;
    }
  }

  private siftDown(i: number): void {
    const n = this.values.length;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let smallest = i;
      if (l < n && this.less(l, smallest)) smallest = l;
      if (r < n && this.less(r, smallest)) smallest = r;
      if (smallest === i) return;
      this.swap(i, smallest);
      i = smallest;
    }
  }
}
