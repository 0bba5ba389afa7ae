import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  DecodeBatch,
  type LlamaContext,
  type LlamaModel,
  loadModel,
} from "../../engine/native/llama-native.js";
import { ensureBuiltinModel } from "../../gguf/index.js";
import { gbnfLiteral } from "./gbnf-literal.js";
import {
  jsonObjectGbnf,
  jsonSchemaToGbnf,
  referencedRules,
  SchemaConversionError,
  toolCallGbnf,
} from "./json-schema-gbnf.js";
import { regexGbnf } from "./pattern-gbnf.js";

function rules(grammar: string): Map<string, string> {
  const map = new Map<string, string>();
  for (const line of grammar.split("\n")) {
    const at = line.indexOf(" ::= ");
    assert.ok(at > 0, `not a rule: ${line}`);
    const name = line.slice(0, at);
    assert.match(name, /^[a-z0-9-]+$/);
    assert.ok(!map.has(name), `rule ${name} defined twice`);
    map.set(name, line.slice(at + 5));
  }
  return map;
}

/** Every referenced rule is defined, and root comes first. */
function assertClosed(grammar: string): Map<string, string> {
  const map = rules(grammar);
  assert.equal(grammar.split(" ::= ")[0], "root");
  for (const [name, body] of map) {
    for (const ref of referencedRules(body)) assert.ok(map.has(ref), `${name} refers to undefined ${ref}`);
  }
  return map;
}

const SCHEMAS: Record<string, unknown> = {
  object: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 20 },
      age: { type: "integer" },
      tags: { type: "array", items: { type: "string" }, maxItems: 3 },
      role: { enum: ["admin", "user", null] },
      score: { type: ["number", "null"] },
      nested: { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] },
    },
    required: ["name", "age"],
  },
  recursive: {
    $defs: {
      node: {
        type: "object",
        properties: {
          value: { type: "integer" },
          children: { type: "array", items: { $ref: "#/$defs/node" } },
        },
        required: ["value"],
      },
    },
    $ref: "#/$defs/node",
  },
  anyOf: { anyOf: [{ type: "string" }, { type: "object", properties: { x: { const: 1 } } }] },
  allOf: {
    allOf: [
      { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
      { properties: { b: { type: "boolean" } } },
    ],
  },
  tuple: { type: "array", prefixItems: [{ type: "integer" }, { type: "string" }] },
  map: { type: "object", additionalProperties: { type: "number" } },
  nullable: { type: "string", nullable: true },
  any: {},
};

describe("JSON schema -> GBNF", () => {
  test("literals escape quotes, backslashes and control characters", () => {
    assert.equal(gbnfLiteral('a"b\\c\nd\te\u0001'), '"a\\"b\\\\c\\nd\\te\\x01"');
  });

  test("grammars are closed and well-formed for the supported subset", () => {
    for (const [name, schema] of Object.entries(SCHEMAS)) {
      const grammar = jsonSchemaToGbnf(schema);
      assert.doesNotThrow(() => assertClosed(grammar), name);
    }
    assert.deepEqual([...assertClosed(jsonObjectGbnf()).keys()].slice(0, 2), ["root", "object"]);
  });

  test("objects: required properties in order, optional ones as an ordered optional tail", () => {
    const grammar = jsonSchemaToGbnf({
      type: "object",
      properties: { a: { type: "string" }, b: { type: "integer" }, c: { type: "boolean" } },
      required: ["b"],
    });
    const map = assertClosed(grammar);
    const root = map.get(map.get("root")!)!;
    assert.match(root, /^"\{" ws root-value-b-kv \( "," ws root-value-rest-0 \)\? "\}"$/);
    assert.equal(
      map.get("root-value-rest-0"),
      'root-value-a-kv ( "," ws root-value-rest-1 )? | root-value-rest-1',
    );
    assert.equal(map.get("root-value-rest-1"), "root-value-c-kv");
  });

  test("arrays honour minItems/maxItems; strings min/maxLength", () => {
    const map = assertClosed(
      jsonSchemaToGbnf({ type: "array", items: { type: "string", maxLength: 4 }, minItems: 1, maxItems: 3 }),
    );
    assert.match(
      map.get("root-value")!,
      /^"\[" ws root-value-item ws \( "," ws root-value-item ws \)\{0,2\} "\]"$/,
    );
    assert.equal(map.get("root-value-item"), '"\\"" char{0,4} "\\""');
  });

  test("unsupported or broken schemas raise SchemaConversionError", () => {
    for (const bad of [
      { $ref: "#/$defs/missing" },
      { type: "date" },
      { enum: [] },
      false,
      { type: "array", minItems: -1 },
    ]) {
      assert.throws(() => jsonSchemaToGbnf(bad), SchemaConversionError, JSON.stringify(bad));
    }
  });

  test("tool-call grammar wraps each tool's arguments in a Hermes <tool_call> block", () => {
    const grammar = toolCallGbnf([
      {
        name: "bash",
        parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
      },
      { name: "noop", parameters: null },
    ]);
    const map = assertClosed(grammar);
    const root = map.get("root")!;
    assert.ok(root.startsWith('"<tool_call>\\n" ( "{\\"name\\": \\"bash\\", \\"arguments\\": " '));
    assert.ok(root.includes('"{\\"name\\": \\"noop\\", \\"arguments\\": " object "}"'));
    assert.ok(root.endsWith('"\\n</tool_call>"'), "nothing may follow the call: the output ends there");
    // Between JSON tokens: nothing, one space, or a newline and at most 20 of indentation (as llama.cpp's
    // JSON grammar): a forced call cannot run on in whitespace.
    assert.equal(map.get("ws"), '| " " | "\\n" [ \\t]{0,20}');
  });
});

describe("string pattern", () => {
  test("a pattern outside the enforceable subset is refused, naming the property and the pattern", () => {
    for (const pattern of ["^(?=a)b$", "(a)\\1", "\\bword", "^a(b$)", "[", "x{2000}"]) {
      const schema = { type: "object", properties: { code: { type: "string", pattern } } };
      assert.throws(
        () => jsonSchemaToGbnf(schema),
        (error: Error) =>
          error instanceof SchemaConversionError &&
          error.message.includes("code") &&
          error.message.includes(JSON.stringify(pattern)),
        pattern,
      );
    }
    assert.throws(
      () => jsonSchemaToGbnf({ type: "string", pattern: "^a+$", maxLength: 3 }),
      SchemaConversionError,
    );
  });
});

// llama.cpp itself parses the grammars and constrains a (random-weight) model with them.
const supported = process.platform === "linux" && process.arch === "x64";

describe("llama.cpp accepts the grammars", {
  skip: supported ? false : "llama.cpp engine is linux-x64 only",
}, () => {
  let model: LlamaModel;
  let ctx: LlamaContext;

  before(async () => {
    model = await loadModel(await ensureBuiltinModel({ preset: "tiny" }));
    ctx = await model.createContext({ nCtx: 512, nSeqMax: 1, nBatch: 128, threads: 1 });
  });

  after(() => {
    ctx?.free();
    model?.free();
  });

  test("every converted grammar parses", () => {
    const grammars = [
      ...Object.values(SCHEMAS).map((s) => jsonSchemaToGbnf(s)),
      jsonObjectGbnf(),
      toolCallGbnf([
        { name: "bash", parameters: { type: "object", properties: { command: { type: "string" } } } },
      ]),
    ];
    for (const grammar of grammars) assert.doesNotThrow(() => ctx.setSampler(0, { grammar }), grammar);
  });

  /** Samples one constrained completion of "JSON:" (temperature 1, so seeds differ). */
  async function sample(grammar: string, seed: number): Promise<string> {
    const prompt = model.tokenize("JSON:", { addSpecial: true });
    ctx.clear();
    ctx.setSampler(0, { grammar, temperature: 1, topK: 32, seed });
    const batch = new DecodeBatch(64).addSequence(prompt, 0, 0);
    let pos = prompt.length;
    const tokens: number[] = [];
    for (let i = 0; i < 200; i++) {
      const out = (await ctx.decode(batch)).outputs[0]!;
      if (out.isEog) return model.detokenize(tokens);
      tokens.push(out.token);
      batch.clear().add(out.token, pos++, 0, true);
    }
    throw new Error(`no end after ${JSON.stringify(model.detokenize(tokens))}`);
  }

  test("constrained sampling yields strings that match the schema's pattern", async () => {
    const patterns = [
      "^\\d{3}-\\d{2,4}$",
      "^(cat|dog)s?$",
      "^[A-Z][a-z_]{1,5}( [^a-z\\s]{1,4})?$",
      '^a"b\\\\c\\.$',
      "^.{2,3}$|^x$",
      "^id-(?<n>[0-9a-f]{4})$",
    ];
    for (const pattern of patterns) {
      const grammar = jsonSchemaToGbnf({ type: "string", pattern });
      for (const seed of [1, 2, 3]) {
        const text = await sample(grammar, seed);
        const value = JSON.parse(text) as string;
        assert.match(value, new RegExp(pattern), `seed ${seed}: ${text}`);
      }
    }
  });

  test("a regex (vLLM's structured output) constrains the whole text, control characters and quotes included", async () => {
    const patterns = ["\\d{3}-\\d{2,4}", "(cat|dog)s?", 'say "[a-z]{1,3}"\\n!', "^x|yy$", "[^\\n]{2}\\t."];
    for (const pattern of patterns) {
      const grammar = `root ::= ${regexGbnf(pattern)}`;
      for (const seed of [1, 2, 3]) {
        const text = await sample(grammar, seed);
        assert.match(
          text,
          new RegExp(`^(?:${pattern.replace(/^\^|\$$/g, "")})$`),
          `seed ${seed}: ${JSON.stringify(text)}`,
        );
      }
    }
  });

  test("constrained sampling yields JSON that matches a closed schema", async () => {
    const schema = {
      type: "object",
      properties: { ok: { type: "boolean" }, n: { enum: [1, 2, 3] } },
      required: ["ok", "n"],
    };
    const grammar = jsonSchemaToGbnf(schema);
    const prompt = model.tokenize("JSON:", { addSpecial: true });
    for (const seed of [1, 2]) {
      ctx.clear();
      ctx.setSampler(0, { grammar, temperature: 1, topK: 32, seed });
      const batch = new DecodeBatch(64).addSequence(prompt, 0, 0);
      let pos = prompt.length;
      const tokens: number[] = [];
      let ended = false;
      for (let i = 0; i < 300 && !ended; i++) {
        const out = (await ctx.decode(batch)).outputs[0]!;
        if (out.isEog) ended = true;
        else tokens.push(out.token);
        batch.clear().add(out.token, pos++, 0, true);
      }
      const text = model.detokenize(tokens);
      assert.ok(ended, `no end after ${JSON.stringify(text)}`);
      const value = JSON.parse(text) as { ok: unknown; n: unknown };
      assert.equal(typeof value.ok, "boolean");
      assert.ok([1, 2, 3].includes(value.n as number));
    }
  });
});
