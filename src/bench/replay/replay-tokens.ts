/**
 * Token counts of replayed chat prompts. With the built-in model the count is exact: the prompt the
 * server tokenizes is the ChatML rendering of the messages, and the built-in SPM tokenizer splits text
 * at every special token, so a prompt's tokens are BOS + each message's tokens + the generation
 * prompt's, message by message. For a foreign model a characters-per-token estimate stands in.
 */
import { buildVocab, renderChatML, SpmTokenizer } from "../../gguf/index.js";

export type ReplayRole = "system" | "user" | "assistant" | "tool";

export interface ReplayMessage {
  role: ReplayRole;
  content: string;
}

export interface TokenCounter {
  /** "builtin-spm" or "chars/<n>" */
  readonly name: string;
  /** tokens a prompt has before its first message (BOS) */
  readonly bosTokens: number;
  /** tokens of the generation prompt after the last message (`<|im_start|>assistant\n`) */
  readonly generationPromptTokens: number;
  /** whether pieceTokens is exact and additive (then long contents need not be tokenized) */
  readonly exactPieces: boolean;
  /** tokens of one message as the chat template lays it out */
  messageTokens(message: ReplayMessage): number;
  /**
   * Tokens `piece` adds to a message's content: a word with its separator (" word", "\nword"), or
   * the word that starts the content (`startsContent`, right after the role line).
   */
  pieceTokens(piece: string, startsContent: boolean): number;
}

/** Exact counts for the built-in model (vocabulary and tokenizer as llama.cpp runs them). */
export class SpmTokenCounter implements TokenCounter {
  readonly name = "builtin-spm";
  readonly bosTokens = 1;
  // Vocabulary pieces never span a word-initial space or a newline, so words' tokens add up.
  readonly exactPieces = true;
  readonly generationPromptTokens: number;
  private readonly tokenizer: SpmTokenizer;
  private readonly pieceCache = new Map<string, number>();

  constructor(tokenizer?: SpmTokenizer) {
    this.tokenizer = tokenizer ?? new SpmTokenizer(buildVocab());
    this.generationPromptTokens = this.count("<|im_start|>assistant\n");
  }

  count(text: string): number {
    return this.tokenizer.tokenize(text).length;
  }

  /** Token ids of a rendered prompt as the server sees it (BOS first). */
  promptIds(messages: readonly ReplayMessage[], addGenerationPrompt = true): number[] {
    return this.tokenizer.tokenize(renderChatML(messages, addGenerationPrompt), { addBos: true });
  }

  messageTokens(message: ReplayMessage): number {
    return this.count(`<|im_start|>${message.role}\n${message.content}<|im_end|>\n`);
  }

  pieceTokens(piece: string, startsContent: boolean): number {
    const key = `${startsContent ? "1" : "0"}${piece}`;
    let n = this.pieceCache.get(key);
    if (n === undefined) {
      // Pieces never span a word-initial space or a newline, so the difference is exact.
      const before = startsContent ? "a\n" : "a";
      n = this.count(before + piece) - this.count(before);
      this.pieceCache.set(key, n);
    }
    return n;
  }
}

/** Template overhead assumed per message by the estimate (role header and end markers). */
export const ESTIMATED_MESSAGE_OVERHEAD = 5;

/** chars / charsPerToken, for models whose tokenizer the client does not have. */
export class CharsTokenCounter implements TokenCounter {
  readonly name: string;
  readonly bosTokens = 1;
  readonly generationPromptTokens = 3;
  readonly exactPieces = false;

  constructor(readonly charsPerToken: number) {
    if (!(Number.isFinite(charsPerToken) && charsPerToken > 0))
      throw new Error(`chars per token must be a positive number, got ${charsPerToken}`);
    this.name = `chars/${charsPerToken}`;
  }

  messageTokens(message: ReplayMessage): number {
    return ESTIMATED_MESSAGE_OVERHEAD + Math.round(message.content.length / this.charsPerToken);
  }

  pieceTokens(piece: string): number {
    return piece.length / this.charsPerToken;
  }
}

let sharedSpm: SpmTokenCounter | undefined;

/** The built-in tokenizer's counter; its vocabulary takes ~1 s to build, so it is built once. */
export function builtinTokenCounter(): SpmTokenCounter {
  sharedSpm ??= new SpmTokenCounter();
  return sharedSpm;
}

/** Prompt tokens of messages as the counter sees them: BOS + messages + generation prompt. */
export function promptTokens(counter: TokenCounter, messages: readonly ReplayMessage[]): number {
  let total = counter.bosTokens + counter.generationPromptTokens;
  for (const m of messages) total += counter.messageTokens(m);
  return total;
}
