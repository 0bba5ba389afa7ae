import type { Request } from "./request.js";

/** a runs before b: policy priority (lexicographic, smaller first), then global arrival order. */
export function runsBefore(a: Request, b: Request): boolean {
  const pa = a.priority;
  const pb = b.priority;
  for (let i = 0; i < 3; i++) {
    const x = pa[i] as number;
    const y = pb[i] as number;
    if (x !== y) return x < y;
  }
  return a.sequenceNumber < b.sequenceNumber;
}

/**
 * Waiting requests kept sorted by priority. Insertion is a binary search plus one splice: cheaper than a
 * heap for the queue sizes seen (thousands), and it supports removing any request when a program's
 * priority changes (pins, aborts).
 */
export class WaitingQueue {
  private readonly items: Request[] = [];

  get length(): number {
    return this.items.length;
  }

  peek(): Request | undefined {
    return this.items[0];
  }

  at(index: number): Request | undefined {
    return this.items[index];
  }

  insert(request: Request): void {
    let lo = 0;
    let hi = this.items.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (runsBefore(this.items[mid] as Request, request)) lo = mid + 1;
      else hi = mid;
    }
    this.items.splice(lo, 0, request);
  }

  shift(): Request | undefined {
    return this.items.shift();
  }

  remove(request: Request): boolean {
    const index = this.items.indexOf(request);
    if (index < 0) return false;
    this.items.splice(index, 1);
    return true;
  }

  /** Re-sorts after priorities changed in place (policies whose priorities move with time). */
  resort(): void {
    this.items.sort((a, b) => (runsBefore(a, b) ? -1 : runsBefore(b, a) ? 1 : 0));
  }

  [Symbol.iterator](): Iterator<Request> {
    return this.items[Symbol.iterator]();
  }
}
