/**
 * The tools of a Responses request as chat tools and back: whatever mix of function, custom and namespaced
 * tools a client offers, a call of any of them comes back named as it was offered, or the request is refused.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "../../core/test-support/fast-check.js";
import { ApiError } from "../errors.js";
import { chatNameOf, OfferedTools } from "./responses-tools.js";

const name = fc.stringMatching(/^[a-z][a-z0-9_]{0,7}$/);
const runnable = fc.record({ type: fc.constantFrom("function", "custom"), name });
const tool = fc.oneof(
  runnable,
  fc.record({ type: fc.constant("namespace"), name, tools: fc.array(runnable, { maxLength: 3 }) }),
  fc.record({ type: fc.constant("web_search") }),
);

describe("OfferedTools", () => {
  test("a call of every offered tool comes back as that tool, or names that would be confused are refused", () => {
    fc.assert(
      fc.property(fc.array(tool, { maxLength: 6 }), (tools) => {
        const expected = tools.flatMap((t) =>
          t.type === "namespace"
            ? t.tools.map((inner) => ({ ...inner, namespace: t.name }))
            : t.type === "web_search"
              ? []
              : [{ ...t }],
        );
        // refused exactly when a custom or namespaced tool would be offered under a name another tool has
        const plain = (t: (typeof expected)[number]) => t.type === "function" && !("namespace" in t);
        const confused = expected.some((a, i) =>
          expected.some((b, j) => i !== j && chatNameOf(a) === chatNameOf(b) && !(plain(a) && plain(b))),
        );
        let offered: OfferedTools;
        try {
          offered = OfferedTools.of(tools);
        } catch (error) {
          assert.ok(error instanceof ApiError && /two tools are offered as/.test(error.message));
          assert.ok(confused, "refused without a clash");
          return;
        }
        assert.ok(!confused, "a clash was let through");
        assert.equal(offered.chatTools.length, expected.length);
        for (const [i, chatTool] of offered.chatTools.entries()) {
          const want = expected[i]!;
          const called = offered.callOf(chatTool.name);
          // a plain function tool sharing a name with another plain one is as the client sent it
          if (plain(want)) {
            assert.equal(called.name, chatTool.name);
            continue;
          }
          assert.deepEqual(called, want);
          assert.equal(chatNameOf(called), chatTool.name);
        }
        assert.deepEqual(offered.dropped, tools.some((t) => t.type === "web_search") ? ["web_search"] : []);
      }),
    );
  });
});
