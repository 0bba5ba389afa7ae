/**
 * A byte-level BPE vocabulary (llama.cpp's "gpt2" tokenizer model, what Llama 3, Qwen, DeepSeek and most
 * recent models ship), built from the merges the built-in SentencePiece vocabulary learns, so that the
 * two tokenize English and code alike while exercising the other tokenizer's paths: text is split by a
 * pre-tokenizer regex (Qwen 2's), every byte is a token of its own (a character of several bytes is
 * merged from them, and a model may emit part of one), spaces belong to the word after them, and
 * `<tool_call>` / `<think>` are single user-defined tokens, as in Qwen 3.
 */
import { baseChars, learnedMerges, SPACE_MARK, TokenType } from "./vocab.js";

export interface BpeVocab {
  /** pieces as GPT-2 writes them: each byte as a printable stand-in */
  readonly tokens: string[];
  readonly types: TokenType[];
  /** "left right", highest priority first */
  readonly merges: string[];
  readonly endOfTextId: number;
  readonly imStartId: number;
  readonly imEndId: number;
  /**
   * Pieces a random model should not favour: special tokens other than `<|im_end|>`, and pieces that are
   * no whole UTF-8 characters or hold control characters other than newline and tab.
   */
  readonly mutedIds: number[];
}

const CONTROL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;
const USER_DEFINED_TOKENS = ["<tool_call>", "</tool_call>", "<think>", "</think>"] as const;
const SPECIAL_COUNT = CONTROL_TOKENS.length + USER_DEFINED_TOKENS.length;

/** GPT-2's stand-ins for bytes: printable Latin-1 bytes stand for themselves, the others for U+0100 on. */
function byteSymbols(): string[] {
  const symbols: string[] = [];
  let shifted = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    symbols.push(String.fromCodePoint(printable ? b : 0x100 + shifted++));
  }
  return symbols;
}

const encoder = new TextEncoder();

/** C0 controls and DEL, newline and tab excepted. */
function isControlCharacter(ch: string): boolean {
  const code = ch.codePointAt(0) as number;
  return (code < 0x20 && ch !== "\n" && ch !== "\t") || code === 0x7f;
}
const strictDecoder = new TextDecoder("utf-8", { fatal: true });

const cache = new Map<number, BpeVocab>();

/** Builds (deterministically; memoized) a byte-level BPE vocabulary of `size` tokens. */
export function buildBpeVocab(size: number): BpeVocab {
  const hit = cache.get(size);
  if (hit) return hit;
  const symbols = byteSymbols();
  /** Text written with SPACE_MARK for a space, as the stand-ins of its UTF-8 bytes. */
  const byteSymbolsOf = (spmText: string) =>
    Array.from(encoder.encode(spmText.replaceAll(SPACE_MARK, " ")), (b) => symbols[b] as string);

  const tokens: string[] = [];
  const types: TokenType[] = [];
  const merges: string[] = [];
  const ids = new Map<string, number>();
  const add = (piece: string, type: TokenType) => {
    ids.set(piece, tokens.length);
    tokens.push(piece);
    types.push(type);
  };
  const merge = (left: string, right: string) => {
    const piece = left + right;
    if (ids.has(piece)) return;
    merges.push(`${left} ${right}`);
    add(piece, TokenType.NORMAL);
  };
  /** A character's piece; one of several bytes is merged from them first, left to right. */
  const character = (ch: string): string => {
    const bytes = byteSymbolsOf(ch);
    let piece = bytes[0] as string;
    for (const next of bytes.slice(1)) {
      merge(piece, next);
      piece += next;
    }
    return piece;
  };
  const piece = (spmPiece: string): string => {
    const converted = byteSymbolsOf(spmPiece).join("");
    if (ids.has(converted)) return converted;
    if ([...spmPiece].length === 1) return character(spmPiece);
    throw new Error(`internal: BPE merge of ${JSON.stringify(spmPiece)}, which is no piece yet`);
  };

  for (const symbol of symbols) add(symbol, TokenType.NORMAL);
  for (const ch of baseChars()) character(ch);
  const room = size - tokens.length - SPECIAL_COUNT;
  if (room < 0) throw new Error(`vocabulary size ${size} is too small`);
  // extra headroom: merges whose byte-level pieces coincide are dropped, so ask for more than fits
  const { trained, compounds } = learnedMerges(room + 64, new Set(baseChars()));
  for (const [left, right] of [...trained, ...compounds]) {
    if (tokens.length === size - SPECIAL_COUNT) break;
    merge(piece(left), piece(right));
  }
  if (tokens.length !== size - SPECIAL_COUNT) throw new Error(`vocabulary size ${size} is too large`);

  const endOfTextId = tokens.length;
  for (const text of CONTROL_TOKENS) add(text, TokenType.CONTROL);
  for (const text of USER_DEFINED_TOKENS) add(text, TokenType.USER_DEFINED);
  const imStartId = ids.get("<|im_start|>") as number;
  const imEndId = ids.get("<|im_end|>") as number;

  const byteOf = new Map(symbols.map((s, b) => [s, b]));
  const mutedIds: number[] = [];
  tokens.forEach((token, id) => {
    if (types[id] !== TokenType.NORMAL) {
      if (id !== imEndId) mutedIds.push(id);
      return;
    }
    const bytes = Uint8Array.from(Array.from(token, (ch) => byteOf.get(ch) as number));
    let text: string;
    try {
      text = strictDecoder.decode(bytes);
    } catch {
      mutedIds.push(id);
      return;
    }
    if (Array.from(text).some(isControlCharacter)) mutedIds.push(id);
  });

  const vocab: BpeVocab = { tokens, types, merges, endOfTextId, imStartId, imEndId, mutedIds };
  cache.set(size, vocab);
  return vocab;
}
