/**
 * A forwarded turn's KV as the gateway's model of the backend sees it, without the backend's tokenizer: the
 * prompt's text hashed in blocks of a fixed number of characters (a returning turn whose messages repeat its
 * previous turn's hits the blocks that turn's prompt left), each block standing for a block of the model's
 * tokens; blocks past the text (the output, and prompts with fewer characters per token than assumed) hash
 * on their own, unique to the turn.
 */
import { extendHash, ROOT_HASH } from "../core/kv/prefix-hash.js";
import type { TokenContent } from "../core/kv/token-content.js";

/** Characters hashed per token position: a fixed rate, so that equal texts give equal blocks whatever the backend. */
export const HASHED_CHARS_PER_TOKEN = 4;

export class TurnContent implements TokenContent {
  private readonly hashes: number[] = [];

  constructor(
    private readonly text: string,
    private readonly blockSizeTokens: number,
    private readonly rootHash: number,
    /** unique to the turn: what blocks past the text hash from */
    private readonly turnSalt: number,
  ) {}

  blockHash(index: number): number {
    const charsPerBlock = this.blockSizeTokens * HASHED_CHARS_PER_TOKEN;
    while (this.hashes.length <= index) {
      const i = this.hashes.length;
      const parent = i === 0 ? this.rootHash : (this.hashes[i - 1] as number);
      const start = i * charsPerBlock;
      const end = start + charsPerBlock;
      let h: number;
      if (end <= this.text.length) {
        h = extendHash(parent, charsPerBlock);
        for (let c = start; c < end; c++) h = extendHash(h, this.text.charCodeAt(c));
      } else {
        h = extendHash(extendHash(parent, this.turnSalt), i);
      }
      this.hashes.push(h === ROOT_HASH ? 1 : h);
    }
    return this.hashes[index] as number;
  }
}

/**
 * Characters per token of a backend's tokenizer over prompt texts as the gateway writes them, learnt from
 * the prompt tokens each answer reports (a moving average; 4 until the first long prompt is answered).
 */
export class CharsPerToken {
  private value = HASHED_CHARS_PER_TOKEN;
  private samples = 0;

  get current(): number {
    return this.value;
  }

  observe(chars: number, tokens: number): void {
    // short prompts are mostly the template's framing: they say little of the text's rate
    if (tokens < 64 || chars <= 0) return;
    const rate = chars / tokens;
    this.samples++;
    const weight = Math.max(0.05, 1 / this.samples);
    this.value += weight * (rate - this.value);
  }

  tokensOf(chars: number): number {
    return Math.max(1, Math.ceil(chars / this.value));
  }
}
