/**
 * Prompt text for a traced call from its block ids, as AgentX's replay builds it: filler whose text at a
 * position depends only on the block id covering it (and the replay's cache-bust marker), so two calls
 * whose ids agree up to a point send byte-identical text up to there, and a server's prefix cache sees
 * exactly the sharing the trace recorded. Each word is one token of the built-in tokenizer, so a prompt's
 * length in tokens is what the trace says (with a foreign model, about; the bench reports the difference).
 */
import { extendHash, saltedRootHash } from "../core/kv/prefix-hash.js";
import { promptTokens, SpmTokenCounter, type TokenCounter } from "./replay/replay-tokens.js";
import { REPLAY_WORDS } from "./replay/replay-words.js";

export interface BlockPrompt {
  /** `/v1/completions`' prompt, or the content of the one user message of a chat request */
  readonly text: string;
  /** the client's count of the prompt as the server will see it */
  readonly tokens: number;
}

const TWO_32 = 0x100000000;

export class BlockPromptBuilder {
  private readonly words: readonly string[];

  constructor(
    private readonly counter: TokenCounter,
    private readonly api: "chat" | "completions",
    /** salts every marker: replays of another run never share a server's cache with this one */
    private readonly runSalt: string,
  ) {
    const single = REPLAY_WORDS.filter((w) => counter.pieceTokens(` ${w}`, false) === 1);
    this.words = single.length > 0 ? single : REPLAY_WORDS;
  }

  /** The cache-bust marker of a replay's scope: `[rid:<12 hex>]` and a blank line (AgentX's). */
  marker(scopeKey: string): string {
    const h = saltedRootHash(`${this.runSalt}/${scopeKey}`);
    return `[rid:${Math.floor(h).toString(16).padStart(12, "0").slice(-12)}]\n\n`;
  }

  /**
   * The prompt of `inputTokens` tokens for `hashIds` (one per `blockSize` tokens, fractional sizes fine)
   * under `scopeKey`: the marker, then one word per remaining token. Positions past the ids hold text of
   * this call alone (`uniqueTag`): no id says they are shared.
   */
  build(
    hashIds: readonly number[],
    blockSize: number,
    inputTokens: number,
    scopeKey: string,
    uniqueTag: number,
  ): BlockPrompt {
    const marker = this.marker(scopeKey);
    const overhead =
      this.api === "chat"
        ? promptTokens(this.counter, [{ role: "user", content: marker }])
        : this.counter.bosTokens + this.markerTokens(marker);
    const n = Math.max(1, inputTokens - overhead);
    const root = saltedRootHash(scopeKey);
    const parts = new Array<string>(n);
    let block = -1;
    let blockHash = 0;
    for (let p = 0; p < n; p++) {
      const j = Math.floor((p + overhead) / blockSize);
      if (j !== block) {
        block = j;
        const owned = j >= hashIds.length;
        const id = owned ? j : (hashIds[j] as number);
        const salt = owned ? extendHash(extendHash(root, 0x6f776e), uniqueTag) : root;
        blockHash = extendHash(extendHash(salt, id % TWO_32), Math.floor(id / TWO_32));
      }
      const word = extendHash(blockHash, p) % this.words.length;
      parts[p] = ` ${this.words[word]}`;
    }
    const text = marker + parts.join("");
    return { text, tokens: overhead + n };
  }

  private markerTokens(marker: string): number {
    if (this.counter instanceof SpmTokenCounter) return this.counter.count(marker);
    return Math.round(this.counter.pieceTokens(marker, true));
  }
}
