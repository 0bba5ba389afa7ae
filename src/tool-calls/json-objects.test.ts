import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { jsonObjectsIn } from "./json-objects.js";

describe("jsonObjectsIn", () => {
  it("finds the objects in prose and code fences, in order", () => {
    const text = 'First {"a": 1} then\n```json\n{"b": {"c": 2}}\n```';
    assert.deepEqual([...jsonObjectsIn(text)], [{ a: 1 }, { b: { c: 2 } }]);
  });

  it("is not confused by braces inside strings", () => {
    const text = '{"keystrokes": "awk \'{print $1}\' data.csv\\n"}';
    assert.deepEqual([...jsonObjectsIn(text)], [{ keystrokes: "awk '{print $1}' data.csv\n" }]);
  });

  it("skips brace groups that are not JSON and an unclosed brace before the object", () => {
    assert.deepEqual([...jsonObjectsIn('use {this} or { maybe: {"ok": true}')], [{ ok: true }]);
  });

  it("yields nothing for arrays and text without objects", () => {
    assert.deepEqual([...jsonObjectsIn("[1, 2] no objects here")], []);
  });
});
