/**
 * The model's own output is cache on the next turn. An agent sends its history back as text: the last
 * turn's prompt, then the reply the model generated, then what happened since. Tokenizing that text again
 * rarely gives the tokens the sampler produced (the same text has many tokenizations, and a constrained
 * sampler picks unusual ones), so the KV of the generated tokens would not match and be computed again.
 *
 * Instead, a program's next prompt that extends its last prompt keeps the last prompt's token ids and then
 * every generated token whose text the new prompt repeats byte for byte (control tokens such as
 * `<|im_end|>` as the chat template writes them), and only the rest is tokenized. The model then sees what
 * it generated, and the engine finds the KV of those tokens under their own ids.
 */
import { createHash } from "node:crypto";

export interface ContinuationTokenizer {
  /** tokens of text that follows other tokens (no BOS) */
  tokenizeContinuation(text: string): Int32Array;
  /** a token's bytes as a chat template writes it (control tokens as their text) */
  templatePiece(token: number): Uint8Array;
}

/** A finished turn as its next prompt is matched against: its prompt's text (digest) and its token ids. */
export interface KeptTurn {
  readonly promptChars: number;
  readonly promptDigest: string;
  readonly promptTokens: number;
  /** the prompt's token ids, then the generated ones */
  readonly ids: Int32Array;
}

/** How much of a turn a next prompt repeats: `kept` of its ids, ending `keptBytes` into the text after its prompt. */
export interface Repeat {
  readonly kept: number;
  readonly keptBytes: number;
  /** the next prompt's text after the turn's prompt, as UTF-8 */
  readonly rest: Buffer;
}

const digest = (text: string) => createHash("sha256").update(text).digest("base64");

/** A UTF-8 continuation byte (10xxxxxx) is never the first byte of a character. */
const startsCharacter = (bytes: Uint8Array, offset: number) =>
  offset >= bytes.length || ((bytes[offset] as number) & 0xc0) !== 0x80;

export function keptTurn(prompt: string, ids: ArrayLike<number>, promptTokens: number): KeptTurn {
  return {
    promptChars: prompt.length,
    promptDigest: digest(prompt),
    promptTokens,
    ids: Int32Array.from(ids),
  };
}

/**
 * How far `prompt` repeats `turn`: all of its prompt's ids, then every generated token whose text the prompt
 * repeats byte for byte, up to the first that differs, ending on a whole character. Null when the prompt does
 * not begin with the turn's prompt.
 */
export function repeatOf(turn: KeptTurn, prompt: string, tokenizer: ContinuationTokenizer): Repeat | null {
  if (prompt.length < turn.promptChars) return null;
  if (digest(prompt.slice(0, turn.promptChars)) !== turn.promptDigest) return null;
  const rest = Buffer.from(prompt.slice(turn.promptChars), "utf8");
  let offset = 0;
  let kept = turn.promptTokens;
  let keptBytes = 0;
  for (let i = turn.promptTokens; i < turn.ids.length; i++) {
    const piece = tokenizer.templatePiece(turn.ids[i] as number);
    const end = offset + piece.length;
    if (piece.length === 0 || end > rest.length || !rest.subarray(offset, end).equals(piece)) break;
    offset = end;
    if (startsCharacter(rest, offset)) {
      kept = i + 1;
      keptBytes = offset;
    }
  }
  return { kept, keptBytes, rest };
}

/** The next prompt's token ids: the turn's ids it repeats, then the rest of its text tokenized. */
export function splicedIds(turn: KeptTurn, repeat: Repeat, tokenizer: ContinuationTokenizer): Int32Array {
  const tail = repeat.rest.subarray(repeat.keptBytes).toString("utf8");
  const tailIds = tail.length > 0 ? tokenizer.tokenizeContinuation(tail) : new Int32Array(0);
  const ids = new Int32Array(repeat.kept + tailIds.length);
  ids.set(turn.ids.subarray(0, repeat.kept));
  ids.set(tailIds, repeat.kept);
  return ids;
}

/** Each program's last finished turn (prompt digest, prompt and output token ids), least recently used first out. */
export class TurnContinuations {
  private readonly turns = new Map<string, KeptTurn>();
  private tokens = 0;

  /** `maxTokens`: token ids kept over all programs (4 bytes each) */
  constructor(private readonly maxTokens: number) {}

  get size(): number {
    return this.turns.size;
  }

  remember(program: string, prompt: string, ids: ArrayLike<number>, promptTokens: number): void {
    this.forget(program);
    if (ids.length > this.maxTokens) return;
    const turn = keptTurn(prompt, ids, promptTokens);
    this.turns.set(program, turn);
    this.tokens += turn.ids.length;
    while (this.tokens > this.maxTokens) this.forget(this.turns.keys().next().value as string);
  }

  forget(program: string): void {
    const turn = this.turns.get(program);
    if (!turn) return;
    this.turns.delete(program);
    this.tokens -= turn.ids.length;
  }

  /**
   * Token ids for the program's new `prompt`: the last prompt's ids, the generated tokens the prompt repeats
   * (up to the first that differs, ending on a whole character), then the rest tokenized. Null when the
   * prompt does not begin with the last prompt (tokenize it whole).
   */
  splice(program: string, prompt: string, tokenizer: ContinuationTokenizer): Int32Array | null {
    const turn = this.turns.get(program);
    const repeat = turn ? repeatOf(turn, prompt, tokenizer) : null;
    if (!turn || !repeat) return null;
    this.turns.delete(program);
    this.turns.set(program, turn);
    return splicedIds(turn, repeat, tokenizer);
  }
}
