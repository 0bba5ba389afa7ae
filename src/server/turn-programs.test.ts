import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { withServer } from "./test-support/test-server.js";

const TOOLS = [{ type: "function", function: { name: "bash", parameters: { type: "object" } } }];

const chat = (content: string, extra: Record<string, unknown> = {}) => ({
  messages: [{ role: "user", content }],
  ...extra,
});

describe("which program a request is a turn of", () => {
  test("a request without a program id is proposed a program of its own, scoped to its tenant; raw prompts are not", async () => {
    await withServer({}, { apiKeys: ["key-a", "key-b"] }, async (t) => {
      const as = (key: string) => ({ Authorization: `Bearer ${key}` });
      await (await t.post("/v1/chat/completions", chat("one"), as("key-a"))).json();
      await (await t.post("/v1/chat/completions", chat("two"), as("key-a"))).json();
      await (await t.post("/v1/messages", { max_tokens: 8, ...chat("three") }, as("key-b"))).json();
      await (await t.post("/v1/completions", { prompt: "raw" }, as("key-a"))).json();
      const [a1, a2, b, raw] = t.engine.requests;
      assert.equal(a1?.programId, null, "the client named no program");
      assert.match(a1?.implicitProgramId ?? "", /^tenant-1\/implicit-[0-9a-f]{16}$/);
      assert.match(b?.implicitProgramId ?? "", /^tenant-2\/implicit-[0-9a-f]{16}$/);
      assert.notEqual(
        a1?.implicitProgramId,
        a2?.implicitProgramId,
        "the engine decides whether they are one",
      );
      assert.equal(raw?.implicitProgramId, undefined);
    });
  });

  test("opencode's title request (no tools, the session's x-session-id) is a one-off, not a turn of the session", async () => {
    await withServer({}, {}, async (t) => {
      const session = { "x-session-id": "ses_1" };
      await (await t.post("/v1/chat/completions", chat("fix the bug", { tools: TOOLS }), session)).json();
      await (await t.post("/v1/chat/completions", chat("Generate a title for: fix the bug"), session)).json();
      await (await t.post("/v1/chat/completions", chat("go on", { tools: TOOLS }), session)).json();
      // a program that never offered tools keeps its tool-less turns; a tool-less last step still ends one
      await (await t.post("/v1/chat/completions", chat("plain"), { "x-session-id": "ses_2" })).json();
      await (await t.post("/v1/chat/completions", chat("done", { is_last_step: true }), session)).json();
      const requests = t.engine.requests.map((r) => [r.programId, r.implicitProgramId ?? null]);
      assert.deepEqual(requests, [
        ["ses_1", null],
        [null, null],
        ["ses_1", null],
        ["ses_2", null],
        ["ses_1", null],
      ]);
    });
  });
});
