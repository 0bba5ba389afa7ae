/**
 * JSON Schema -> GBNF (llama.cpp's grammar format) for the subset structured-output clients use:
 * type (incl. lists), properties/required, items/prefixItems, min/maxItems, min/maxLength, enum, const,
 * anyOf/oneOf, allOf of objects, $ref into $defs/definitions (recursion allowed), nullable.
 * Objects emit their required properties first, then the optional ones, each in schema order; extra
 * properties are not generated. A string's `pattern` is enforced (pattern-gbnf.ts) or, beyond that
 * subset, refused. Other keywords outside the subset (format, minimum...) are ignored, which only makes
 * the grammar looser than the schema.
 */
import { gbnfLiteral } from "./gbnf-literal.js";
import { patternGbnf, UnsupportedPatternError } from "./pattern-gbnf.js";

export class SchemaConversionError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SchemaConversionError";
  }
}

type Schema = Record<string, unknown>;

const MAX_DEPTH = 64;
const MAX_RULES = 2000;

/** Shared JSON rules; every grammar may reference them, `collect` keeps only the ones used. */
const PRIMITIVES: Readonly<Record<string, string>> = {
  ws: '| " " | "\\n" [ \\t]{0,20}',
  value: "object | array | string | number | boolean | null",
  object: '"{" ws ( string ":" ws value ws ( "," ws string ":" ws value ws )* )? "}"',
  array: '"[" ws ( value ws ( "," ws value ws )* )? "]"',
  string: '"\\"" char* "\\""',
  char: '[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" ( ["\\\\/bfnrt] | "u" [0-9a-fA-F]{4} )',
  integer: '"-"? ( [0-9] | [1-9] [0-9]{1,15} )',
  number: 'integer ( "." [0-9]+ )? ( [eE] [-+]? [0-9]{1,3} )?',
  boolean: '"true" | "false"',
  null: '"null"',
};

function isSchema(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function ruleName(hint: string): string {
  const name = hint
    .replace(/[^A-Za-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .toLowerCase();
  return name.length > 0 ? name : "rule";
}

function repeat(expr: string, min: number, max: number | undefined): string {
  if (max !== undefined && max === min) return min === 1 ? expr : `${expr}{${min}}`;
  if (max === undefined) return min === 0 ? `${expr}*` : min === 1 ? `${expr}+` : `${expr}{${min},}`;
  return min === 0 && max === 1 ? `${expr}?` : `${expr}{${min},${max}}`;
}

function nonNegativeInt(value: unknown, keyword: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    throw new SchemaConversionError(`${keyword} must be a non-negative integer`);
  }
  return value;
}

class GrammarBuilder {
  private readonly rules = new Map<string, string>();
  /** rule of each $ref, per schema document (tool grammars hold several) */
  private readonly refRules = new Map<Schema, Map<string, string>>();

  /** The schema document `$ref`s resolve against. */
  constructor(public root: Schema) {}

  /** Registers a rule under a fresh name derived from `hint`; returns the name. */
  private addRule(hint: string, body: string): string {
    let name = ruleName(hint);
    if (name in PRIMITIVES || name === "root" || this.rules.has(name)) {
      let i = 1;
      while (this.rules.has(`${name}-${i}`) || `${name}-${i}` in PRIMITIVES) i++;
      name = `${name}-${i}`;
    }
    if (this.rules.size >= MAX_RULES) throw new SchemaConversionError("schema is too large");
    this.rules.set(name, body);
    return name;
  }

  setRoot(body: string): void {
    this.rules.set("root", body);
  }

  /** A GBNF expression (usually a rule name) for the values `schema` admits. */
  visit(schema: unknown, hint: string, depth = 0): string {
    if (depth > MAX_DEPTH) throw new SchemaConversionError("schema nests too deeply");
    if (schema === true || schema === undefined) return "value";
    if (schema === false) throw new SchemaConversionError(`${hint}: schema false admits no value`);
    if (!isSchema(schema)) throw new SchemaConversionError(`${hint}: a schema must be an object`);

    if (typeof schema["$ref"] === "string") return this.ref(schema["$ref"], depth);
    if ("const" in schema) return gbnfLiteral(JSON.stringify(schema["const"]));
    if (Array.isArray(schema["enum"])) {
      if (schema["enum"].length === 0) throw new SchemaConversionError(`${hint}: enum is empty`);
      return this.addRule(hint, schema["enum"].map((v) => gbnfLiteral(JSON.stringify(v))).join(" | "));
    }
    for (const key of ["anyOf", "oneOf"] as const) {
      const options = schema[key];
      if (Array.isArray(options) && options.length > 0) {
        const alternatives = options.map((option, i) => this.visit(option, `${hint}-${i}`, depth + 1));
        return this.addRule(hint, alternatives.join(" | "));
      }
    }
    if (Array.isArray(schema["allOf"]) && schema["allOf"].length > 0) {
      return this.visit(this.mergeAllOf(schema), hint, depth + 1);
    }
    if (schema["nullable"] === true) {
      const { nullable: _, ...rest } = schema;
      return this.addRule(hint, `${this.visit(rest, `${hint}-value`, depth + 1)} | null`);
    }

    const type = schema["type"];
    if (Array.isArray(type)) {
      if (type.length === 0) throw new SchemaConversionError(`${hint}: type list is empty`);
      const alternatives = type.map((t) =>
        this.visit({ ...schema, type: t }, `${hint}-${String(t)}`, depth + 1),
      );
      return this.addRule(hint, alternatives.join(" | "));
    }
    switch (type) {
      case "string":
        return this.string(schema, hint);
      case "integer":
        return "integer";
      case "number":
        return "number";
      case "boolean":
        return "boolean";
      case "null":
        return "null";
      case "array":
        return this.array(schema, hint, depth);
      case "object":
        return this.object(schema, hint, depth);
      case undefined:
        if (typeof schema["pattern"] === "string") return this.string(schema, hint);
        if (isSchema(schema["properties"])) return this.object(schema, hint, depth);
        if ("items" in schema || "prefixItems" in schema) return this.array(schema, hint, depth);
        return "value";
      default:
        throw new SchemaConversionError(`${hint}: unsupported type ${JSON.stringify(type)}`);
    }
  }

  private ref(ref: string, depth: number): string {
    let refs = this.refRules.get(this.root);
    if (!refs) {
      refs = new Map();
      this.refRules.set(this.root, refs);
    }
    const existing = refs.get(ref);
    if (existing !== undefined) return existing;
    const target = this.resolveRef(ref);
    if (target === undefined) throw new SchemaConversionError(`unresolvable $ref ${JSON.stringify(ref)}`);
    // Reserve the name before visiting, so a recursive schema refers to the rule being defined.
    const name = this.addRule(`ref-${ref.split("/").pop() || "root"}`, "null");
    refs.set(ref, name);
    this.rules.set(name, this.visit(target, `${name}-body`, depth + 1));
    return name;
  }

  private mergeAllOf(schema: Schema): Schema {
    const properties: Schema = {};
    const required = new Set<string>();
    const { allOf, ...own } = schema;
    for (const part of [own, ...(allOf as unknown[])]) {
      const resolved =
        isSchema(part) && typeof part["$ref"] === "string" ? this.resolveRef(part["$ref"]) : part;
      if (!isSchema(resolved)) throw new SchemaConversionError("allOf parts must be schemas");
      if (isSchema(resolved["properties"])) Object.assign(properties, resolved["properties"]);
      if (Array.isArray(resolved["required"])) for (const r of resolved["required"]) required.add(String(r));
    }
    return { type: "object", properties, required: [...required] };
  }

  /** `#` or `#/$defs/X` / `#/definitions/X` of the schema being converted. */
  private resolveRef(ref: string): unknown {
    if (ref === "#") return this.root;
    const match = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref);
    const defs = match ? this.root[match[1]!] : undefined;
    return match && isSchema(defs) ? defs[decodeURIComponent(match[2]!)] : undefined;
  }

  private string(schema: Schema, hint: string): string {
    if (schema["pattern"] !== undefined) return this.patternString(schema, hint);
    const min = nonNegativeInt(schema["minLength"], "minLength") ?? 0;
    const max = nonNegativeInt(schema["maxLength"], "maxLength");
    if (min === 0 && max === undefined) return "string";
    if (max !== undefined && max < min) throw new SchemaConversionError(`${hint}: maxLength < minLength`);
    return this.addRule(hint, `"\\"" ${repeat("char", min, max)} "\\""`);
  }

  private patternString(schema: Schema, hint: string): string {
    const pattern = schema["pattern"];
    if (typeof pattern !== "string") throw new SchemaConversionError(`${hint}: pattern must be a string`);
    const refuse = (why: string) =>
      new SchemaConversionError(`${hint}: pattern ${JSON.stringify(pattern)} cannot be enforced: ${why}`);
    if (schema["minLength"] !== undefined || schema["maxLength"] !== undefined) {
      throw refuse("it is combined with minLength/maxLength");
    }
    try {
      return this.addRule(hint, `"\\"" ${patternGbnf(pattern)} "\\""`);
    } catch (error) {
      if (error instanceof UnsupportedPatternError) throw refuse(error.message);
      throw error;
    }
  }

  private array(schema: Schema, hint: string, depth: number): string {
    const prefix = Array.isArray(schema["prefixItems"]) ? schema["prefixItems"] : null;
    if (prefix) {
      const items = prefix.map((item, i) => `${this.visit(item, `${hint}-${i}`, depth + 1)} ws`);
      const body = items.length === 0 ? '"[" ws "]"' : `"[" ws ${items.join(' "," ws ')} "]"`;
      return this.addRule(hint, body);
    }
    const min = nonNegativeInt(schema["minItems"], "minItems") ?? 0;
    const max = nonNegativeInt(schema["maxItems"], "maxItems");
    if (max !== undefined && max < min) throw new SchemaConversionError(`${hint}: maxItems < minItems`);
    const item = this.visit(schema["items"], `${hint}-item`, depth + 1);
    if (max === 0) return this.addRule(hint, '"[" ws "]"');
    const rest = repeat(
      `( "," ws ${item} ws )`,
      Math.max(0, min - 1),
      max === undefined ? undefined : max - 1,
    );
    const body = min === 0 ? `"[" ws ( ${item} ws ${rest} )? "]"` : `"[" ws ${item} ws ${rest} "]"`;
    return this.addRule(hint, body);
  }

  private object(schema: Schema, hint: string, depth: number): string {
    const properties = schema["properties"];
    if (!isSchema(properties) || Object.keys(properties).length === 0) {
      const extra = schema["additionalProperties"];
      if (!isSchema(extra))
        return schema["additionalProperties"] === false ? this.addRule(hint, '"{" ws "}"') : "object";
      const value = this.visit(extra, `${hint}-value`, depth + 1);
      const kv = `string ":" ws ${value} ws`;
      return this.addRule(hint, `"{" ws ( ${kv} ( "," ws ${kv} )* )? "}"`);
    }
    const required = new Set(Array.isArray(schema["required"]) ? schema["required"].map(String) : []);
    const kvs = Object.entries(properties).map(([key, value]) => ({
      key,
      required: required.has(key),
      rule: this.addRule(
        `${hint}-${key}-kv`,
        `${gbnfLiteral(JSON.stringify(key))} ws ":" ws ${this.visit(value, `${hint}-${key}`, depth + 1)} ws`,
      ),
    }));
    const mandatory = kvs.filter((kv) => kv.required).map((kv) => kv.rule);
    const optional = kvs.filter((kv) => !kv.required).map((kv) => kv.rule);
    // optional-i: any ordered subset (non-empty) of optional[i..]
    let tail: string | null = null;
    for (let i = optional.length - 1; i >= 0; i--) {
      const kv = optional[i]!;
      const body: string = tail === null ? kv : `${kv} ( "," ws ${tail} )? | ${tail}`;
      tail = this.addRule(`${hint}-rest-${i}`, body);
    }
    let body: string;
    if (mandatory.length === 0) body = tail === null ? '"{" ws "}"' : `"{" ws ${tail}? "}"`;
    else body = `"{" ws ${mandatory.join(' "," ws ')}${tail === null ? "" : ` ( "," ws ${tail} )?`} "}"`;
    return this.addRule(hint, body);
  }

  /** The grammar text: root first, then the rules reachable from it. */
  build(): string {
    const all = new Map<string, string>([...Object.entries(PRIMITIVES), ...this.rules]);
    const used: string[] = [];
    const seen = new Set<string>();
    const stack = ["root"];
    while (stack.length > 0) {
      const name = stack.pop()!;
      if (seen.has(name)) continue;
      seen.add(name);
      used.push(name);
      const body = all.get(name);
      if (body === undefined) throw new Error(`grammar rule ${name} is not defined`);
      for (const ref of referencedRules(body)) if (!seen.has(ref)) stack.push(ref);
    }
    return used.map((name) => `${name} ::= ${all.get(name)}`).join("\n");
  }
}

/** Rule names an expression refers to (outside literals and character classes). */
export function referencedRules(body: string): string[] {
  const names: string[] = [];
  let i = 0;
  while (i < body.length) {
    const ch = body[i]!;
    if (ch === '"' || ch === "[") {
      const close = ch === '"' ? '"' : "]";
      i++;
      while (i < body.length && body[i] !== close) i += body[i] === "\\" ? 2 : 1;
      i++;
    } else if (ch === "{") {
      i = body.indexOf("}", i) + 1;
    } else if (/[A-Za-z]/.test(ch)) {
      const start = i;
      while (i < body.length && /[A-Za-z0-9-]/.test(body[i]!)) i++;
      names.push(body.slice(start, i));
    } else {
      i++;
    }
  }
  return names;
}

/** Grammar for one JSON value matching `schema`. */
export function jsonSchemaToGbnf(schema: unknown): string {
  const root = isSchema(schema) ? schema : {};
  const builder = new GrammarBuilder(root);
  builder.setRoot(builder.visit(schema, "root-value"));
  return builder.build();
}

/** Grammar for any JSON object (`response_format: {"type": "json_object"}`). */
export function jsonObjectGbnf(): string {
  const builder = new GrammarBuilder({});
  builder.setRoot("object");
  return builder.build();
}

export interface GrammarTool {
  readonly name: string;
  readonly parameters: Record<string, unknown> | null;
}

/**
 * Grammar forcing one Hermes-style call `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`
 * of one of `tools` (tool_choice "required" or a named function).
 */
export function toolCallGbnf(tools: readonly GrammarTool[]): string {
  if (tools.length === 0) throw new SchemaConversionError("no tools to call");
  const builder = new GrammarBuilder({});
  const calls = tools.map((tool, i) => {
    const params = tool.parameters ?? { type: "object" };
    builder.root = params;
    const args = builder.visit(params, `${tool.name}-args-${i}`);
    return `${gbnfLiteral(`{"name": ${JSON.stringify(tool.name)}, "arguments": `)} ${args} "}"`;
  });
  builder.setRoot(
    `${gbnfLiteral("<tool_call>\n")} ( ${calls.join(" | ")} ) ${gbnfLiteral("\n</tool_call>")}`,
  );
  return builder.build();
}
