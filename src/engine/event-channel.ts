/**
 * A single-consumer async queue: the engine loop pushes, the HTTP handler pulls with for-await. Ending
 * the iteration early (break, return()) calls `onCancel`, which the engine treats as a client abort.
 */
export class EventChannel<T> implements AsyncIterable<T> {
  private readonly queue: T[] = [];
  private waiter: { resolve: (r: IteratorResult<T>) => void; reject: (e: unknown) => void } | null = null;
  private ended = false;
  private failure: { error: unknown } | null = null;
  private iterated = false;

  constructor(private readonly onCancel: () => void = () => {}) {}

  get closed(): boolean {
    return this.ended;
  }

  push(value: T): void {
    if (this.ended) return;
    if (this.waiter) {
      const { resolve } = this.waiter;
      this.waiter = null;
      resolve({ value, done: false });
    } else {
      this.queue.push(value);
    }
  }

  /** No more values; the consumer gets what is queued, then the end. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.waiter && this.queue.length === 0) {
      const { resolve } = this.waiter;
      this.waiter = null;
      resolve({ value: undefined, done: true });
    }
  }

  /** Ends with an error, thrown to the consumer after what is queued. */
  fail(error: unknown): void {
    if (this.ended) return;
    this.failure = { error };
    this.ended = true;
    if (this.waiter && this.queue.length === 0) {
      const { reject } = this.waiter;
      this.waiter = null;
      reject(error);
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.iterated) throw new Error("a generation stream can be iterated only once");
    this.iterated = true;
    return {
      next: () => {
        const value = this.queue.shift();
        if (value !== undefined) return Promise.resolve({ value, done: false });
        if (this.ended) {
          if (this.failure) {
            const { error } = this.failure;
            this.failure = null;
            return Promise.reject(error);
          }
          return Promise.resolve({ value: undefined, done: true });
        }
        return new Promise((resolve, reject) => {
          this.waiter = { resolve, reject };
        });
      },
      return: () => {
        if (!this.ended) {
          this.ended = true;
          this.queue.length = 0;
          this.onCancel();
        }
        if (this.waiter) {
          const { resolve } = this.waiter;
          this.waiter = null;
          resolve({ value: undefined, done: true });
        }
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
