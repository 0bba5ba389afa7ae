import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ReplyTap, readSseTapped } from "./reply-tap.js";
import type { BackendApi } from "./turn.js";

function tapOf(api: BackendApi) {
  const seen = { tokens: 0, ended: [] as (string | null)[] };
  const tap = new ReplyTap(api, {
    onTokens: (n) => {
      seen.tokens += n;
    },
    onEnd: (error) => seen.ended.push(error),
  });
  return { tap, seen };
}

function body(text: string): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  return new ReadableStream({
    start(controller) {
      // split mid-frame: frames are read across chunk boundaries
      controller.enqueue(bytes.subarray(0, 37));
      controller.enqueue(bytes.subarray(37));
      controller.close();
    },
  });
}

const chunk = (delta: object, extra: object = {}) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, delta }], ...extra })}\n\n`;

describe("what the gateway reads of an answer passing through", () => {
  it("a chat stream: a token per chunk with output, the first call's name, usage, and the usage chunk left out when the client did not ask", async () => {
    const { tap, seen } = tapOf("chat");
    const stream =
      chunk({ role: "assistant" }) +
      chunk({ content: "Hel" }) +
      chunk({ reasoning_content: "hmm" }) +
      chunk({ tool_calls: [{ index: 0, id: "c1", function: { name: "bash", arguments: "" } }] }) +
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"cmd":"ls"}' } }] }) +
      `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 30, completion_tokens: 4, prompt_tokens_details: { cached_tokens: 16 } } })}\n\n` +
      "data: [DONE]\n\n";
    const frames = [];
    for await (const frame of readSseTapped(body(stream), tap, true)) frames.push(frame.data);
    assert.equal(seen.tokens, 4);
    assert.equal(tap.toolName, "bash");
    assert.equal(tap.text, "Hel");
    assert.deepEqual(tap.usage, { promptTokens: 30, completionTokens: 4, cachedTokens: 16 });
    assert.equal(frames.length, 6, "the usage-only chunk is not passed on");
    assert.equal(frames.at(-1), "[DONE]");
    assert.deepEqual(seen.ended, [null]);
  });

  it("a Messages stream: deltas are tokens; usage from message_start and message_delta, cached reads counted in the prompt", async () => {
    const { tap, seen } = tapOf("messages");
    const event = (type: string, data: object) =>
      `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    const stream =
      event("message_start", { message: { usage: { input_tokens: 4, cache_read_input_tokens: 96 } } }) +
      event("content_block_start", { index: 0, content_block: { type: "tool_use", name: "read_file" } }) +
      event("content_block_delta", { delta: { type: "input_json_delta", partial_json: "{" } }) +
      event("content_block_delta", { delta: { type: "input_json_delta", partial_json: "}" } }) +
      event("message_delta", { usage: { output_tokens: 2 } });
    for await (const _ of readSseTapped(body(stream), tap, false));
    assert.equal(seen.tokens, 2);
    assert.equal(tap.toolName, "read_file");
    assert.deepEqual(tap.usage, { promptTokens: 100, completionTokens: 2, cachedTokens: 96 });
  });

  it("a stream cut short ends the tap with the reason", async () => {
    const { tap, seen } = tapOf("completions");
    const broken = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(chunk({}).replace("delta", "text")));
        controller.error(new Error("socket hang up"));
      },
    });
    await assert.rejects(async () => {
      for await (const _ of readSseTapped(broken, tap, false));
    }, /socket hang up/);
    assert.equal(seen.ended.length, 1);
    assert.match(seen.ended[0] ?? "", /socket hang up/);
  });

  it("a whole answer: its usage's output tokens at once", () => {
    const { tap, seen } = tapOf("chat");
    tap.whole({
      choices: [
        { message: { content: "done", tool_calls: [{ function: { name: "edit", arguments: "{}" } }] } },
      ],
      usage: { prompt_tokens: 10, completion_tokens: 7 },
    });
    assert.equal(seen.tokens, 7);
    assert.equal(tap.toolName, "edit");
    assert.deepEqual(tap.usage, { promptTokens: 10, completionTokens: 7, cachedTokens: null });
  });
});
