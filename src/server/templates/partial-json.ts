/**
 * What a JSON text cut off at its end says, and whether another value says no more than it. A tool call cut
 * off at max_tokens comes back from a client as the text it received, or as that text read by the client's
 * own partial-JSON parser and written again; parsers differ in what they keep of the cut end (a string cut
 * mid-way, a key without its value), but each keeps only what the text says.
 */

import { jsonTextDepth, MAX_JSON_DEPTH } from "../../tool-calls/json-depth.js";
import { isRecord } from "../../tool-calls/json-objects.js";

const ESCAPES: Readonly<Record<string, string>> = {
  '"': '"',
  "\\": "\\",
  "/": "/",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
};
const LITERALS: readonly (readonly [string, unknown])[] = [
  ["true", true],
  ["false", false],
  ["null", null],
];
const NUMBER = /-?\d*(?:\.\d*)?(?:[eE][+-]?\d*)?/y;
const WHOLE_NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

class NotJson extends Error {}

/**
 * A number the text cut off: which number it is, the text does not say (`12` may be 12 or 125, `1e` any
 * power of ten), so any number says no more than it.
 */
export class CutNumber {
  constructor(readonly text: string) {}
}

/** A value read, or none: the text ended before one began. */
type Read = { readonly value: unknown } | null;

class PartialReader {
  private at = 0;
  /** the text ended inside what was being read */
  ended = false;

  constructor(private readonly text: string) {}

  value(): Read {
    this.space();
    const ch = this.text[this.at];
    if (ch === undefined) {
      this.ended = true;
      return null;
    }
    if (ch === "{") return { value: this.object() };
    if (ch === "[") return { value: this.array() };
    if (ch === '"') return { value: this.string() };
    if (ch === "-" || (ch >= "0" && ch <= "9")) return this.number();
    return this.literal();
  }

  /** Whether the rest of the text is whitespace. */
  atEnd(): boolean {
    this.space();
    return this.at >= this.text.length;
  }

  private space(): void {
    while (/\s/.test(this.text[this.at] ?? "")) this.at++;
  }

  /** The members read in full; a cut member (its key, or a key without a whole value) is left out. */
  private object(): Record<string, unknown> {
    this.at++;
    const members: Record<string, unknown> = {};
    for (;;) {
      this.space();
      const ch = this.text[this.at];
      if (ch === undefined) {
        this.ended = true;
        return members;
      }
      if (ch === "}") {
        this.at++;
        return members;
      }
      if (ch === ",") {
        this.at++;
        continue;
      }
      if (ch !== '"') throw new NotJson();
      const key = this.string();
      if (this.ended) return members;
      this.space();
      if (this.at >= this.text.length) {
        this.ended = true;
        return members;
      }
      if (this.text[this.at] !== ":") throw new NotJson();
      this.at++;
      const read = this.value();
      if (read !== null) members[key] = read.value;
      if (this.ended) return members;
    }
  }

  private array(): unknown[] {
    this.at++;
    const items: unknown[] = [];
    for (;;) {
      this.space();
      const ch = this.text[this.at];
      if (ch === undefined) {
        this.ended = true;
        return items;
      }
      if (ch === "]") {
        this.at++;
        return items;
      }
      if (ch === ",") {
        this.at++;
        continue;
      }
      const read = this.value();
      if (read !== null) items.push(read.value);
      if (this.ended) return items;
    }
  }

  /** A string as far as it goes; a cut escape is left out. Raw control characters are taken as models write them. */
  private string(): string {
    this.at++;
    let out = "";
    for (;;) {
      const ch = this.text[this.at];
      if (ch === undefined) {
        this.ended = true;
        return out;
      }
      this.at++;
      if (ch === '"') return out;
      if (ch !== "\\") {
        out += ch;
        continue;
      }
      const escaped = this.text[this.at];
      if (escaped === undefined) {
        this.ended = true;
        return out;
      }
      if (escaped === "u") {
        const hex = this.text.slice(this.at + 1, this.at + 5);
        if (!/^[0-9a-fA-F]*$/.test(hex)) throw new NotJson();
        if (hex.length < 4) {
          this.ended = true;
          return out;
        }
        out += String.fromCharCode(Number.parseInt(hex, 16));
        this.at += 5;
        continue;
      }
      const decoded = ESCAPES[escaped];
      if (decoded === undefined) throw new NotJson();
      out += decoded;
      this.at++;
    }
  }

  /** A number, or a CutNumber where the text ends inside one. */
  private number(): Read {
    NUMBER.lastIndex = this.at;
    const text = (NUMBER.exec(this.text) as RegExpExecArray)[0];
    this.at += text.length;
    if (this.at >= this.text.length) {
      this.ended = true;
      return { value: new CutNumber(text) };
    }
    if (!WHOLE_NUMBER.test(text)) throw new NotJson();
    return { value: Number(text) };
  }

  /** `true`, `false`, `null`, or the start of one the text cut off. */
  private literal(): Read {
    const rest = this.text.slice(this.at);
    for (const [word, value] of LITERALS) {
      if (rest.startsWith(word)) {
        this.at += word.length;
        return { value };
      }
      if (word.startsWith(rest)) {
        this.at = this.text.length;
        this.ended = true;
        return { value };
      }
    }
    throw new NotJson();
  }
}

/**
 * What a JSON text cut off at its end says: open strings, arrays and objects closed, a member or element
 * the text did not finish left out (a key without its value), a cut number as a CutNumber, a cut literal as
 * the literal. Undefined when the text is no beginning of one JSON value (whitespace alone
 * included) or nests deeper than MAX_JSON_DEPTH.
 */
export function partialJsonValue(text: string): unknown {
  if (jsonTextDepth(text) > MAX_JSON_DEPTH) return undefined;
  const reader = new PartialReader(text);
  try {
    const read = reader.value();
    if (read === null || (!reader.ended && !reader.atEnd())) return undefined;
    return read.value;
  } catch (error) {
    if (error instanceof NotJson) return undefined;
    throw error;
  }
}

/**
 * Whether `echoed` says nothing that `generated` does not: a string its beginning, an array as many items
 * or fewer, each saying no more than the generated one, an object some of its members (each saying no
 * more), any number where one was cut off (either side), anything else equal. A cut call read back by any partial parser says no more than the text it
 * was read from.
 */
export function saysNoMoreThan(echoed: unknown, generated: unknown): boolean {
  const numeric = (x: unknown) => typeof x === "number" || x instanceof CutNumber;
  if (
    (echoed instanceof CutNumber || generated instanceof CutNumber) &&
    numeric(echoed) &&
    numeric(generated)
  )
    return true;
  if (typeof echoed === "string") return typeof generated === "string" && generated.startsWith(echoed);
  if (Array.isArray(echoed)) {
    return (
      Array.isArray(generated) &&
      echoed.length <= generated.length &&
      echoed.every((item, i) => saysNoMoreThan(item, generated[i]))
    );
  }
  if (isRecord(echoed)) {
    return (
      isRecord(generated) &&
      Object.entries(echoed).every(
        ([key, value]) => Object.hasOwn(generated, key) && saysNoMoreThan(value, generated[key]),
      )
    );
  }
  return echoed === generated;
}
