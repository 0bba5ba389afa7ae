/** vLLM's structured outputs (and the older guided_* fields) as the grammar the engine samples under. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { type Json, withServer } from "../test-support/test-server.js";
import { gbnfGroupDepth } from "./structured-outputs.js";

const messages = [{ role: "user", content: "Answer." }];
const schema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] };

test("each structured output, new field or old, reaches the engine as its grammar, on chat and completions", async () => {
  await withServer({ reply: () => "yes" }, {}, async (t) => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ structured_outputs: { json: schema } }, /"\\"ok\\"" ws ":" ws boolean/],
      [{ structured_outputs: { json: JSON.stringify(schema) } }, /"\\"ok\\"" ws ":" ws boolean/],
      [{ guided_json: schema }, /"\\"ok\\"" ws ":" ws boolean/],
      [{ structured_outputs: { regex: "\\d{3}" } }, /^root ::= \[0-9\]\{3,3\}$/],
      [{ guided_regex: "a|b" }, /^root ::= \( "a" \| "b" \)$/],
      [{ structured_outputs: { choice: ["yes", 'n"o'] } }, /^root ::= "yes" \| "n\\"o"$/],
      [{ guided_choice: ["x"] }, /^root ::= "x"$/],
      [{ structured_outputs: { grammar: 'root ::= "a"+' } }, /^root ::= "a"\+$/],
      [{ guided_grammar: 'root ::= "b"' }, /^root ::= "b"$/],
      [{ structured_outputs: { json_object: true } }, /^root ::= object$/m],
    ];
    for (const [extra, grammar] of cases) {
      for (const [path, body] of [
        ["/v1/chat/completions", { messages }],
        ["/v1/completions", { prompt: "Answer:" }],
      ] as const) {
        const response = await t.post(path, { ...body, max_tokens: 4, ...extra });
        assert.equal(response.status, 200, `${path} ${JSON.stringify(extra)}`);
        assert.match(t.engine.requests.at(-1)!.sampling.grammar ?? "", grammar, JSON.stringify(extra));
      }
    }
  });
});

test("what cannot be enforced, or more than one constraint, is a 400 naming the field", async () => {
  await withServer({}, {}, async (t) => {
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ structured_outputs: { regex: "(a)\\1" } }, "structured_outputs.regex", /cannot be enforced/],
      [{ guided_json: "{not json" }, "guided_json", /not JSON/],
      [{ structured_outputs: { json: { $ref: "#/nowhere" } } }, "structured_outputs.json", /nowhere/],
      [
        { structured_outputs: { regex: "a", choice: ["b"] } },
        "structured_outputs.choice",
        /one output constraint, not structured_outputs.regex and structured_outputs.choice/,
      ],
      [
        { response_format: { type: "json_object" }, guided_regex: "a" },
        "guided_regex",
        /not response_format and guided_regex/,
      ],
      // llama.cpp's grammar parser recurses once per group: 50,000 crashed the server
      [
        { structured_outputs: { grammar: `root ::= ${"(".repeat(50_000)}"a"${")".repeat(50_000)}` } },
        "structured_outputs.grammar",
        /groups nest deeper than 64 levels/,
      ],
      [
        { guided_regex: `${"(".repeat(20_000)}a${")".repeat(20_000)}` },
        "guided_regex",
        /groups nested deeper than 64 levels/,
      ],
    ];
    for (const [extra, param, message] of cases) {
      const response = await t.post("/v1/chat/completions", { messages, ...extra });
      assert.equal(response.status, 400, JSON.stringify(extra));
      const { error } = (await response.json()) as Json;
      assert.equal(error.param, param);
      assert.match(error.message, message);
    }
    const tools = [{ type: "function", function: { name: "f", parameters: { type: "object" } } }];
    const forced = await t.post("/v1/chat/completions", {
      messages,
      tools,
      tool_choice: "required",
      structured_outputs: { choice: ["a"] },
    });
    assert.equal(forced.status, 400);
    assert.equal(((await forced.json()) as Json).error.param, "structured_outputs.choice");
    assert.equal(t.engine.requests.length, 0, "a refused request never reaches the engine");
  });
});

test("a grammar's groups are counted outside its literals, character classes and comments", () => {
  assert.equal(gbnfGroupDepth('root ::= ("a" | ("b"))*'), 2);
  assert.equal(gbnfGroupDepth('root ::= "((((\\"((" [(((] # ((((\nx ::= (y)'), 1);
});
