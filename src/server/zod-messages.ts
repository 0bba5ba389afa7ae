/**
 * zod's issues in the words a client's 400 should use: what type or value was expected and what came
 * (`expected a string or an array, got number`), where zod's own words say only "Invalid input" for a value
 * no alternative of a union takes. `typeNamingErrorMap` words each issue as zod makes it (it alone sees the
 * value); `deepestIssue` picks, for a union, the alternative that got furthest, so a wrong item inside an
 * array says where it is (`input[0]: expected an object, got number`).
 */
import type { z } from "zod";

type Issue = z.core.$ZodIssue;
type RawIssue = z.core.$ZodRawIssue;

/** A JSON value's type as a client names it. */
function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (value === undefined) return "nothing";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number" && !Number.isFinite(value)) return String(value);
  return typeof value;
}

const EXPECTED: Readonly<Record<string, string>> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "a boolean",
  object: "an object",
  record: "an object",
  array: "an array",
  tuple: "an array",
  null: "null",
  undefined: "nothing",
  nonoptional: "a value",
};

const expectedType = (type: string) => EXPECTED[type] ?? `a value of type ${type}`;

/** A value as written in JSON, shortened. */
function literal(value: unknown): string {
  const text = typeof value === "bigint" ? String(value) : (JSON.stringify(value) ?? String(value));
  return text.length > 40 ? `${text.slice(0, 37)}...` : text;
}

/** What came, in a message: a primitive's value where a value was expected, else its type. */
function got(value: unknown, byValue: boolean): string {
  const primitive = value === null || ["string", "number", "boolean"].includes(typeof value);
  return byValue && primitive ? literal(value) : typeOf(value);
}

/** A discriminated union's values of its discriminator, when the value's matched none. */
function discriminatorOptions(issue: Issue | RawIssue): readonly unknown[] | undefined {
  if (issue.code !== "invalid_union") return undefined;
  return (issue as { readonly options?: readonly unknown[] }).options;
}

interface Alternatives {
  readonly expected: string[];
  /** the alternatives name values (or integers), so what came is shown as its value */
  readonly byValue: boolean;
}

/**
 * What a union's alternatives expected of the value itself, when every one of them refused it at its root
 * (its type or its value); null when one got further in (then that one's issue says more).
 */
function rootAlternatives(branches: readonly (readonly Issue[])[]): Alternatives | null {
  const expected: string[] = [];
  let byValue = false;
  for (const issues of branches) {
    const issue = issues[0];
    if (!issue || issue.path.length > 0) return null;
    if (issue.code === "invalid_type") {
      expected.push(expectedType(issue.expected));
      byValue ||= issue.expected === "int";
    } else if (issue.code === "invalid_value") {
      expected.push(...issue.values.map(literal));
      byValue = true;
    } else if (issue.code === "invalid_union" && !discriminatorOptions(issue)) {
      const inner = rootAlternatives(issue.errors);
      if (!inner) return null;
      expected.push(...inner.expected);
      byValue ||= inner.byValue;
    } else {
      return null;
    }
  }
  return expected.length > 0 ? { expected: [...new Set(expected)], byValue } : null;
}

/**
 * zod's error map for every parse: a wrong type, a union no alternative takes, an unknown discriminator
 * are worded with what was expected and what came; other issues keep zod's words (undefined).
 */
export function typeNamingErrorMap(issue: RawIssue): string | undefined {
  switch (issue.code) {
    case "invalid_type":
      return `expected ${expectedType(issue.expected)}, got ${got(issue.input, issue.expected === "int")}`;
    case "invalid_value":
      return issue.values.length === 1
        ? `expected ${literal(issue.values[0])}, got ${got(issue.input, true)}`
        : `expected one of ${issue.values.map(literal).join(", ")}, got ${got(issue.input, true)}`;
    case "invalid_union": {
      const options = discriminatorOptions(issue);
      if (options) {
        // a discriminated union: the issue's path ends at the discriminator, the input is the whole value
        const key = issue.path?.at(-1) as PropertyKey | undefined;
        const value =
          key !== undefined && issue.input !== null && typeof issue.input === "object"
            ? (issue.input as Record<PropertyKey, unknown>)[key]
            : undefined;
        return `expected one of ${options.map(literal).join(", ")}, got ${got(value, true)}`;
      }
      const alternatives = rootAlternatives(issue.errors);
      if (!alternatives) return undefined;
      return `expected ${alternatives.expected.join(" or ")}, got ${got(issue.input, alternatives.byValue)}`;
    }
    default:
      return undefined;
  }
}

/**
 * The issue that says most about a value: a union whose alternatives did not all fail at the value's root
 * gives the issue of the alternative that got furthest in (the longest path), its path joined to the
 * union's, recursively.
 */
export function deepestIssue(issue: Issue): Issue {
  if (issue.code !== "invalid_union" || discriminatorOptions(issue) || rootAlternatives(issue.errors)) {
    return issue;
  }
  let best: Issue | null = null;
  for (const branch of issue.errors) {
    const first = branch[0];
    if (!first) continue;
    const rootMismatch = first.path.length === 0 && rootAlternatives([branch]) !== null;
    if (rootMismatch) continue;
    if (!best || first.path.length > best.path.length) best = first;
  }
  if (!best) return issue;
  const inner = deepestIssue(best);
  return { ...inner, path: [...issue.path, ...inner.path] };
}

/** A path as a client writes it, after `prefix` (a field's own path): `input[0].content`. */
export function issuePath(path: readonly PropertyKey[], prefix = ""): string {
  let out = prefix;
  for (const key of path) out += typeof key === "number" ? `[${key}]` : out ? `.${String(key)}` : String(key);
  return out;
}
