import { asToolName } from "./tool-name.js";

const ENV_ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;

/** Prefixes that run the command after them, with the options of each that consume the next word. */
const WRAPPER_VALUE_OPTIONS: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ["sudo", new Set(["-u", "-g", "-C", "-D", "-p", "-T", "-U"])],
  ["timeout", new Set(["-s", "-k"])],
  ["time", new Set(["-f", "-o"])],
  ["env", new Set(["-u", "-C"])],
  ["nohup", new Set<string>()],
]);

function isBlank(ch: string): boolean {
  return /\s/.test(ch);
}

/**
 * Words of each simple command in a shell script, split at `&&`, `||`, `;`, `|`, `(`, `)` and newlines.
 * Quotes group words and are removed, backslash escapes one character, `#` starts a comment.
 */
function commandSegments(script: string): string[][] {
  const segments: string[][] = [];
  let words: string[] = [];
  // null until a word starts, so that `""` still counts as an empty word.
  let word: string | null = null;
  let quote: "'" | '"' | null = null;

  const endWord = () => {
    if (word !== null) words.push(word);
    word = null;
  };
  const endSegment = () => {
    endWord();
    if (words.length > 0) segments.push(words);
    words = [];
  };

  for (let i = 0; i < script.length; i++) {
    const ch = script[i]!;
    const next = script[i + 1];
    if (quote === "'") {
      if (ch === "'") quote = null;
      else word = (word ?? "") + ch;
    } else if (quote === '"') {
      if (ch === '"') quote = null;
      else if (ch === "\\" && next !== undefined && '"\\$`'.includes(next)) {
        word = (word ?? "") + next;
        i++;
      } else word = (word ?? "") + ch;
    } else if (ch === "\\") {
      // Backslash-newline is a line continuation: it joins lines and contributes nothing.
      if (next !== "\n" && next !== undefined) word = (word ?? "") + next;
      i++;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      word ??= "";
    } else if (ch === "#" && word === null) {
      while (i + 1 < script.length && script[i + 1] !== "\n") i++;
    } else if (ch === "\n" || ch === ";" || ch === "(" || ch === ")") {
      endSegment();
    } else if (ch === "|" || (ch === "&" && next === "&")) {
      endSegment();
      if (next === ch) i++;
    } else if (isBlank(ch)) {
      endWord();
    } else {
      word = (word ?? "") + ch;
    }
  }
  endSegment();
  return segments;
}

/** Index of the first word after a wrapper's options (`sudo -u bob`, `timeout -s KILL`). */
function skipOptions(words: readonly string[], from: number, valueOptions: ReadonlySet<string>): number {
  let i = from;
  while (i < words.length && words[i]!.startsWith("-")) {
    const option = words[i]!;
    i += valueOptions.has(option) ? 2 : 1;
    if (option === "--") break;
  }
  return i;
}

/** The word a segment actually runs, past env assignments and wrappers like `sudo` or `timeout 10`. */
function commandWord(words: readonly string[]): string | undefined {
  let i = 0;
  while (i < words.length) {
    const current = words[i]!;
    const valueOptions = WRAPPER_VALUE_OPTIONS.get(current);
    if (ENV_ASSIGNMENT.test(current)) {
      i++;
    } else if (valueOptions) {
      i = skipOptions(words, i + 1, valueOptions);
      if (current === "timeout") i++; // the duration
    } else {
      return current;
    }
  }
  return undefined;
}

function basename(path: string): string {
  const parts = path.split("/").filter((part) => part.length > 0);
  return parts.at(-1) ?? path;
}

/**
 * The program a shell script runs first, as a tool identity: `cd /testbed && FOO=1 /usr/bin/python3 x.py`
 * is `python3`. `cd` counts only when the script does nothing else, since it says nothing about the
 * tool's duration.
 */
export function headCommand(script: string): string | null {
  let sawCd = false;
  for (const words of commandSegments(script)) {
    const command = commandWord(words);
    if (command === undefined) continue;
    if (command === "cd") {
      sawCd = true;
      continue;
    }
    return asToolName(basename(command));
  }
  return sawCd ? "cd" : null;
}
