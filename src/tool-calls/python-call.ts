/**
 * Parser for the pythonic tool calls Llama 3.x writes: `name(a=1, b="x")` after `<|python_tag|>`, or a
 * list `[f(a=1), g(b=[1, 2])]`. Arguments must be keyword arguments with Python literal values
 * (strings, numbers, True/False/None, lists, tuples, dicts).
 */

export interface PythonCall {
  readonly name: string;
  readonly args: Record<string, unknown>;
}

class Cursor {
  i = 0;
  constructor(readonly text: string) {}

  skipSpace(): void {
    while (this.i < this.text.length && /\s/.test(this.text[this.i]!)) this.i++;
  }

  peek(): string | undefined {
    this.skipSpace();
    return this.text[this.i];
  }

  eat(ch: string): boolean {
    if (this.peek() !== ch) return false;
    this.i++;
    return true;
  }

  expect(ch: string): void {
    if (!this.eat(ch)) throw new SyntaxError(`expected ${ch} at ${this.i}`);
  }

  identifier(): string | null {
    this.skipSpace();
    const match = /^[A-Za-z_][\w.]*/.exec(this.text.slice(this.i));
    if (!match) return null;
    this.i += match[0].length;
    return match[0];
  }
}

const ESCAPES: Readonly<Record<string, string>> = { n: "\n", t: "\t", r: "\r", "0": "\0" };

function stringLiteral(c: Cursor): string {
  const quote = c.text[c.i]!;
  const triple = c.text.startsWith(quote.repeat(3), c.i);
  const close = triple ? quote.repeat(3) : quote;
  c.i += close.length;
  let out = "";
  while (c.i < c.text.length) {
    if (c.text.startsWith(close, c.i)) {
      c.i += close.length;
      return out;
    }
    const ch = c.text[c.i]!;
    if (ch === "\\" && c.i + 1 < c.text.length) {
      const next = c.text[c.i + 1]!;
      out += ESCAPES[next] ?? next;
      c.i += 2;
    } else {
      out += ch;
      c.i++;
    }
  }
  throw new SyntaxError("unterminated string");
}

function sequence(c: Cursor, close: string): unknown[] {
  const items: unknown[] = [];
  while (!c.eat(close)) {
    items.push(literal(c));
    if (!c.eat(",")) {
      c.expect(close);
      break;
    }
  }
  return items;
}

function literal(c: Cursor): unknown {
  const ch = c.peek();
  if (ch === '"' || ch === "'") return stringLiteral(c);
  if (ch === "[") {
    c.i++;
    return sequence(c, "]");
  }
  if (ch === "(") {
    c.i++;
    return sequence(c, ")");
  }
  if (ch === "{") {
    c.i++;
    const out: Record<string, unknown> = {};
    while (!c.eat("}")) {
      const key = literal(c);
      c.expect(":");
      out[String(key)] = literal(c);
      if (!c.eat(",")) {
        c.expect("}");
        break;
      }
    }
    return out;
  }
  const number = /^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?/.exec(c.text.slice(c.i));
  if (number) {
    c.i += number[0].length;
    return Number(number[0]);
  }
  const word = c.identifier();
  if (word === "True" || word === "true") return true;
  if (word === "False" || word === "false") return false;
  if (word === "None" || word === "null") return null;
  throw new SyntaxError(`unexpected ${JSON.stringify(word ?? c.text[c.i] ?? "end")} at ${c.i}`);
}

function call(c: Cursor): PythonCall {
  const callee = c.identifier();
  if (callee === null) throw new SyntaxError("expected a function name");
  c.expect("(");
  const args: Record<string, unknown> = {};
  while (!c.eat(")")) {
    const key = c.identifier();
    if (key === null) throw new SyntaxError("only keyword arguments are supported");
    c.expect("=");
    args[key] = literal(c);
    if (!c.eat(",")) {
      c.expect(")");
      break;
    }
  }
  // `brave_search.call(query=...)` is Llama 3.1's way to call its built-in tool brave_search.
  return { name: callee.replace(/\.call$/, ""), args };
}

/** One call `name(k=v, ...)` at the start of `text` (trailing text ignored), or null. */
export function parsePythonCall(text: string): PythonCall | null {
  try {
    return call(new Cursor(text));
  } catch {
    return null;
  }
}

/** The calls of a list `[f(...), g(...)]` at the start of `text`, or null. */
export function parsePythonCallList(text: string): PythonCall[] | null {
  const c = new Cursor(text);
  try {
    c.expect("[");
    const calls: PythonCall[] = [];
    while (!c.eat("]")) {
      calls.push(call(c));
      if (!c.eat(",")) {
        c.expect("]");
        break;
      }
    }
    return calls.length > 0 ? calls : null;
  } catch {
    return null;
  }
}
