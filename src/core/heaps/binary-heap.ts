/** A binary heap over any order: `before(a, b)` says whether a comes out first. */
export class BinaryHeap<T> {
  private readonly items: T[] = [];

  constructor(private readonly before: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const h = this.items;
    h.push(item);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(h[i] as T, h[parent] as T)) return;
      [h[i], h[parent]] = [h[parent] as T, h[i] as T];
      i = parent;
    }
  }

  pop(): T | undefined {
    const h = this.items;
    const top = h[0];
    const last = h.pop();
    if (h.length === 0 || last === undefined) return top;
    h[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let first = i;
      if (l < h.length && this.before(h[l] as T, h[first] as T)) first = l;
      if (r < h.length && this.before(h[r] as T, h[first] as T)) first = r;
      if (first === i) return top;
      [h[i], h[first]] = [h[first] as T, h[i] as T];
      i = first;
    }
  }
}
