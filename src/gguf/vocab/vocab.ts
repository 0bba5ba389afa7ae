/**
 * The built-in SentencePiece-style ("llama" tokenizer model) vocabulary, built deterministically in
 * code: special tokens, 256 byte-fallback tokens, single characters and a few thousand merged pieces
 * learned by byte-pair-encoding style training over the word lists in vocab-words.ts (weighted by a
 * Zipf law of their rank). llama.cpp's SPM tokenizer merges adjacent symbols whose concatenation is in
 * the vocabulary, highest score first; scores here are minus the merge rank, so it reproduces the
 * training merges.
 *
 * Past the few thousand pieces the word lists teach, compounds of two pieces fill larger vocabularies.
 *
 * Pieces never contain a newline and never contain "▁" (the space marker) after a non-space
 * character, so token boundaries always fall before every word-initial space and around every
 * newline: appending text after a newline or a special token never changes the tokens before it.
 */
import { BinaryHeap } from "../../core/heaps/binary-heap.js";
import { CODE_WORDS, ENGLISH_WORDS, SYMBOL_PIECES, TECH_WORDS } from "./vocab-words.js";

/** tokenizer.ggml.token_type values (llama_token_type). */
export const TokenType = {
  NORMAL: 1,
  UNKNOWN: 2,
  CONTROL: 3,
  USER_DEFINED: 4,
  UNUSED: 5,
  BYTE: 6,
} as const;
export type TokenType = (typeof TokenType)[keyof typeof TokenType];

export const SPACE_MARK = "▁";

export interface Vocab {
  tokens: string[];
  scores: number[];
  types: TokenType[];
  unkId: number;
  bosId: number;
  eosId: number;
  imStartId: number;
  imEndId: number;
  /** Token id of byte b is byteBase + b. */
  byteBase: number;
}

export interface VocabOptions {
  /** Total number of tokens (specials + bytes + characters + merges); default 8192. */
  size?: number;
}

export const DEFAULT_VOCAB_SIZE = 8192;

/** Characters that get a token of their own (everything else falls back to bytes). */
const EXTRA_CHARS = "’‘“”—–…é•→";

/** The characters that are pieces of their own (SPACE_MARK first). */
export function baseChars(): string[] {
  const chars = [SPACE_MARK];
  for (let c = 0x21; c <= 0x7e; c++) chars.push(String.fromCharCode(c));
  chars.push("\t");
  for (const ch of EXTRA_CHARS) chars.push(ch);
  return chars;
}

function words(list: string): string[] {
  return list.split(/\s+/).filter((w) => w.length > 0);
}

function capitalize(w: string): string {
  return w.charAt(0).toUpperCase() + w.slice(1);
}

/** Splits a word at apostrophes the way SentencePiece scripts split: "don't" -> ["don", "'t"]. */
function apostropheParts(w: string): string[] {
  const [head = "", ...rest] = w.split("'");
  return [head, ...rest.map((p) => "'" + p)];
}

/** Pre-token frequencies the merges are trained on. */
function trainingSegments(): Map<string, number> {
  const freq = new Map<string, number>();
  const add = (seg: string, f: number): void => {
    const n = Math.round(f);
    if (seg.length < 2 || n <= 0) return;
    freq.set(seg, (freq.get(seg) ?? 0) + n);
  };
  const addWord = (w: string, f: number, variants: readonly [string, number][]): void => {
    const [head, ...tails] = apostropheParts(w);
    for (const tail of tails) add(tail, f * 0.5);
    if (!head) return;
    for (const [variant, share] of variants) {
      if (variant === "lower") add(SPACE_MARK + head, f * share);
      else if (variant === "cap") add(SPACE_MARK + capitalize(head), f * share);
      else if (variant === "bare") add(head, f * share);
      else if (variant === "barecap") add(capitalize(head), f * share);
    }
  };
  const rankWeight = (rank: number, offset: number) => 1e7 / (rank + offset);
  const english = [...new Set(words(ENGLISH_WORDS))];
  english.forEach((w, r) => {
    addWord(w, rankWeight(r, 30), [
      ["lower", 1],
      ["cap", 0.12],
      ["bare", 0.06],
    ]);
  });
  // inflected forms of the less common words (naive rules are fine: they only teach suffix pieces)
  english.forEach((w, r) => {
    if (r < 150 || w.length < 3 || w.includes("'")) return;
    const stem = w.endsWith("e") ? w.slice(0, -1) : w;
    const f = rankWeight(r, 30);
    add(SPACE_MARK + w + (w.endsWith("s") ? "es" : "s"), f * 0.2);
    add(SPACE_MARK + stem + "ed", f * 0.08);
    add(SPACE_MARK + stem + "ing", f * 0.08);
    add(SPACE_MARK + stem + "er", f * 0.04);
  });
  const tech = [...new Set(words(TECH_WORDS))];
  tech.forEach((w, r) => {
    addWord(w, 0.5 * rankWeight(r, 60), [
      ["lower", 1],
      ["cap", 0.15],
      ["bare", 0.15],
      ["barecap", 0.05],
    ]);
  });
  const code = [...new Set(words(CODE_WORDS))];
  code.forEach((w, r) => {
    addWord(w, 0.4 * rankWeight(r, 60), [
      ["lower", 1],
      ["bare", 0.6],
    ]);
  });
  for (const [piece, weight] of SYMBOL_PIECES) add(piece, weight * 5000);
  return freq;
}

/** Pairs by count desc, then key asc (deterministic ties). */
function pairHeap(): BinaryHeap<[number, string]> {
  return new BinaryHeap<[number, string]>((a, b) => a[0] > b[0] || (a[0] === b[0] && a[1] < b[1]));
}

const SEP = "\u0001";

/** A learned merge: the two pieces whose concatenation becomes a piece of its own. */
export type MergePair = readonly [left: string, right: string];

/** Learns up to `maxMerges` merges of pieces not yet `known`, in merge order. */
function trainMerges(segments: Map<string, number>, maxMerges: number, known: Set<string>): MergePair[] {
  const wordSyms: string[][] = [];
  const wordFreq: number[] = [];
  for (const [seg, f] of segments) {
    wordSyms.push([...seg]);
    wordFreq.push(f);
  }
  const pairCount = new Map<string, number>();
  const pairWords = new Map<string, Set<number>>();
  const heap = pairHeap();
  const bump = (key: string, delta: number, word: number, touched: Set<string>): void => {
    pairCount.set(key, (pairCount.get(key) ?? 0) + delta);
    touched.add(key);
    if (delta > 0) {
      let s = pairWords.get(key);
      if (!s) {
        s = new Set();
        pairWords.set(key, s);
      }
      s.add(word);
    }
  };
  const countWord = (w: number, sign: 1 | -1, touched: Set<string>): void => {
    const syms = wordSyms[w]!;
    for (let i = 0; i + 1 < syms.length; i++)
      bump(syms[i]! + SEP + syms[i + 1]!, sign * wordFreq[w]!, w, touched);
  };
  const initial = new Set<string>();
  for (let w = 0; w < wordSyms.length; w++) countWord(w, 1, initial);
  for (const key of initial) heap.push([pairCount.get(key)!, key]);

  const merges: MergePair[] = [];
  while (merges.length < maxMerges) {
    const top = heap.pop();
    if (!top) break;
    const [count, key] = top;
    if (pairCount.get(key) !== count || count <= 0) continue; // stale entry
    const [a, b] = key.split(SEP) as [string, string];
    const merged = a + b;
    const touched = new Set<string>();
    for (const w of [...(pairWords.get(key) ?? [])]) {
      const syms = wordSyms[w]!;
      let has = false;
      for (let i = 0; i + 1 < syms.length; i++) {
        if (syms[i] === a && syms[i + 1] === b) {
          has = true;
          break;
        }
      }
      if (!has) continue;
      countWord(w, -1, touched);
      const next: string[] = [];
      for (let i = 0; i < syms.length; i++) {
        if (i + 1 < syms.length && syms[i] === a && syms[i + 1] === b) {
          next.push(merged);
          i++;
        } else {
          next.push(syms[i]!);
        }
      }
      wordSyms[w] = next;
      countWord(w, 1, touched);
    }
    pairWords.delete(key);
    pairCount.delete(key);
    touched.delete(key);
    for (const k of touched) {
      const c = pairCount.get(k) ?? 0;
      if (c > 0) heap.push([c, k]);
      else pairCount.delete(k);
    }
    if (!known.has(merged)) {
      known.add(merged);
      merges.push([a, b]);
    }
  }
  return merges;
}

/**
 * Pieces past what merge training can learn from the word lists (about 12.8k tokens in all), so the
 * vocabulary reaches the sizes of real models (128k, 152k): a word-initial piece followed by a
 * continuation piece ("▁cat" + "s"), the most frequent of each first. Both halves are tokens, so the
 * tokenizer reaches the compound by merging them, and the boundary rules above still hold.
 */
function compoundPieces(merges: readonly string[], count: number, known: Set<string>): MergePair[] {
  const heads = merges.filter((p) => p.startsWith(SPACE_MARK));
  const tails = merges.filter((p) => !p.includes(SPACE_MARK));
  const pieces: MergePair[] = [];
  // walk the (head rank, tail rank) grid by anti-diagonals: ranks summing to 0, then 1, ...
  for (let sum = 0; pieces.length < count && sum <= heads.length + tails.length - 2; sum++) {
    for (let h = Math.max(0, sum - tails.length + 1); h <= Math.min(sum, heads.length - 1); h++) {
      const pair = [heads[h]!, tails[sum - h]!] as const;
      const piece = pair[0] + pair[1];
      if (known.has(piece)) continue;
      known.add(piece);
      pieces.push(pair);
      if (pieces.length === count) break;
    }
  }
  return pieces;
}

/**
 * The built-in vocabulary's learned merges for `room` pieces beyond the given `known` ones: those merge
 * training finds in the word lists, in merge order, then compounds of two learned pieces (`compounds`).
 * Pieces use SPACE_MARK for a space.
 */
export function learnedMerges(
  room: number,
  known: Set<string>,
): { trained: MergePair[]; compounds: MergePair[] } {
  const trained = trainMerges(trainingSegments(), room, known);
  const compounds = compoundPieces(
    trained.map(([a, b]) => a + b),
    room - trained.length,
    known,
  );
  return { trained, compounds };
}

const cache = new Map<number, Vocab>();

/** Builds (deterministically; memoized) the built-in vocabulary. */
export function buildVocab(opts: VocabOptions = {}): Vocab {
  const size = opts.size ?? DEFAULT_VOCAB_SIZE;
  const hit = cache.get(size);
  if (hit) return hit;
  const tokens: string[] = [];
  const scores: number[] = [];
  const types: TokenType[] = [];
  const push = (text: string, type: TokenType, score: number): number => {
    tokens.push(text);
    types.push(type);
    scores.push(score);
    return tokens.length - 1;
  };
  const unkId = push("<unk>", TokenType.UNKNOWN, 0);
  const bosId = push("<s>", TokenType.CONTROL, 0);
  const eosId = push("</s>", TokenType.CONTROL, 0);
  const byteBase = tokens.length;
  for (let b = 0; b < 256; b++) {
    push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`, TokenType.BYTE, 0);
  }
  const imStartId = push("<|im_start|>", TokenType.CONTROL, 0);
  const imEndId = push("<|im_end|>", TokenType.CONTROL, 0);

  const chars = baseChars();
  const known = new Set<string>([...tokens, ...chars]);
  const room = size - tokens.length - chars.length;
  if (room < 0) throw new Error(`vocabulary size ${size} is too small`);
  const { trained, compounds } = learnedMerges(room, known);
  trained.forEach(([a, b], rank) => {
    push(a + b, TokenType.NORMAL, -rank);
  });
  chars.forEach((ch, i) => {
    push(ch, TokenType.NORMAL, -1e6 - i);
  });
  compounds.forEach(([a, b], rank) => {
    push(a + b, TokenType.NORMAL, -2e6 - rank);
  });
  if (tokens.length !== size) throw new Error(`vocabulary size ${size} is too large`);
  if (new Set(tokens).size !== tokens.length) throw new Error("internal: duplicate vocabulary entries");
  const vocab: Vocab = { tokens, scores, types, unkId, bosId, eosId, imStartId, imEndId, byteBase };
  cache.set(size, vocab);
  return vocab;
}
