/**
 * The Python that models' chat templates use and @huggingface/jinja lacks (llama.cpp's Jinja engine has
 * it), rewritten in the parsed template into what the library runs; the library itself is untouched:
 * - `list.append(x)`, `list.pop(i)` / `dict.pop(key)`: in place, by helpers given the list itself;
 * - `str.format(...)`: `{}`, `{0}` and `{name}` fields, Python's `str()` of each value;
 * - `|min`, `|max`: the first of `|sort` (their arguments are sort's);
 * - `|string` of a dict: Python's `str()`, as Python's Jinja and llama.cpp write it;
 * - integer keys in a dict literal (ByteDance Seed-OSS's budget table): the library keys dicts by strings
 *   only, so the keys become strings, a lookup converts its key, and `dictsort`, `items()`, `keys()` and a
 *   loop over a variable set to such a dict give the integers back, as Python would;
 * - tuples in a list literal (`[("a", "b"), ...]`) become lists: the library unpacks only lists in a loop.
 */

import { Template } from "@huggingface/jinja";

/** A node of the library's AST: its classes are not exported, and its interpreter goes by `type` alone. */
interface Node {
  type: string;
  [field: string]: unknown;
}
type Call = Node & { callee: Node; args: Node[] };
type Member = Node & { object: Node; property: Node; computed: boolean };
type Filter = Node & { operand: Node; filter: Node };

/** A value of the library's runtime, as a helper sees the items of a list it is given. */
interface Value {
  type: string;
  value: unknown;
}

const id = (value: string): Node => ({ type: "Identifier", value });
const str = (value: string): Node => ({ type: "StringLiteral", value });
const int = (value: number): Node => ({ type: "IntegerLiteral", value });
const list = (value: Node[]): Node => ({ type: "ArrayLiteral", value });
const call = (callee: Node, args: Node[]): Node => ({ type: "CallExpression", callee, args });
const filter = (operand: Node, by: Node): Node => ({ type: "FilterExpression", operand, filter: by });
const item = (object: Node, property: Node): Node => ({
  type: "MemberExpression",
  object,
  property,
  computed: true,
});
const kwarg = (key: string, value: Node): Node => ({
  type: "KeywordArgumentExpression",
  key: id(key),
  value,
});

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
function pyRepr(v: Value): string {
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
function pyStr(v: Value): string {
  if (v.type === "StringValue") return v.value as string;
  return v.type === "UndefinedValue" ? "" : pyRepr(v);
}

/** `template.format(*args, **kwargs)` for plain fields; a conversion or format spec is refused, not ignored. */
function pyFormat(template: unknown, args: Value[], kwargs: Map<string, Value>): string {
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

/**
 * Called from the rewritten template. The library gives a function its arguments' `.value`: a list's is
 * the list itself (changed in place); a value it needs whole is wrapped in a list by the rewrite.
 */
const HELPERS = {
  $append(target: unknown, [value]: Value[]): null {
    if (!Array.isArray(target)) throw new Error("append: not a list");
    target.push(value);
    return null;
  },
  // the rewrite reads the popped item itself: a function cannot return one of the library's values
  $pop(target: unknown, key: unknown): null {
    if (Array.isArray(target) && typeof key === "number") {
      const index = key < 0 ? target.length + key : key;
      if (index < 0 || index >= target.length) throw new Error("pop index out of range");
      target.splice(index, 1);
    } else if (target instanceof Map) {
      if (!target.delete(key)) throw new Error(`pop: no key ${String(key)}`);
    } else {
      throw new Error("pop: not a list or dict");
    }
    return null;
  },
  $format: pyFormat,
  // as the library's own `string` filter, but a dict (which it refuses), none and undefined as Python's
  $string([v]: Value[]): string {
    return ["ObjectValue", "NullValue", "UndefinedValue"].includes(v!.type) ? pyStr(v!) : String(v);
  },
};

function nameOf(node: Node): string | null {
  if (node.type === "Identifier") return node.value as string;
  const callee = (node as Call).callee;
  return node.type === "CallExpression" && callee.type === "Identifier" ? (callee.value as string) : null;
}

const isPlain = (arg: Node): boolean => !arg.type.includes("Keyword") && arg.type !== "SpreadExpression";

/** The integer keys of a dict literal whose keys all are integers. */
function integerKeys(node: unknown): number[] | null {
  if ((node as Node | null)?.type !== "ObjectLiteral") return null;
  const keys = [...((node as Node).value as Map<Node, Node>).keys()];
  if (keys.length === 0 || keys.some((k) => k.type !== "IntegerLiteral")) return null;
  return keys.map((k) => k.value as number);
}

/** The variables a template sets to a dict literal with integer keys, with those keys. */
function integerKeyedDicts(program: Node): Map<string, number[]> {
  const dicts = new Map<string, number[]>();
  walk(program, (node) => {
    const keys = integerKeys(node["value"]);
    const assignee = node["assignee"] as Node | undefined;
    if (node.type === "Set" && keys !== null && assignee?.type === "Identifier") {
      dicts.set(assignee.value as string, keys);
    }
    return node;
  });
  return dicts;
}

class Rewriter {
  constructor(private readonly intDicts: ReadonlyMap<string, number[]>) {}

  private keysOf(node: Node): number[] | undefined {
    return node.type === "Identifier" ? this.intDicts.get(node.value as string) : undefined;
  }

  /** `dict[key]` of such a dict: its key as the string it became */
  private lookupKey(key: Node): Node {
    return key.type === "IntegerLiteral" ? str(String(key.value)) : filter(key, id("string"));
  }

  /** `dictsort`, `items()`, `keys()` of such a dict, with its integer keys */
  private view(dict: Node, keys: number[], as: "dictsort" | "items" | "keys"): Node {
    if (as === "keys") return list(keys.map(int));
    const order = as === "dictsort" ? [...keys].sort((a, b) => a - b) : keys;
    return list(order.map((k) => list([int(k), item(dict, str(String(k)))])));
  }

  rewrite(node: Node): Node {
    switch (node.type) {
      case "CallExpression":
        return this.rewriteCall(node as Call) ?? node;
      case "FilterExpression":
        return this.rewriteFilter(node as Filter) ?? node;
      case "MemberExpression": {
        const member = node as Member;
        if (member.computed && member.property.type !== "SliceExpression" && this.keysOf(member.object)) {
          member.property = this.lookupKey(member.property);
        }
        return member;
      }
      case "BinaryExpression": {
        const op = (node["operator"] as { value: string }).value;
        if ((op === "in" || op === "not in") && this.keysOf(node["right"] as Node)) {
          node["left"] = this.lookupKey(node["left"] as Node);
        }
        return node;
      }
      case "For": {
        const keys = this.keysOf(node["iterable"] as Node);
        if (keys) node["iterable"] = this.view(node["iterable"] as Node, keys, "keys");
        return node;
      }
      case "ObjectLiteral": {
        const entries = [...(node.value as Map<Node, Node>)];
        node.value = new Map(
          entries.map(([k, v]) => [k.type === "IntegerLiteral" ? str(String(k.value)) : k, v]),
        );
        return node;
      }
      case "ArrayLiteral":
      case "TupleLiteral":
        node.value = (node.value as Node[]).map((x) =>
          x.type === "TupleLiteral" ? list(x.value as Node[]) : x,
        );
        return node;
      default:
        return node;
    }
  }

  private rewriteCall(node: Call): Node | null {
    const callee = node.callee as Member;
    if (callee.type !== "MemberExpression" || callee.computed) return null;
    const { object } = callee;
    const method = callee.property.value as string;
    const args = node.args;
    const plain = args.every(isPlain);
    const keys = this.keysOf(object);
    if (keys && (method === "items" || method === "keys") && args.length === 0) {
      return this.view(object, keys, method);
    }
    if (keys && method === "get" && args.length > 0 && plain) {
      return call(callee, [this.lookupKey(args[0]!), ...args.slice(1)]);
    }
    switch (method) {
      case "append":
        return args.length === 1 && plain ? call(id("$append"), [object, list(args)]) : null;
      case "pop": {
        if (args.length > 1 || !plain) return null;
        const key = args[0] ?? int(-1);
        // [l[i], $pop(l, i)][0]: the item is read before it is removed
        return item(list([item(object, key), call(id("$pop"), [object, key])]), int(0));
      }
      case "format": {
        if (args.some((a) => a.type.includes("Spread"))) return null;
        const kwargs = args.filter((a) => !isPlain(a)) as (Node & { key: Node; value: Node })[];
        const named: Node = {
          type: "ObjectLiteral",
          value: new Map(kwargs.map((a) => [str(a.key.value as string), a.value])),
        };
        return call(id("$format"), [object, list(args.filter(isPlain)), named]);
      }
      default:
        return null;
    }
  }

  private rewriteFilter(node: Filter): Node | null {
    const name = nameOf(node.filter);
    const args = node.filter.type === "CallExpression" ? (node.filter as Call).args : [];
    const keys = this.keysOf(node.operand);
    if (keys && (name === "dictsort" || name === "items") && args.length === 0) {
      return this.view(node.operand, keys, name);
    }
    switch (name) {
      case "string":
        return node.filter.type === "Identifier" ? call(id("$string"), [list([node.operand])]) : null;
      case "min":
      case "max": {
        // min(case_sensitive, attribute) and max(...) are the first of sort(reverse, case_sensitive, attribute)
        const positional = ["case_sensitive", "attribute"];
        if (args.filter(isPlain).length > positional.length) return null;
        const sortArgs = args.map((a, i) => (isPlain(a) ? kwarg(positional[i]!, a) : a));
        if (name === "max") sortArgs.unshift(kwarg("reverse", id("true")));
        const sort = sortArgs.length > 0 ? call(id("sort"), sortArgs) : id("sort");
        return filter(filter(node.operand, sort), id("first"));
      }
      default:
        return null;
    }
  }
}

/**
 * Every node below `node`, children first, replaced by what `visit` returns for it. A loop's variables and
 * an assignment's target are names, not expressions, and an operator is a token: those are left as they are.
 */
function walk(node: Node, visit: (node: Node) => Node): Node {
  const rewrite = (x: unknown): unknown => (isNode(x) ? walk(x, visit) : x);
  for (const [field, child] of Object.entries(node)) {
    if (field === "loopvar" || field === "assignee" || field === "operator") continue;
    if (Array.isArray(child)) node[field] = child.map(rewrite);
    else if (child instanceof Map)
      node[field] = new Map([...child].map(([k, v]) => [rewrite(k), rewrite(v)]));
    else node[field] = rewrite(child);
  }
  return visit(node);
}

function isNode(x: unknown): x is Node {
  return typeof x === "object" && x !== null && typeof (x as Node).type === "string";
}

/** A chat template rendered by @huggingface/jinja, with what it lacks rewritten (above). */
export class CompatTemplate extends Template {
  constructor(source: string) {
    super(source);
    const program = this.parsed as unknown as Node;
    const rewriter = new Rewriter(integerKeyedDicts(program));
    walk(program, (node) => rewriter.rewrite(node));
  }

  override render(items: Record<string, unknown> = {}): string {
    return super.render({ ...items, ...HELPERS });
  }
}
