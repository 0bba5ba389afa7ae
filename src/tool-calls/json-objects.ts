import { withinJsonDepth } from "./json-depth.js";

// Model outputs hold a handful of JSON objects at most; the cap keeps adversarial input (thousands of
// unbalanced braces) from turning the scan quadratic.
const MAX_START_ATTEMPTS = 64;

/** End index (exclusive) of the balanced `{...}` starting at `start`, honouring JSON strings, or -1. */
function balancedObjectEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (ch === "\\") i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') {
      inString = true;
    } else if (ch === "{") {
      depth++;
    } else if (ch === "}") {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function parseObject(candidate: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(candidate);
    return isRecord(value) && withinJsonDepth(value) ? value : null;
  } catch {
    return null;
  }
}

/**
 * JSON.parse that also takes raw control characters inside strings (bash commands with newlines); a value
 * nested deeper than code may walk (json-depth.ts) is undefined, as unreadable text is.
 */
export function parseJsonLenient(text: string): unknown {
  const value = parseControlCharacters(text);
  return withinJsonDepth(value) ? value : undefined;
}

function parseControlCharacters(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    let fixed = "";
    let inString = false;
    for (let i = 0; i < text.length; i++) {
      const ch = text[i]!;
      if (inString && ch === "\\") {
        fixed += ch + (text[i + 1] ?? "");
        i++;
        continue;
      }
      if (ch === '"') inString = !inString;
      if (inString && ch < " ") fixed += `\\u${ch.charCodeAt(0).toString(16).padStart(4, "0")}`;
      else fixed += ch;
    }
    try {
      return JSON.parse(fixed);
    } catch {
      return undefined;
    }
  }
}

/** End (exclusive) of the balanced `{...}` `text` opens with (after whitespace), or -1. */
export function leadingJsonObjectEnd(text: string): number {
  const start = text.length - text.trimStart().length;
  return text[start] === "{" ? balancedObjectEnd(text, start) : -1;
}

/** The JSON object `text` opens with (after whitespace), or null when it does not open one or it is cut off. */
export function leadingJsonObject(text: string): Record<string, unknown> | null {
  const end = leadingJsonObjectEnd(text);
  return end === -1 ? null : parseObject(text.slice(0, end));
}

/** The JSON objects embedded in free text (prose, code fences), outermost ones only, in order. */
export function* jsonObjectsIn(text: string): Generator<Record<string, unknown>> {
  let from = text.indexOf("{");
  for (let attempt = 0; from !== -1 && attempt < MAX_START_ATTEMPTS; attempt++) {
    const end = balancedObjectEnd(text, from);
    if (end === -1) {
      from = text.indexOf("{", from + 1);
      continue;
    }
    const parsed = parseObject(text.slice(from, end));
    if (parsed) yield parsed;
    from = text.indexOf("{", end);
  }
}
