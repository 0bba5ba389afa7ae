import { hashTokenBlock, ROOT_HASH } from "./prefix-hash.js";

/**
 * What a request's KV holds, seen by the cache: the prefix hash of each full block of its sequence
 * (prompt, then generated tokens). The real engine hashes token ids; the simulator describes synthetic
 * conversations whose turns share prefixes without materialising tokens.
 */
export interface TokenContent {
  /** Hash of full block `index`; only asked for blocks whose tokens all exist. */
  blockHash(index: number): number;
  /** The token ids at positions [start, end), for content made of real tokens (the engine's). */
  tokenIds?(start: number, end: number): number[];
}

/** Content backed by real token ids; hashes are computed lazily and memoised. */
export class TokenIdContent implements TokenContent {
  private readonly tokens: number[];
  private readonly hashes: number[] = [];

  /** rootHash: where the hash chain starts; a salted root keeps this content's blocks apart from others' */
  constructor(
    promptTokenIds: readonly number[],
    private readonly blockSizeTokens: number,
    readonly rootHash: number = ROOT_HASH,
  ) {
    this.tokens = promptTokenIds.slice();
  }

  get length(): number {
    return this.tokens.length;
  }

  tokenAt(position: number): number {
    return this.tokens[position] as number;
  }

  tokenIds(start: number, end: number): number[] {
    return this.tokens.slice(start, end);
  }

  append(tokenId: number): void {
    this.tokens.push(tokenId);
  }

  blockHash(index: number): number {
    while (this.hashes.length <= index) {
      const i = this.hashes.length;
      const end = (i + 1) * this.blockSizeTokens;
      if (end > this.tokens.length) throw new Error(`block ${i} is not full yet`);
      const parent = i === 0 ? this.rootHash : (this.hashes[i - 1] as number);
      this.hashes.push(hashTokenBlock(parent, this.tokens, i * this.blockSizeTokens, end));
    }
    return this.hashes[index] as number;
  }
}

/** Content given directly as a precomputed array of block hashes (simulated conversations). */
export class BlockHashContent implements TokenContent {
  constructor(readonly hashes: ArrayLike<number>) {}

  blockHash(index: number): number {
    const hash = this.hashes[index];
    if (hash === undefined) throw new Error(`block ${index} is beyond the described content`);
    return hash;
  }
}
