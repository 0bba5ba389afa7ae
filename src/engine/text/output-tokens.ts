/**
 * What a request's generated tokens carry (their logprobs, their ids), handed out with the text they belong
 * to: a token's entry goes out once text from its start on has been streamed (OutputText holds back partial
 * characters and what may be a stop string), so a stream's chunks carry the entries of exactly the tokens
 * whose text they carry; when generation ends, the rest (the end-of-generation token, a stop string's
 * tokens) with the last chunk.
 */
export class OutputTokens<T> {
  private readonly entries: T[] = [];
  private readonly starts: number[] = [];
  private released = 0;

  /** A generated token's entry; `start` is the output text's length before the token's bytes were added. */
  add(entry: T, start: number): void {
    this.entries.push(entry);
    this.starts.push(start);
  }

  /** Entries not handed out yet whose text starts before `emitted` (the length of the text streamed so far). */
  release(emitted: number): T[] {
    const from = this.released;
    while (this.released < this.entries.length && this.starts[this.released]! < emitted) this.released++;
    return this.entries.slice(from, this.released);
  }

  /** Every entry not handed out yet: generation ended. */
  releaseAll(): T[] {
    const from = this.released;
    this.released = this.entries.length;
    return this.entries.slice(from);
  }

  /** The entries handed out so far, in order: those of the request's final text. */
  get handedOut(): readonly T[] {
    return this.entries.slice(0, this.released);
  }
}
