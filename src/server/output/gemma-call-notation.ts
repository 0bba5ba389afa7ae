/**
 * Gemma 4 writes a tool call's arguments in its own object notation, not JSON:
 * `{command:<|"|>ls -la<|"|>,depth:2,flags:[true,false],opts:{dry:true}}` — keys bare (or quoted),
 * strings between `<|"|>` marks (so they need no escapes), numbers, booleans and null as in JSON.
 */
export const GEMMA_QUOTE = '<|"|>';

export interface NotationValue {
  readonly value: unknown;
  /** index just past the value */
  readonly end: number;
}

function skipSpace(text: string, at: number): number {
  let i = at;
  while (i < text.length && /\s/.test(text[i] as string)) i++;
  return i;
}

function readQuoted(text: string, at: number): NotationValue | null {
  const close = text.indexOf(GEMMA_QUOTE, at + GEMMA_QUOTE.length);
  if (close === -1) return null;
  return { value: text.slice(at + GEMMA_QUOTE.length, close), end: close + GEMMA_QUOTE.length };
}

/** A bare scalar up to the next separator: true/false/null, a number, else the text itself. */
function readBare(text: string, at: number): NotationValue | null {
  let end = at;
  while (end < text.length && !",}]".includes(text[end] as string)) end++;
  const raw = text.slice(at, end).trim();
  if (raw === "") return null;
  if (raw === "true" || raw === "false") return { value: raw === "true", end };
  if (raw === "null") return { value: null, end };
  const number = Number(raw);
  return { value: Number.isFinite(number) ? number : raw, end };
}

function readKey(text: string, at: number): NotationValue | null {
  if (text.startsWith(GEMMA_QUOTE, at)) return readQuoted(text, at);
  const colon = text.indexOf(":", at);
  if (colon === -1) return null;
  const key = text.slice(at, colon).trim();
  return key === "" ? null : { value: key, end: colon };
}

function readObject(text: string, at: number): NotationValue | null {
  const object: Record<string, unknown> = {};
  let i = skipSpace(text, at + 1);
  if (text[i] === "}") return { value: object, end: i + 1 };
  for (;;) {
    const key = readKey(text, skipSpace(text, i));
    if (key === null) return null;
    i = skipSpace(text, key.end);
    if (text[i] !== ":") return null;
    const value = readNotationValue(text, i + 1);
    if (value === null) return null;
    object[key.value as string] = value.value;
    i = skipSpace(text, value.end);
    if (text[i] === "}") return { value: object, end: i + 1 };
    if (text[i] !== ",") return null;
    i++;
  }
}

function readArray(text: string, at: number): NotationValue | null {
  const array: unknown[] = [];
  let i = skipSpace(text, at + 1);
  if (text[i] === "]") return { value: array, end: i + 1 };
  for (;;) {
    const value = readNotationValue(text, i);
    if (value === null) return null;
    array.push(value.value);
    i = skipSpace(text, value.end);
    if (text[i] === "]") return { value: array, end: i + 1 };
    if (text[i] !== ",") return null;
    i++;
  }
}

/** The value starting at `at` (after optional whitespace), or null when it is not complete. */
export function readNotationValue(text: string, at: number): NotationValue | null {
  const i = skipSpace(text, at);
  if (text.startsWith(GEMMA_QUOTE, i)) return readQuoted(text, i);
  if (text[i] === "{") return readObject(text, i);
  if (text[i] === "[") return readArray(text, i);
  return readBare(text, i);
}
