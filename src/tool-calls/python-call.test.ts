import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseJsonLenient } from "./json-objects.js";
import { parsePythonCall, parsePythonCallList } from "./python-call.js";

describe("tool-call arguments", () => {
  test("lenient JSON and python literals", () => {
    assert.deepEqual(parseJsonLenient('{"a": "x\ny"}'), { a: "x\ny" });
    assert.equal(parseJsonLenient("{nope"), undefined);
    assert.deepEqual(parsePythonCall("f(a='x', b=[1, 2.5], c=None, d=True, e={'k': (1,)})"), {
      name: "f",
      args: { a: "x", b: [1, 2.5], c: null, d: true, e: { k: [1] } },
    });
    assert.deepEqual(parsePythonCall('brave_search.call(query="x")'), {
      name: "brave_search",
      args: { query: "x" },
    });
    assert.equal(parsePythonCall("f(1, 2)"), null, "positional arguments are not supported");
    assert.equal(parsePythonCallList("[f(a=1"), null);
  });
});
