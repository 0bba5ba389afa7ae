/**
 * JSON Schema `pattern` (an ECMA-262 regular expression) -> a GBNF expression for the characters of a
 * JSON string that matches it, as they appear between the quotes (`"` `\` and control characters
 * written as their JSON escapes; a class generates no control characters but tab and newlines); or, for
 * vLLM's `regex` structured output, for text that matches it whole (`regexGbnf`). The subset: literals
 * and escapes, `.`, classes (ranges, negation, \d \w \s and their negations), groups (plain, `(?:`,
 * named), alternation, `? * + {m} {m,} {m,n}` (lazy or not), and `^` `$` at the ends of a top-level
 * alternative. Anything else (lookaround, backreferences, \b, anchors inside groups) throws
 * UnsupportedPatternError.
 */

import { gbnfLiteral } from "./gbnf-literal.js";

export class UnsupportedPatternError extends Error {}

/** Code point ranges [lo, hi], sorted and disjoint. */
type CharSet = [number, number][];

const MAX_CODE_POINT = 0x10ffff;
const MAX_REPEAT = 1000;
/** Any one character of a JSON string (a rule of the JSON grammar): what an unanchored end may add. */
const ANY_STRING_CHAR = "char";

function normalize(ranges: CharSet): CharSet {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: CharSet = [];
  for (const [lo, hi] of sorted) {
    const last = out.at(-1);
    if (last && lo <= last[1] + 1) last[1] = Math.max(last[1], hi);
    else out.push([lo, hi]);
  }
  return out;
}

function complement(set: CharSet): CharSet {
  const out: CharSet = [];
  let next = 0;
  for (const [lo, hi] of normalize(set)) {
    if (lo > next) out.push([next, lo - 1]);
    next = hi + 1;
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT]);
  return out;
}

function intersect(a: CharSet, b: CharSet): CharSet {
  const out: CharSet = [];
  for (const [alo, ahi] of a) {
    for (const [blo, bhi] of b) {
      const lo = Math.max(alo, blo);
      const hi = Math.min(ahi, bhi);
      if (lo <= hi) out.push([lo, hi]);
    }
  }
  return normalize(out);
}

const DIGIT: CharSet = [[0x30, 0x39]];
const WORD: CharSet = normalize([
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
]);
const SPACE: CharSet = normalize([
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
]);
const LINE_TERMINATORS: CharSet = normalize([
  [0x0a, 0x0a],
  [0x0d, 0x0d],
  [0x2028, 0x2029],
]);
/** Characters a JSON string holds as they are; the others are written as escapes. */
const RAW_IN_JSON = complement([
  [0x00, 0x1f],
  [0x22, 0x22],
  [0x5c, 0x5c],
]);
/** The escaped characters a class may generate; other control characters only when written alone. */
const ESCAPED_IN_CLASS: CharSet = normalize([
  [0x09, 0x0a],
  [0x0d, 0x0d],
  [0x22, 0x22],
  [0x5c, 0x5c],
]);
const SINGLE_ESCAPES: Record<string, number> = { n: 0x0a, r: 0x0d, t: 0x09, f: 0x0c, v: 0x0b, "0": 0 };

function classChar(cp: number): string {
  if (/[A-Za-z0-9]/.test(String.fromCodePoint(cp))) return String.fromCodePoint(cp);
  return cp <= 0xffff ? `\\u${cp.toString(16).padStart(4, "0")}` : `\\U${cp.toString(16).padStart(8, "0")}`;
}

/** A GBNF literal for `text` as it is written inside a JSON string. */
function jsonTextLiteral(text: string): string {
  const escaped = JSON.stringify(text).slice(1, -1);
  return `"${escaped.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
}

/** GBNF for one character of `set`, written as JSON writes it. */
function charSetGbnf(set: CharSet): string {
  const raw = intersect(set, RAW_IN_JSON);
  const options: string[] = [];
  if (raw.length > 0) {
    options.push(
      `[${raw.map(([lo, hi]) => (lo === hi ? classChar(lo) : `${classChar(lo)}-${classChar(hi)}`)).join("")}]`,
    );
  }
  for (const [lo, hi] of intersect(set, ESCAPED_IN_CLASS)) {
    for (let cp = lo; cp <= hi; cp++) options.push(jsonTextLiteral(String.fromCodePoint(cp)));
  }
  if (options.length === 0) throw new UnsupportedPatternError("a character class that matches nothing");
  return options.length === 1 ? options[0]! : `( ${options.join(" | ")} )`;
}

/** GBNF for one character of `set`, as text writes it (any character, control characters included). */
function textCharSetGbnf(set: CharSet): string {
  if (set.length === 0) throw new UnsupportedPatternError("a character class that matches nothing");
  return `[${set.map(([lo, hi]) => (lo === hi ? classChar(lo) : `${classChar(lo)}-${classChar(hi)}`)).join("")}]`;
}

/** What the parsed pattern matches: a JSON string's inside (a schema's `pattern`), or text (vLLM's `regex`). */
interface Target {
  literal(text: string): string;
  charSet(set: CharSet): string;
  /** a top-level alternative without `^` (or `$`) may start (or end) with anything; null: it matches whole */
  readonly openEnd: string | null;
}

const JSON_STRING: Target = {
  literal: jsonTextLiteral,
  charSet: charSetGbnf,
  openEnd: `${ANY_STRING_CHAR}*`,
};
const TEXT: Target = { literal: gbnfLiteral, charSet: textCharSetGbnf, openEnd: null };

/** Groups nested deeper are refused: the parser recurses once per group (real patterns nest a few). */
const MAX_GROUP_DEPTH = 64;

class PatternParser {
  private at = 0;
  private groupDepth = 0;

  constructor(
    private readonly source: string,
    private readonly target: Target,
  ) {}

  /** The whole pattern: top-level alternatives, each anchored or open at either end. */
  parse(): string {
    const branches: string[] = [];
    const open = this.target.openEnd;
    do {
      const start = this.eat("^");
      const items = this.sequence(true);
      const end = this.eat("$");
      if (!this.done() && this.peek() !== "|") throw this.unsupported(`"${this.peek()}" here`);
      branches.push(
        [start ? null : open, ...items, end ? null : open].filter((part) => part !== null).join(" ") || '""',
      );
    } while (this.eat("|"));
    return branches.length === 1 ? branches[0]! : `( ${branches.join(" | ")} )`;
  }

  private done(): boolean {
    return this.at >= this.source.length;
  }

  private peek(): string {
    return this.source[this.at] ?? "";
  }

  private eat(text: string): boolean {
    if (!this.source.startsWith(text, this.at)) return false;
    this.at += text.length;
    return true;
  }

  private unsupported(what: string): UnsupportedPatternError {
    return new UnsupportedPatternError(`${what} (at offset ${this.at})`);
  }

  private alternation(): string {
    const branches = [this.sequence(false).join(" ") || '""'];
    while (this.eat("|")) branches.push(this.sequence(false).join(" ") || '""');
    return branches.length === 1 ? `( ${branches[0]} )` : `( ${branches.join(" | ")} )`;
  }

  /** Items up to `|`, `)` or the end; at top level also stops before a final `$`. */
  private sequence(topLevel: boolean): string[] {
    const items: string[] = [];
    while (!this.done() && this.peek() !== "|" && this.peek() !== ")") {
      if (this.peek() === "$" && topLevel) {
        const next = this.source[this.at + 1];
        if (next === undefined || next === "|") break;
      }
      items.push(this.quantified(this.atom()));
    }
    return items;
  }

  private atom(): string {
    const ch = this.peek();
    if (ch === "^" || ch === "$") throw this.unsupported(`the anchor "${ch}" inside the pattern`);
    if ("*+?".includes(ch)) throw this.unsupported(`"${ch}" with nothing to repeat`);
    if (this.eat("(")) {
      if (this.eat("?:") || this.namedGroupStart()) {
        // a group that only groups
      } else if (this.peek() === "?") {
        throw this.unsupported("lookaround or inline flags");
      }
      if (++this.groupDepth > MAX_GROUP_DEPTH) {
        throw this.unsupported(`groups nested deeper than ${MAX_GROUP_DEPTH} levels`);
      }
      const inner = this.alternation();
      if (!this.eat(")")) throw this.unsupported("an unclosed group");
      this.groupDepth--;
      return inner;
    }
    if (this.eat("[")) return this.target.charSet(this.classBody());
    if (this.eat(".")) return this.target.charSet(complement(LINE_TERMINATORS));
    if (this.eat("\\")) {
      const set = this.escape(false);
      return set.length === 1 && set[0]![0] === set[0]![1]
        ? this.target.literal(String.fromCodePoint(set[0]![0]))
        : this.target.charSet(set);
    }
    const cp = this.source.codePointAt(this.at)!;
    this.at += cp > 0xffff ? 2 : 1;
    return this.target.literal(String.fromCodePoint(cp));
  }

  private namedGroupStart(): boolean {
    const named = /^\?<([A-Za-z_$][\w$]*)>/.exec(this.source.slice(this.at));
    if (named) this.at += named[0].length;
    return named !== null;
  }

  private quantified(atom: string): string {
    let min: number;
    let max: number | null;
    if (this.eat("*")) [min, max] = [0, null];
    else if (this.eat("+")) [min, max] = [1, null];
    else if (this.eat("?")) [min, max] = [0, 1];
    else {
      const braces = /^\{(\d+)(,(\d*))?\}/.exec(this.source.slice(this.at));
      if (!braces) return atom;
      this.at += braces[0].length;
      min = Number(braces[1]);
      max = braces[2] === undefined ? min : braces[3] === "" ? null : Number(braces[3]);
      if (min > MAX_REPEAT || (max !== null && max > MAX_REPEAT)) {
        throw this.unsupported(`a repetition count over ${MAX_REPEAT}`);
      }
    }
    this.eat("?"); // lazy: the same strings
    if (max === null) return min === 0 ? `${atom}*` : min === 1 ? `${atom}+` : `${atom}{${min},}`;
    return min === 0 && max === 1 ? `${atom}?` : `${atom}{${min},${max}}`;
  }

  /** After `[`: the class up to its `]`. */
  private classBody(): CharSet {
    const negated = this.eat("^");
    const ranges: CharSet = [];
    while (!this.eat("]")) {
      if (this.done()) throw this.unsupported("an unclosed character class");
      const lo = this.classAtom();
      if (this.peek() === "-" && this.source[this.at + 1] !== "]" && this.at + 1 < this.source.length) {
        this.at++;
        const hi = this.classAtom();
        if (lo.length !== 1 || hi.length !== 1 || lo[0]![0] !== lo[0]![1] || hi[0]![0] !== hi[0]![1]) {
          throw this.unsupported("a range with a class at one end");
        }
        ranges.push([lo[0]![0], hi[0]![0]]);
      } else {
        ranges.push(...lo);
      }
    }
    return negated ? complement(ranges) : normalize(ranges);
  }

  private classAtom(): CharSet {
    if (this.eat("\\")) return this.escape(true);
    const cp = this.source.codePointAt(this.at)!;
    this.at += cp > 0xffff ? 2 : 1;
    return [[cp, cp]];
  }

  /** After `\`: the characters the escape stands for. */
  private escape(inClass: boolean): CharSet {
    const ch = this.peek();
    this.at++;
    const shorthand: Record<string, CharSet> = {
      d: DIGIT,
      D: complement(DIGIT),
      w: WORD,
      W: complement(WORD),
      s: SPACE,
      S: complement(SPACE),
    };
    if (ch in shorthand) return shorthand[ch]!;
    if (ch in SINGLE_ESCAPES && !(ch === "0" && /\d/.test(this.peek()))) {
      const cp = SINGLE_ESCAPES[ch]!;
      return [[cp, cp]];
    }
    if (ch === "b" && inClass) return [[0x08, 0x08]];
    const hex = ch === "x" ? /^[0-9A-Fa-f]{2}/ : ch === "u" ? /^[0-9A-Fa-f]{4}/ : null;
    if (hex) {
      const digits = hex.exec(this.source.slice(this.at));
      if (!digits) throw this.unsupported(`a malformed \\${ch} escape`);
      this.at += digits[0].length;
      const cp = Number.parseInt(digits[0], 16);
      return [[cp, cp]];
    }
    if (/[A-Za-z0-9]/.test(ch) || ch === "") throw this.unsupported(`the escape \\${ch}`);
    const cp = ch.codePointAt(0)!;
    return [[cp, cp]];
  }
}

function parsePattern(pattern: string, target: Target): string {
  try {
    new RegExp(pattern);
  } catch {
    throw new UnsupportedPatternError("not a valid regular expression");
  }
  return new PatternParser(pattern, target).parse();
}

/** GBNF for the inside of a JSON string matching `pattern`; throws UnsupportedPatternError. */
export function patternGbnf(pattern: string): string {
  return parsePattern(pattern, JSON_STRING);
}

/** GBNF for text that `pattern` matches whole (`^` and `$` change nothing); throws UnsupportedPatternError. */
export function regexGbnf(pattern: string): string {
  return parsePattern(pattern, TEXT);
}
