import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { SseFrame } from "../../gateway/backends/sse.js";
import { messageEventsFromChat, messageFromChat } from "./messages-from-chat.js";

const meta = { id: "msg_1", model: "m" };

async function* frames(chunks: object[]): AsyncGenerator<SseFrame> {
  for (const chunk of chunks) yield { event: null, data: JSON.stringify(chunk) };
  yield { event: null, data: "[DONE]" };
}

const delta = (d: object, finish: string | null = null) => ({
  choices: [{ index: 0, delta: d, finish_reason: finish }],
});

describe("Messages from a backend's chat completion (a backend without /v1/messages)", () => {
  it("a whole answer: thinking, text and calls as blocks, the finish as the stop reason, cached tokens as cache reads", () => {
    const message = messageFromChat(
      {
        choices: [
          {
            finish_reason: "tool_calls",
            message: {
              reasoning_content: "think",
              content: "Let me look.",
              tool_calls: [{ id: "call_7", function: { name: "read", arguments: '{"path":"a.ts"}' } }],
            },
          },
        ],
        usage: { prompt_tokens: 100, completion_tokens: 9, prompt_tokens_details: { cached_tokens: 64 } },
      },
      meta,
    );
    assert.deepEqual(
      message.content.map((b) => b.type),
      ["thinking", "text", "tool_use"],
    );
    assert.deepEqual(message.content[2], {
      type: "tool_use",
      id: "toolu_7",
      name: "read",
      input: { path: "a.ts" },
    });
    assert.equal(message.stop_reason, "tool_use");
    assert.deepEqual(message.usage, {
      input_tokens: 36,
      output_tokens: 9,
      cache_read_input_tokens: 64,
      cache_creation_input_tokens: 0,
    });
  });

  it("a stream: its events in Anthropic's order, argument fragments as input_json_delta", async () => {
    const out: { event: string; data: Record<string, unknown> }[] = [];
    for await (const text of messageEventsFromChat(
      frames([
        delta({ role: "assistant" }),
        delta({ content: "Hi" }),
        delta({ tool_calls: [{ index: 0, id: "call_1", function: { name: "bash", arguments: '{"cmd":' } }] }),
        delta({ tool_calls: [{ index: 0, function: { arguments: '"ls"}' } }] }, "tool_calls"),
        { choices: [], usage: { prompt_tokens: 10, completion_tokens: 3 } },
      ]),
      meta,
    )) {
      const [eventLine, dataLine] = text.trim().split("\n");
      out.push({ event: eventLine!.slice(7), data: JSON.parse(dataLine!.slice(6)) });
    }
    assert.deepEqual(
      out.map((e) => e.event),
      [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
      ],
    );
    const json = out
      .filter((e) => (e.data["delta"] as { type?: string } | undefined)?.type === "input_json_delta")
      .map((e) => (e.data["delta"] as { partial_json: string }).partial_json)
      .join("");
    assert.equal(json, '{"cmd":"ls"}');
    const messageDelta = out.at(-2)?.data["delta"] as { stop_reason: string } | undefined;
    assert.equal(messageDelta?.stop_reason, "tool_use");
  });
});
