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
 * - tuples in a list literal (`[("a", "b"), ...]`) become lists: the library unpacks only lists in a loop;
 * - `dict.items()`, `.keys()`, `.values()` call the dict's method even where it has a key of that name (a
 *   JSON schema's `items`): the library looks a key up before a method, Python and llama.cpp a method first;
 * - `str * n` repeats the string.
 * Undefined values, where the library refuses them, as llama.cpp's engine takes them (mostly as Python's
 * Jinja does too), which real templates meet in the tools clients send (a parameter without a description,
 * a tool without parameters):
 * - a filter of an undefined value is the filter of an empty one (`|trim` "", `|items` and `|map` empty,
 *   `|length` 0), and so is a string method (`.strip()` "") or `.items()`; a loop over one runs no times;
 *   none too is empty under the list filters llama.cpp has for it (`|selectattr`, `|items`, ...);
 * - a lookup by an undefined key (`d[x.type]`) is undefined;
 * - `is iterable` and `is sequence` are true of an undefined value;
 * - `x in list` of an undefined value is false, and of none a search (`schema.get("type") in [...]` where a
 *   parameter has no type: GigaChat 3); `x in dict` of either is false;
 * - beside a string, undefined and none concatenate as "" (`"a" + d.missing`, `none ~ "a"`); `+` is taken
 *   as concatenation where one side is plainly a string, and there only a missing key or variable is ""
 *   (see `$concat`); a boolean beside a string is `True`/`False` (GigaChat 3's
 *   `' // default: ' ~ default`).
 * Values where the library takes strings only, as Python's Jinja takes them (llama.cpp takes them so or
 * refuses them), which real templates meet in tools' JSON schemas (a `type` that is a list, `["integer",
 * "null"]`):
 * - `|upper`, `|lower`, `|title`, `|capitalize` and `|trim` write a value that is not a string first, as
 *   Python's `str()` (`['INTEGER', 'NULL']`: Gemma 4), as llama.cpp does too;
 * - `list in list` compares the items as Python does (false but where one is equal): llama.cpp refuses it
 *   (ByteDance Seed-OSS's `t in ("number", "integer")`, GigaChat 3's);
 * - a lookup by a key that is neither a string nor an integer is undefined, as Python's Jinja has it
 *   (`type_map[spec.type]` of a list, in Hermes 2 Pro/3's and Command R+'s templates); llama.cpp refuses it.
 */

import { Environment, Template } from "@huggingface/jinja";
import { isDict, isSequence, pyEqual, pyFormat, pyStr, type Value } from "./python-values.js";

/** A node of the library's AST: its classes are not exported, and its interpreter goes by `type` alone. */
interface Node {
  type: string;
  [field: string]: unknown;
}
type Call = Node & { callee: Node; args: Node[] };
type Member = Node & { object: Node; property: Node; computed: boolean };
type Filter = Node & { operand: Node; filter: Node };

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
const not = (argument: Node): Node => ({
  type: "UnaryExpression",
  operator: { type: "UnaryOperator", value: "not" },
  argument,
});
/** `operand|default(value)`: `value` where `operand` is undefined (or, `orNone`, none or another falsy value) */
const orIfUndefined = (operand: Node, value: Node, orNone = false): Node =>
  filter(operand, call(id("default"), orNone ? [value, id("true")] : [value]));

/**
 * A key no dict has: what an undefined key (or a list, see `$key`) is looked up as, to find nothing (and no
 * method).
 */
const NO_KEY = "\u0000undefined";

/**
 * The filters and methods llama.cpp's engine has for an undefined value (its `value_undefined` builtins)
 * that the library has for an empty one: the empty value an undefined one is taken as under them.
 */
const EMPTY_STRING: Node = str("");
const EMPTY_LIST: Node = list([]);
const EMPTY_DICT: Node = { type: "ObjectLiteral", value: new Map() };
const FILTERS_OF_UNDEFINED: ReadonlyMap<string, Node> = new Map([
  ...["trim", "upper", "lower", "title", "capitalize", "replace", "join"].map(
    (f) => [f, EMPTY_STRING] as const,
  ),
  ...["length", "list", "reverse", "sort", "unique", "map", "selectattr", "rejectattr"].map(
    (f) => [f, EMPTY_LIST] as const,
  ),
  ["items", EMPTY_DICT],
]);
const METHODS_OF_UNDEFINED: ReadonlyMap<string, Node> = new Map([
  ...["strip", "upper", "lower", "title", "capitalize", "replace"].map((f) => [f, EMPTY_STRING] as const),
  ["items", EMPTY_DICT],
]);
/**
 * The filters that write a value that is not a string as Python's `str()` first, where they take no
 * arguments (as llama.cpp's `apply_filter` coerces them; Python's Jinja's `soft_str`).
 */
const STRINGIFYING_FILTERS = new Set(["upper", "lower", "title", "capitalize", "trim"]);
/** Those llama.cpp also has for none (`value_none`'s builtins): none is taken as empty too. */
const OF_NONE = new Set(["items", "map", "selectattr", "rejectattr", "unique"]);

/** `operand`, or the empty value llama.cpp takes an undefined one as under the filter or method `name` */
function emptyIfUndefined(operand: Node, name: string, as: ReadonlyMap<string, Node>): Node {
  const empty = as.get(name);
  return empty === undefined || isLiteral(operand)
    ? operand
    : orIfUndefined(operand, empty, OF_NONE.has(name));
}

/** Filters whose result, if any, is a string. */
const STRING_FILTERS = new Set([
  "trim",
  "upper",
  "lower",
  "title",
  "capitalize",
  "replace",
  "join",
  "indent",
  "tojson",
]);
/** Helpers (below) whose result is a string. */
const STRING_HELPERS = new Set(["$concat", "$repeat", "$string", "$format", "$str"]);

/** An expression that is a string wherever it does not fail: a literal, a string filter's or helper's result. */
function isString(node: Node): boolean {
  if (node.type === "StringLiteral") return true;
  const name = nameOf(node.type === "FilterExpression" ? (node as Filter).filter : node);
  if (node.type === "FilterExpression") return name !== null && STRING_FILTERS.has(name);
  return node.type === "CallExpression" && name !== null && STRING_HELPERS.has(name);
}

const isLiteral = (node: Node): boolean => node.type.endsWith("Literal");

/** An expression read again at no cost and to no effect: names, literals, lookups and filters of them. */
function isPure(node: Node): boolean {
  switch (node.type) {
    case "Identifier":
      return true;
    case "MemberExpression": {
      const { object, property, computed } = node as Member;
      return isPure(object) && (!computed || isPure(property));
    }
    case "FilterExpression": {
      const by = (node as Filter).filter;
      const args = by.type === "CallExpression" ? (by as Call).args : [];
      return isPure((node as Filter).operand) && args.every(isLiteral);
    }
    default:
      return isLiteral(node);
  }
}

/**
 * What `node` is looked up in, where it is a lookup (`x.key`, `x[key]`) of a pure `x`: `x`; a name is looked
 * up in the context, a dict (an empty one stands for it); else none.
 */
function ownerOf(node: Node): Node {
  if (node.type === "Identifier") return EMPTY_DICT;
  const member = node as Member;
  const lookup = node.type === "MemberExpression" && member.property.type !== "SliceExpression";
  return lookup && isPure(member.object) ? member.object : id("none");
}

/** The library's own tests (`is iterable`, ...), for the values it already answers for. */
const LIBRARY_TESTS = new Environment().tests;

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
  /**
   * `a ~ b`, and `a + b` beside a string: as the library, but none beside a string is "" (as llama.cpp has
   * it), and so is undefined: always under `~` (Python's Jinja too), under `+` where it is a missing key of
   * a dict, its `owners` entry (`"): " + param.description`), or a missing variable (Firefunction v2's
   * `functions`, which llama.cpp leaves undefined). Any other undefined stays an error under `+`,
   * as in Python: a string indexed by a name (`content[0]['text']` of string content, in Gemma 3's template)
   * is refused, and the server tries the content as typed parts, which llama.cpp would drop as "". A
   * boolean is written `True`/`False`, as Python and llama.cpp write it.
   */
  $concat(values: Value[], op: string, owners: Value[] = []): string {
    const blank = (i: number): boolean => {
      const v = values[i]!;
      if (values[1 - i]!.type !== "StringValue") return false;
      return (
        v.type === "NullValue" ||
        (v.type === "UndefinedValue" && (op === "~" || owners[i]?.type === "ObjectValue"))
      );
    };
    const [left, right] = values as [Value, Value];
    if (blank(0)) return right.value as string;
    if (blank(1)) return left.value as string;
    if (left.type === "UndefinedValue" || right.type === "UndefinedValue") {
      throw new Error(`Cannot perform operation ${op} on undefined values`);
    }
    if (left.type === "NullValue" || right.type === "NullValue")
      throw new Error("Cannot perform operation on null values");
    // anything but a string as Python's str(), as llama.cpp writes it: a boolean True/False (GigaChat 3's
    // `' // default: ' ~ default`), a dict or list as its repr (Functionary v3.2's `'\n' + arguments`)
    return pyStr(left) + pyStr(right);
  },
  /** `str * n` (and `n * str`), which the library lacks */
  $repeat([left, right]: Value[]): string {
    const [text, times] = left!.type === "StringValue" ? [left!, right!] : [right!, left!];
    if (text.type !== "StringValue" || times.type !== "IntegerValue") {
      throw new Error(`Unknown operator "*" between ${left!.type} and ${right!.type}`);
    }
    return (text.value as string).repeat(Math.max(0, times.value as number));
  },
  /**
   * `needle in haystack` (`op`: "in" or "not in", for the library's errors; the rewrite negates `not in`):
   * as the library, and where it refuses, as Python: an undefined value is in no list or dict, none is
   * searched for in a list (as llama.cpp too) and is in no dict, and a list is searched for by Python's
   * `==` (llama.cpp refuses it).
   */
  $in([needle, haystack]: Value[], op: string): boolean {
    if (haystack!.type === "UndefinedValue") return false;
    if (isSequence(haystack!)) {
      const items = haystack!.value as Value[];
      if (needle!.type === "UndefinedValue") return false;
      if (isSequence(needle!)) return items.some((x) => pyEqual(x, needle!));
      return items.some((x) => x.value === needle!.value); // the library's test
    }
    if (isDict(haystack!) && (needle!.type === "UndefinedValue" || needle!.type === "NullValue"))
      return false;
    if (needle!.type === "UndefinedValue")
      throw new Error(`Cannot perform operation ${op} on undefined values`);
    if (needle!.type === "NullValue" || haystack!.type === "NullValue") {
      throw new Error("Cannot perform operation on null values");
    }
    if (needle!.type === "StringValue" && haystack!.type === "StringValue") {
      return (haystack!.value as string).includes(needle!.value as string);
    }
    if (needle!.type === "StringValue" && isDict(haystack!)) {
      return (haystack!.value as Map<string, Value>).has(needle!.value as string);
    }
    throw new Error(`Unknown operator "${op}" between ${needle!.type} and ${haystack!.type}`);
  },
  /**
   * A lookup's key: a string or an integer as it is, anything else (undefined, a list) a key no dict or list
   * has, so that the lookup is undefined, as in Python's Jinja (the library refuses such keys)
   */
  $key([key]: Value[]): unknown {
    return key!.type === "StringValue" || key!.type === "IntegerValue" ? key!.value : NO_KEY;
  },
  /** Python's `str()` of any value (an undefined one is "") */
  $str([v]: Value[]): string {
    return pyStr(v!);
  },
  /** `is iterable` / `is sequence`: the library's test, and true of an undefined value */
  $is([v]: Value[], test: string): boolean {
    return v!.type === "UndefinedValue" || LIBRARY_TESTS.get(test)!(v as never);
  },
  // as the library's own `string` filter, but a dict (which it refuses), a list, none and undefined as
  // Python's: `['string', 'null']`, not JSON (Qwen3-Coder's `param.type | string`)
  $string([v]: Value[]): string {
    return ["ObjectValue", "ArrayValue", "TupleValue", "NullValue", "UndefinedValue"].includes(v!.type)
      ? pyStr(v!)
      : String(v);
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

  /** a loop's iterable, an empty list where it is undefined */
  private loopable(iterable: Node): Node {
    return isLiteral(iterable) || this.keysOf(iterable) ? iterable : orIfUndefined(iterable, EMPTY_LIST);
  }

  rewrite(node: Node): Node {
    switch (node.type) {
      case "CallExpression":
        return this.rewriteCall(node as Call) ?? node;
      case "FilterExpression":
        return this.rewriteFilter(node as Filter) ?? node;
      case "MemberExpression": {
        const member = node as Member;
        if (!member.computed || member.property.type === "SliceExpression") return member;
        if (this.keysOf(member.object)) member.property = this.lookupKey(member.property);
        else if (!["StringLiteral", "IntegerLiteral"].includes(member.property.type)) {
          member.property = call(id("$key"), [list([member.property])]);
        }
        return member;
      }
      case "BinaryExpression": {
        const op = (node["operator"] as { value: string }).value;
        const [left, right] = [node["left"] as Node, node["right"] as Node];
        if (op === "~") return call(id("$concat"), [list([left, right]), str(op)]);
        if (op === "+" && (isString(left) || isString(right))) {
          return call(id("$concat"), [list([left, right]), str(op), list([ownerOf(left), ownerOf(right)])]);
        }
        if (op === "*" && (left.type === "StringLiteral" || right.type === "StringLiteral")) {
          return call(id("$repeat"), [list([left, right])]);
        }
        if (op === "in" || op === "not in") {
          const test = call(id("$in"), [
            list([this.keysOf(right) ? this.lookupKey(left) : left, right]),
            str(op),
          ]);
          return op === "in" ? test : not(test);
        }
        return node;
      }
      case "TestExpression": {
        const test = (node["test"] as Node).value as string;
        if (test !== "iterable" && test !== "sequence") return node;
        const check = call(id("$is"), [list([node["operand"] as Node]), str(test)]);
        return node["negate"] ? not(check) : check;
      }
      case "For": {
        const iterable = node["iterable"] as Node;
        const keys = this.keysOf(iterable);
        if (keys) node["iterable"] = this.view(iterable, keys, "keys");
        else if (iterable.type === "SelectExpression")
          iterable["lhs"] = this.loopable(iterable["lhs"] as Node);
        else node["iterable"] = this.loopable(iterable);
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
    if (args.length === 0 && ["items", "keys", "values"].includes(method)) {
      // the filter: the dict's method, not a key of that name
      return filter(emptyIfUndefined(object, method, METHODS_OF_UNDEFINED), id(method));
    }
    if (METHODS_OF_UNDEFINED.has(method)) {
      callee.object = emptyIfUndefined(object, method, METHODS_OF_UNDEFINED);
      return node;
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
        if (name !== null && STRINGIFYING_FILTERS.has(name) && node.filter.type === "Identifier") {
          // a string as it is, an undefined value "" (as `FILTERS_OF_UNDEFINED`), anything else Python's str()
          if (node.operand.type !== "StringLiteral") node.operand = call(id("$str"), [list([node.operand])]);
        } else if (name !== null) {
          node.operand = emptyIfUndefined(node.operand, name, FILTERS_OF_UNDEFINED);
        }
        return node;
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
