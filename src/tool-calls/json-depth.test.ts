import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "../core/test-support/fast-check.js";
import { jsonTextDepth, MAX_JSON_DEPTH, nestingDepth, tooDeepPath } from "./json-depth.js";
import { leadingJsonObject, parseJsonLenient } from "./json-objects.js";

/** The depth by definition, recursively (fine for the shallow values generated here). */
function reference(value: unknown): number {
  if (value === null || typeof value !== "object") return 0;
  return 1 + Math.max(0, ...Object.values(value).map(reference));
}

/** `levels` nested arrays around 1, as text. */
const nestedText = (levels: number) => `${"[".repeat(levels)}1${"]".repeat(levels)}`;

describe("JSON nesting depth", () => {
  test("is measured without recursion the same as by definition, from the value or from its text", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), (value) => {
        const depth = reference(value);
        assert.equal(nestingDepth(value), depth);
        assert.equal(jsonTextDepth(JSON.stringify(value)), depth);
      }),
      { numRuns: 500, seed: 57 },
    );
  });

  test("text cut off anywhere nests no deeper than the whole", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), fc.nat(), (value, at) => {
        const text = JSON.stringify(value);
        assert.ok(jsonTextDepth(text.slice(0, at % (text.length + 1))) <= jsonTextDepth(text));
      }),
      { numRuns: 500, seed: 57 },
    );
  });

  test("brackets inside strings, escaped quotes included, do not count", () => {
    assert.equal(jsonTextDepth(JSON.stringify({ a: '[[{"x": [' })), 1);
    assert.equal(jsonTextDepth(JSON.stringify(['\\"[[', "]"])), 1);
  });

  test("a body nesting past the limit names the field where it does, in at most eight segments", () => {
    const deep = JSON.parse(nestedText(20_000)) as unknown;
    assert.equal(tooDeepPath({ messages: [{ content: deep }] }), "messages[0].content[0][0][0][0][0]");
    assert.equal(tooDeepPath(deep), "[0][0][0][0][0][0][0][0]");
    assert.equal(tooDeepPath(JSON.parse(nestedText(MAX_JSON_DEPTH)) as unknown), null);
    assert.equal(
      tooDeepPath(JSON.parse(nestedText(MAX_JSON_DEPTH + 1)) as unknown),
      "[0][0][0][0][0][0][0][0]",
    );
    assert.equal(tooDeepPath({ a: JSON.parse(nestedText(MAX_JSON_DEPTH - 1)) as unknown }), null);
  });

  test("a model's output nesting thousands of levels deep is not read as an object", () => {
    const args = `{"a": ${nestedText(20_000)}}`;
    assert.equal(parseJsonLenient(args), undefined);
    assert.equal(leadingJsonObject(args), null);
    assert.deepEqual(parseJsonLenient(`{"a": ${nestedText(3)}}`), { a: [[[1]]] });
  });
});
