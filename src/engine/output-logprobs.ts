import type { OutputLogprob } from "./engine-api.js";

/**
 * The logprobs of a request's generated tokens, handed out with the text they belong to: a token's entry goes
 * out once text from its start on has been streamed (OutputText holds back partial characters and what may
 * be a stop string), so a stream's chunks carry the logprobs of exactly the tokens whose text they carry;
 * when generation ends, the rest (the end-of-generation token, a stop string's tokens) with the last chunk.
 */
export class OutputLogprobs {
  private readonly entries: OutputLogprob[] = [];
  private readonly starts: number[] = [];
  private released = 0;

  /** A generated token's entry; `start` is the output text's length before the token's bytes were added. */
  add(entry: OutputLogprob, start: number): void {
    this.entries.push(entry);
    this.starts.push(start);
  }

  /** Entries not handed out yet whose text starts before `emitted` (the length of the text streamed so far). */
  release(emitted: number): OutputLogprob[] {
    const from = this.released;
    while (this.released < this.entries.length && this.starts[this.released]! < emitted) this.released++;
    return this.entries.slice(from, this.released);
  }

  /** Every entry not handed out yet: generation ended. */
  releaseAll(): OutputLogprob[] {
    const from = this.released;
    this.released = this.entries.length;
    return this.entries.slice(from);
  }

  /** The entries handed out so far, in order: the logprobs of the request's final text. */
  get handedOut(): readonly OutputLogprob[] {
    return this.entries.slice(0, this.released);
  }
}
