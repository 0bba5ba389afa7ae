/**
 * A TypeScript tokenizer for the built-in vocabulary that follows llama.cpp's SPM ("llama")
 * tokenizer: special tokens are split out first (when parseSpecial), each text fragment that starts
 * the input or follows a special token gets a leading space (add_space_prefix), spaces become "▁",
 * then adjacent symbols are merged while their concatenation is a token, highest score first (ties:
 * leftmost), and characters without a token fall back to byte tokens. Lets the project count tokens
 * and check tokenization properties without loading the engine.
 */
import { BinaryHeap } from "../../core/heaps/binary-heap.js";
import { SPACE_MARK, TokenType, type Vocab } from "./vocab.js";

export interface TokenizeOptions {
  /** Prepend BOS (llama.cpp's add_special with add_bos_token). Default false. */
  addBos?: boolean;
  /** Recognise special-token text such as <|im_start|>. Default true. */
  parseSpecial?: boolean;
}

interface Symbol {
  start: number;
  end: number;
  prev: number;
  next: number;
}

interface Bigram {
  left: number;
  right: number;
  score: number;
  size: number;
}

/** Higher score first, then smaller left index (llama.cpp's llm_bigram_spm ordering). */
function bigramQueue(): BinaryHeap<Bigram> {
  return new BinaryHeap<Bigram>((a, b) => a.score > b.score || (a.score === b.score && a.left < b.left));
}

const encoder = new TextEncoder();

export class SpmTokenizer {
  private readonly ids = new Map<string, number>();
  private readonly specials: { text: string; id: number }[];

  constructor(readonly vocab: Vocab) {
    vocab.tokens.forEach((t, i) => {
      this.ids.set(t, i);
    });
    // llama.cpp splits out CONTROL, USER_DEFINED and UNKNOWN tokens, longest first
    this.specials = vocab.tokens
      .map((text, id) => ({ text, id }))
      .filter(({ id }) => {
        const t = vocab.types[id];
        return t === TokenType.CONTROL || t === TokenType.USER_DEFINED || t === TokenType.UNKNOWN;
      })
      .sort((a, b) => b.text.length - a.text.length || a.id - b.id);
  }

  tokenize(text: string, opts: TokenizeOptions = {}): number[] {
    const out: number[] = [];
    if (opts.addBos) out.push(this.vocab.bosId);
    let prevSpecial = true;
    for (const frag of this.fragments(text, opts.parseSpecial ?? true)) {
      if (typeof frag === "number") {
        out.push(frag);
        prevSpecial = true;
      } else {
        this.tokenizeRaw((prevSpecial ? " " : "") + frag, out);
        prevSpecial = false;
      }
    }
    return out;
  }

  /** Text of a token as it reads in output ("▁" as space, byte tokens as their byte's character). */
  piece(id: number): string {
    const t = this.vocab.tokens[id];
    if (t === undefined) throw new Error(`token id ${id} out of range`);
    if (this.vocab.types[id] === TokenType.BYTE) return String.fromCharCode(id - this.vocab.byteBase);
    return t.replaceAll(SPACE_MARK, " ");
  }

  /** Decodes ids to text (dropping the space added before the first fragment, like llama.cpp). */
  detokenize(ids: readonly number[]): string {
    const bytes: number[] = [];
    for (const id of ids) {
      const type = this.vocab.types[id];
      if (type === TokenType.BYTE) bytes.push(id - this.vocab.byteBase);
      else if (type === TokenType.NORMAL)
        bytes.push(...encoder.encode(this.vocab.tokens[id]!.replaceAll(SPACE_MARK, " ")));
      else bytes.push(...encoder.encode(this.vocab.tokens[id] ?? ""));
    }
    const text = new TextDecoder().decode(new Uint8Array(bytes));
    return text.startsWith(" ") ? text.slice(1) : text;
  }

  /** Splits text into raw strings and special token ids. */
  private fragments(text: string, parseSpecial: boolean): (string | number)[] {
    let frags: (string | number)[] = text.length > 0 ? [text] : [];
    if (!parseSpecial) return frags;
    for (const sp of this.specials) {
      const next: (string | number)[] = [];
      for (const f of frags) {
        if (typeof f === "number") {
          next.push(f);
          continue;
        }
        const parts = f.split(sp.text);
        parts.forEach((p, i) => {
          if (i > 0) next.push(sp.id);
          if (p.length > 0) next.push(p);
        });
      }
      frags = next;
    }
    return frags;
  }

  private tokenizeRaw(raw: string, out: number[]): void {
    const text = raw.replaceAll(" ", SPACE_MARK);
    const chars = [...text];
    const starts: number[] = [];
    let pos = 0;
    for (const ch of chars) {
      starts.push(pos);
      pos += ch.length;
    }
    const syms: Symbol[] = chars.map((ch, i) => ({
      start: starts[i]!,
      end: starts[i]! + ch.length,
      prev: i - 1,
      next: i + 1 < chars.length ? i + 1 : -1,
    }));
    if (syms.length === 0) return;
    const queue = bigramQueue();
    const tryAdd = (left: number, right: number): void => {
      if (left === -1 || right === -1) return;
      const l = syms[left]!;
      const r = syms[right]!;
      const id = this.ids.get(text.slice(l.start, r.end));
      if (id === undefined) return;
      queue.push({ left, right, score: this.vocab.scores[id]!, size: r.end - l.start });
    };
    for (let i = 1; i < syms.length; i++) tryAdd(i - 1, i);
    while (queue.size > 0) {
      const bg = queue.pop() as Bigram;
      const l = syms[bg.left]!;
      const r = syms[bg.right]!;
      if (l.end === l.start || r.end === r.start || r.end - l.start !== bg.size || l.next !== bg.right)
        continue;
      l.end = r.end;
      r.end = r.start; // emptied
      l.next = r.next;
      if (r.next >= 0) syms[r.next]!.prev = bg.left;
      tryAdd(l.prev, bg.left);
      tryAdd(bg.left, l.next);
    }
    for (let i = 0; i !== -1; i = syms[i]!.next) {
      const s = syms[i]!;
      const piece = text.slice(s.start, s.end);
      const id = this.ids.get(piece);
      if (id !== undefined) {
        out.push(id);
      } else {
        for (const b of encoder.encode(piece)) out.push(this.vocab.byteBase + b);
      }
    }
  }
}
