import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { ApiError } from "../errors.js";
import { chatCompletionRequest, chatMessages, chatToolChoice } from "./messages-request.js";
import { messagesSchema } from "./messages-schema.js";

const request = (fields: Record<string, unknown>) =>
  messagesSchema.parse({
    model: "m",
    max_tokens: 100,
    messages: [{ role: "user", content: "hi" }],
    ...fields,
  });

describe("Messages request -> chat completion", () => {
  test("system text blocks become one system message; unknown top-level fields are accepted", () => {
    const body = request({
      system: [
        { type: "text", text: "You are Claude Code." },
        { type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } },
      ],
      thinking: { type: "enabled", budget_tokens: 1024 },
      context_management: { edits: [] },
    });
    assert.deepEqual(chatMessages(body), [
      { role: "system", content: "You are Claude Code.\n\nBe brief." },
      { role: "user", content: "hi" },
    ]);
  });

  test("a system message inside messages (Claude Code 2.1's environment section) is rendered where it stands", () => {
    const body = request({
      system: "You are Claude Code.",
      messages: [
        { role: "user", content: [{ type: "text", text: "Reply OK." }] },
        {
          role: "system",
          content: [
            { type: "text", text: "# Environment" },
            { type: "text", text: "cwd: /tmp" },
          ],
        },
      ],
    });
    assert.deepEqual(chatMessages(body), [
      { role: "system", content: "You are Claude Code." },
      { role: "user", content: "Reply OK." },
      { role: "system", content: "# Environment\n\ncwd: /tmp" },
    ]);
    const withTool = request({
      messages: [{ role: "system", content: [{ type: "tool_use", id: "t", name: "f", input: {} }] }],
    });
    assert.throws(() => chatMessages(withTool), ApiError);
  });

  test("a tool loop: tool_use -> assistant tool_calls, tool_result (blocks) -> tool messages, text after", () => {
    const body = request({
      messages: [
        { role: "user", content: "weather?" },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "hmm", signature: "x" },
            { type: "text", text: "Checking." },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris", days: [1, 2] } },
          ],
        },
        {
          role: "user",
          content: [
            {
              type: "tool_result",
              tool_use_id: "toolu_1",
              content: [
                { type: "text", text: "sunny" },
                { type: "text", text: "20C" },
              ],
            },
            { type: "text", text: "and tomorrow?" },
          ],
        },
      ],
    });
    assert.deepEqual(chatMessages(body).slice(1), [
      {
        role: "assistant",
        content: "Checking.",
        reasoning_content: "hmm",
        tool_calls: [
          {
            id: "toolu_1",
            type: "function",
            function: { name: "get_weather", arguments: '{"city": "Paris", "days": [1, 2]}' },
          },
        ],
      },
      { role: "tool", tool_call_id: "toolu_1", content: "sunny\n\n20C" },
      { role: "user", content: "and tomorrow?" },
    ]);
  });

  test("tool_choice maps to OpenAI's: auto, any -> required, tool -> named function, none", () => {
    assert.equal(chatToolChoice({ type: "auto" }), "auto");
    assert.equal(chatToolChoice({ type: "any" }), "required");
    assert.equal(chatToolChoice({ type: "none" }), "none");
    assert.deepEqual(chatToolChoice({ type: "tool", name: "ls" }), {
      type: "function",
      function: { name: "ls" },
    });
    assert.equal(chatToolChoice(undefined), undefined);
  });

  test("tools, sampling, stop sequences, disable_parallel_tool_use and the last cache_control carry over", () => {
    const body = request({
      tools: [
        {
          name: "ls",
          description: "list",
          input_schema: { type: "object" },
          cache_control: { type: "ephemeral", ttl: "1h" },
        },
      ],
      tool_choice: { type: "any", disable_parallel_tool_use: true },
      system: [{ type: "text", text: "s", cache_control: { type: "ephemeral", ttl: "5m" } }],
      stop_sequences: ["END"],
      temperature: 0,
      top_k: 5,
    });
    const chat = chatCompletionRequest(body);
    assert.deepEqual(chat["tools"], [
      { type: "function", function: { name: "ls", description: "list", parameters: { type: "object" } } },
    ]);
    assert.equal(chat["tool_choice"], "required");
    assert.equal(chat["parallel_tool_calls"], false);
    assert.deepEqual(chat["stop"], ["END"]);
    assert.equal(chat["top_k"], 5);
    assert.deepEqual(chat["cache_control"], { type: "ephemeral", ttl: "5m" });
  });

  test("images are refused with a 400 saying the model reads text only and naming the flag, also inside a tool_result", () => {
    const image = { type: "image", source: { type: "base64", media_type: "image/png", data: "AA==" } };
    for (const content of [[image], [{ type: "tool_result", tool_use_id: "t", content: [image] }]]) {
      const body = request({ messages: [{ role: "user", content }] });
      assert.throws(
        () => chatMessages(body),
        (error: unknown) =>
          error instanceof ApiError &&
          error.status === 400 &&
          /image content is not supported: the served model reads text only .*--media-inputs note/.test(
            error.message,
          ),
      );
    }
  });
});
