import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ChatMessageInput } from "../schemas.js";
import { GeneratedReplies } from "./generated-replies.js";

const user: ChatMessageInput = { role: "user", content: "Weather in Paris?" };
const generated = '<tool_call>\n{"name": "get_weather",   "arguments": {"city":"Paris"}}\n</tool_call>';
const call = { id: "call_1", name: "get_weather", arguments: '{"city": "Paris"}' };
const echoed = (args: string, id = "toolu_9"): ChatMessageInput => ({
  role: "assistant",
  content: "",
  tool_calls: [{ id, type: "function", function: { name: "get_weather", arguments: args } }],
});
const result: ChatMessageInput = { role: "tool", content: "18 C", tool_call_id: "toolu_9" };

describe("GeneratedReplies", () => {
  it("renders a tool-call reply sent back unchanged as the text generated, whatever its call id and key order", () => {
    const replies = new GeneratedReplies(16);
    replies.scoped("key-a", [user]).remember(generated, null, [call]);
    const next = [user, echoed('{ "city" : "Paris" }'), result];
    assert.deepEqual(replies.scoped("key-a", next).restore(), [
      user,
      { role: "assistant", content: generated },
      result,
    ]);
  });

  it("leaves a reply whose arguments, content or conversation changed, and other tenants' replies, as sent", () => {
    const replies = new GeneratedReplies(16);
    replies.scoped("key-a", [user]).remember(generated, null, [call]);
    const changedArgs = [user, echoed('{"city": "Rome"}')];
    assert.deepEqual(replies.scoped("key-a", changedArgs).restore(), changedArgs);
    const otherConversation = [
      { role: "user", content: "Weather in Oslo?" } as ChatMessageInput,
      echoed(call.arguments),
    ];
    assert.deepEqual(replies.scoped("key-a", otherConversation).restore(), otherConversation);
    const otherTenant = [user, echoed(call.arguments)];
    assert.deepEqual(replies.scoped("key-b", otherTenant).restore(), otherTenant);
  });

  it("gives each of two identical calls its own generated text back", () => {
    const replies = new GeneratedReplies(16);
    const first = [user];
    replies.scoped(null, first).remember("first text", null, [call]);
    const second = [user, echoed(call.arguments), result];
    replies.scoped(null, second).remember("second text", null, [call]);
    const third = [...second, echoed(call.arguments), result];
    const restored = replies.scoped(null, third).restore();
    assert.deepEqual(
      restored.filter((m) => m.role === "assistant").map((m) => m.content),
      ["first text", "second text"],
    );
  });

  describe("a call cut off at max_tokens", () => {
    const cutText =
      '<tool_call>\n{"name": "write", "arguments": {"path": "src/a.ts", "content": "export const a';
    const cutArgs = '{"path": "src/a.ts", "content": "export const a';
    const cutCall = { id: "call_2", name: "write", arguments: cutArgs };
    const echoedWrite = (args: string | Record<string, unknown>): ChatMessageInput => ({
      role: "assistant",
      content: null,
      tool_calls: [{ id: "call_2", type: "function", function: { name: "write", arguments: args } }],
    });
    const restoredAs = (message: ChatMessageInput) => {
      const replies = new GeneratedReplies(16);
      replies.scoped(null, [user]).remember(cutText, null, [cutCall]);
      return replies.scoped(null, [user, message, result]).restore()[1];
    };
    const generatedText = { role: "assistant", content: cutText };

    it("is rendered as generated when sent back as received, or as a client's partial parser read it", () => {
      assert.deepEqual(restoredAs(echoedWrite(cutArgs)), generatedText);
      // pi (partial-json), the AI SDK: the cut string kept, then written as JSON again
      assert.deepEqual(
        restoredAs(echoedWrite('{"path":"src/a.ts","content":"export const a"}')),
        generatedText,
      );
      // Anthropic's SDK drops the cut string; a non-streamed Messages reply's input is {}
      assert.deepEqual(restoredAs(echoedWrite({ path: "src/a.ts" })), generatedText);
      assert.deepEqual(restoredAs(echoedWrite({})), generatedText);
    });

    it("is kept among the latest cut replies, however many a conversation had", () => {
      const replies = new GeneratedReplies(2);
      const conversations = ["a", "b", "c"].map((task) => [
        { role: "user", content: task } as ChatMessageInput,
      ]);
      for (const c of conversations) replies.scoped(null, c).remember(cutText, null, [cutCall]);
      const restored = conversations.map(
        (c) => replies.scoped(null, [...c, echoedWrite(cutArgs)]).restore()[1],
      );
      assert.deepEqual(restored, [echoedWrite(cutArgs), generatedText, generatedText]);
    });

    it("is left as sent when the echo says what was not generated", () => {
      for (const args of [
        '{"path":"src/a.ts","content":"export const ab"}',
        '{"path":"src/b.ts"}',
        '{"mode":"w"}',
      ]) {
        const message = echoedWrite(args);
        assert.deepEqual(restoredAs(message), message, args);
      }
    });
  });
});
