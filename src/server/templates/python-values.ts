/**
 * Python's way with values, for what jinja-compat.ts's helpers give templates: `repr()`, `str()`, `==`,
 * `str.format`, over the values of @huggingface/jinja's runtime.
 */

/** A value of the library's runtime, as a helper sees the items of a list it is given. */
export interface Value {
  type: string;
  value: unknown;
}

const ESCAPES: Readonly<Record<string, string>> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

function pyQuote(text: string): string {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let body = "";
  for (const c of text) {
    const code = c.charCodeAt(0);
    if (c === quote) body += `\\${c}`;
    else if (ESCAPES[c] !== undefined) body += ESCAPES[c];
    else if (code < 0x20 || code === 0x7f) body += `\\x${code.toString(16).padStart(2, "0")}`;
    else body += c;
  }
  return quote + body + quote;
}

/** Python's `repr()`. */
export function pyRepr(v: Value): string {
  switch (v.type) {
    case "StringValue":
      return pyQuote(v.value as string);
    case "BooleanValue":
      return v.value ? "True" : "False";
    case "NullValue":
    case "UndefinedValue":
      return "None";
    case "ArrayValue":
      return `[${(v.value as Value[]).map(pyRepr).join(", ")}]`;
    case "TupleValue": {
      const items = (v.value as Value[]).map(pyRepr);
      return `(${items.join(", ")}${items.length === 1 ? "," : ""})`;
    }
    case "ObjectValue":
      return `{${[...(v.value as Map<string, Value>)].map(([k, x]) => `${pyQuote(k)}: ${pyRepr(x)}`).join(", ")}}`;
    default:
      return String(v); // numbers: the library writes floats as Python does (1.0)
  }
}

/** Python's `str()` (Jinja's for an undefined value: empty). */
export function pyStr(v: Value): string {
  if (v.type === "StringValue") return v.value as string;
  return v.type === "UndefinedValue" ? "" : pyRepr(v);
}

/** `template.format(*args, **kwargs)` for plain fields; a conversion or format spec is refused, not ignored. */
export function pyFormat(template: unknown, args: Value[], kwargs: Map<string, Value>): string {
  if (typeof template !== "string") throw new Error("format: only a string has a format method");
  let next = 0;
  return template.replace(/\{\{|\}\}|\{([^{}]*)\}/g, (match, field: string | undefined) => {
    if (field === undefined) return match[0]!;
    if (/[!:.[]/.test(field)) throw new Error(`format: the field {${field}} is not supported`);
    const value = field === "" ? args[next++] : /^\d+$/.test(field) ? args[Number(field)] : kwargs.get(field);
    if (value === undefined) throw new Error(`format: no argument for the field {${field}}`);
    return pyStr(value);
  });
}

export const isSequence = (v: Value): boolean => v.type === "ArrayValue" || v.type === "TupleValue";
export const isDict = (v: Value): boolean => v.type === "ObjectValue" || v.type === "KeywordArgumentsValue";
const NUMERIC = new Set(["IntegerValue", "FloatValue", "BooleanValue"]);

/** Python's `==` (a list is not equal to a tuple, `True` is to 1). */
export function pyEqual(a: Value, b: Value): boolean {
  if (NUMERIC.has(a.type) && NUMERIC.has(b.type)) return Number(a.value) === Number(b.value);
  if (a.type !== b.type) return false;
  if (isSequence(a)) {
    const [x, y] = [a.value as Value[], b.value as Value[]];
    return x.length === y.length && x.every((item, i) => pyEqual(item, y[i]!));
  }
  if (isDict(a)) {
    const [x, y] = [a.value as Map<string, Value>, b.value as Map<string, Value>];
    return x.size === y.size && [...x].every(([k, v]) => y.has(k) && pyEqual(v, y.get(k)!));
  }
  return a.type === "NullValue" || a.type === "UndefinedValue" || a.value === b.value;
}
