import { extendHash, ROOT_HASH } from "../core/kv/prefix-hash.js";
import { BlockHashContent } from "../core/kv/token-content.js";

/**
 * The KV content of one simulated agent program, turn after turn, without materialising tokens: turn i's
 * first `cached` tokens are the previous turn's prompt + output, the rest is new. Equal block hashes then
 * mean exactly what they mean for real token ids, so the real prefix cache sees real sharing.
 */
export class SyntheticConversation {
  private previous = new Float64Array(0);

  constructor(
    private readonly programSalt: number,
    private readonly blockSizeTokens: number,
  ) {}

  nextTurn(
    turnIndex: number,
    inputTokens: number,
    cachedTokens: number,
    outputTokens: number,
  ): BlockHashContent {
    const numBlocks = Math.floor((inputTokens + outputTokens) / this.blockSizeTokens);
    const sharedBlocks = Math.min(
      Math.floor(cachedTokens / this.blockSizeTokens),
      this.previous.length,
      numBlocks,
    );
    const hashes = new Float64Array(numBlocks);
    hashes.set(this.previous.subarray(0, sharedBlocks));
    const turnSalt = extendHash(this.programSalt, turnIndex);
    for (let b = sharedBlocks; b < numBlocks; b++) {
      const parent = b === 0 ? ROOT_HASH : (hashes[b - 1] as number);
      hashes[b] = extendHash(parent, (turnSalt + b) >>> 0) || 1;
    }
    this.previous = hashes;
    return new BlockHashContent(hashes);
  }
}
