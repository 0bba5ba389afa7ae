import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { partialParse } from "@anthropic-ai/sdk/_vendor/partial-json-parser/parser.js";
import { parsePartialJson } from "ai";
import fc from "../../core/test-support/fast-check.js";
import { jsonDumps } from "../output/tool-calls.js";
import { CutNumber, partialJsonValue, saysNoMoreThan } from "./partial-json.js";

/** Arguments as a model writes them: an object, spaced as json.dumps or compact. */
const written = fc.record({
  value: fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 4 }),
  spaced: fc.boolean(),
});
const textOf = ({ value, spaced }: { value: Record<string, unknown>; spaced: boolean }) =>
  spaced ? jsonDumps(value) : JSON.stringify(value);

/** What a client's own partial-JSON parser reads of a cut text, or undefined where it gives up. */
const clientReads = async (cut: string): Promise<unknown[]> => {
  const reads: unknown[] = [];
  const aiSdk = await parsePartialJson(cut);
  if (aiSdk.value !== undefined) reads.push(aiSdk.value);
  try {
    reads.push(partialParse(cut));
  } catch {
    // Anthropic's parser throws on text it cannot complete; such a client sends {} or nothing
  }
  return reads;
};

describe("partial JSON", () => {
  test("a whole text is its value; a text cut anywhere says no more than the whole", () => {
    fc.assert(
      fc.property(written, fc.nat(), (w, at) => {
        const text = textOf(w);
        assert.deepEqual(partialJsonValue(text), JSON.parse(text));
        const cut = partialJsonValue(text.slice(0, 1 + (at % text.length)));
        assert.ok(saysNoMoreThan(cut, JSON.parse(text)), JSON.stringify(cut));
      }),
      { numRuns: 1000, seed: 57 },
    );
  });

  test("what the AI SDK's and Anthropic's partial parsers read of a cut text says no more than this reads", async () => {
    // the AI SDK's parser drops an exponent with a sign (5e+36 read as 5): such a call is not matched
    const signedExponent = /\de[+-]/i;
    await fc.assert(
      fc.asyncProperty(written, fc.nat(), async (w, at) => {
        const text = textOf(w);
        fc.pre(!signedExponent.test(text));
        const cut = text.slice(0, 1 + (at % text.length));
        const ours = partialJsonValue(cut);
        for (const theirs of await clientReads(cut)) {
          // written again as JSON, as a client sends it back
          const echoed: unknown = JSON.parse(JSON.stringify(theirs) ?? "null");
          assert.ok(
            saysNoMoreThan(echoed, ours),
            `${cut} -> ${JSON.stringify(echoed)} vs ${JSON.stringify(ours)}`,
          );
        }
      }),
      { numRuns: 1000, seed: 57 },
    );
  });

  test("a cut string, key, number, literal or escape", () => {
    assert.deepEqual(partialJsonValue('{"path": "src/ma'), { path: "src/ma" });
    assert.deepEqual(partialJsonValue('{"path": "a", "cont'), { path: "a" });
    assert.deepEqual(partialJsonValue('{"path": "a", "content":'), { path: "a" });
    assert.deepEqual(partialJsonValue('{"n": 12'), { n: new CutNumber("12") });
    assert.deepEqual(partialJsonValue('{"n": -'), { n: new CutNumber("-") });
    assert.deepEqual(partialJsonValue('{"ok": tr'), { ok: true });
    assert.deepEqual(partialJsonValue('{"s": "a\\'), { s: "a" });
    assert.deepEqual(partialJsonValue('{"s": "a\\u00'), { s: "a" });
    assert.deepEqual(partialJsonValue('{"s": "line\nbreak'), { s: "line\nbreak" });
    assert.deepEqual(partialJsonValue('{"a": [1, [2, "x'), { a: [1, [2, "x"]] });
  });

  test("text that is no beginning of JSON is nothing", () => {
    for (const text of ["", "  ", "hello", '{"a": 1} tail', '{"a" 1', '{"a": nope', "{'a': 1"]) {
      assert.equal(partialJsonValue(text), undefined, text);
    }
  });

  test("an echo that adds to or changes what was generated says more", () => {
    const generated = { path: "src/main.ts", content: "export const" };
    assert.ok(saysNoMoreThan({}, generated));
    assert.ok(saysNoMoreThan({ path: "src/main.ts", content: "exp" }, generated));
    assert.ok(!saysNoMoreThan({ path: "src/main.ts", content: "export const x" }, generated));
    assert.ok(!saysNoMoreThan({ path: "src/other.ts" }, generated));
    assert.ok(!saysNoMoreThan({ mode: "w" }, generated));
    assert.ok(!saysNoMoreThan([1, 2, 3], [1, 2]));
    assert.ok(!saysNoMoreThan(2, 1));
  });
});
