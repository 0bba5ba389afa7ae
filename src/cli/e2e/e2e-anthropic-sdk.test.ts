/**
 * End to end: the official `@anthropic-ai/sdk` against `continuum serve` running the real llama.cpp
 * engine (built-in tiny model) with an API key, the way Claude Code talks to it: x-api-key auth,
 * `x-claude-code-session-id` naming the program, tool_use / tool_result turns.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import type { MessageParam, Tool } from "@anthropic-ai/sdk/resources/messages";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { type LlamaServer, startLlamaServer, withExtraBody } from "../test-support/llama-server.js";

const KEY = "sk-e2e-anthropic";
const WEATHER: Tool = {
  name: "get_weather",
  description: "Weather of a city",
  input_schema: {
    type: "object",
    properties: { city: { type: "string", enum: ["Paris", "Rome"] } },
    required: ["city"],
  },
};
const FORCE_WEATHER = { type: "tool" as const, name: "get_weather" };
const system = [
  { type: "text" as const, text: "You are a weather assistant." },
  { type: "text" as const, text: "Call tools when asked.", cache_control: { type: "ephemeral" as const } },
];
const BLOCK_TOKENS = 16;
/** Greedy sampling, so the tiny model's forced calls close: the SDK's types no longer list temperature. */
const greedy = <P extends object>(params: P): P => withExtraBody(params, { temperature: 0 });

describe("@anthropic-ai/sdk against the llama.cpp engine (tiny model)", { skip: llamaSkip }, () => {
  let s: LlamaServer;
  let client: Anthropic;

  before(async () => {
    s = await startLlamaServer(["--kv-cache-tokens", "4096", "--api-key", KEY], { apiKey: KEY });
    client = new Anthropic({ baseURL: s.server.url, apiKey: KEY, maxRetries: 0, timeout: 30_000 });
  });
  after(() => s?.close());

  test("messages.create: a text message with usage", async () => {
    const message = await client.messages.create(
      greedy({
        model: s.model,
        max_tokens: 12,
        system,
        messages: [{ role: "user", content: "Say hello." }],
      }),
    );
    assert.equal(message.type, "message");
    assert.equal(message.role, "assistant");
    assert.match(message.id, /^msg_/);
    assert.equal(message.content[0]?.type, "text");
    assert.ok(["end_turn", "max_tokens"].includes(message.stop_reason ?? ""));
    assert.ok(message.usage.input_tokens > 10, JSON.stringify(message.usage));
    assert.ok(message.usage.output_tokens > 0 && message.usage.output_tokens <= 12);
  });

  test("messages.stream: text arrives in deltas and adds up to the final message", async () => {
    const stream = client.messages.stream(
      greedy({
        model: s.model,
        max_tokens: 12,
        messages: [{ role: "user", content: "Count to five." }],
      }),
    );
    let text = "";
    stream.on("text", (delta) => {
      text += delta;
    });
    const message = await stream.finalMessage();
    const block = message.content[0];
    assert.ok(block?.type === "text" && block.text.length > 0);
    assert.equal(text, block.text);
    assert.equal(message.usage.output_tokens, 12);
    assert.equal(message.stop_reason, "max_tokens");
  });

  test("a forced tool_choice gives a tool_use block with a parsed input", async () => {
    const message = await client.messages.create(
      greedy({
        model: s.model,
        max_tokens: 400,
        messages: [{ role: "user", content: "Weather in Paris?" }],
        tools: [WEATHER],
        tool_choice: FORCE_WEATHER,
      }),
    );
    assert.equal(message.stop_reason, "tool_use", JSON.stringify(message.content));
    const call = message.content.find((b) => b.type === "tool_use");
    assert.ok(call?.type === "tool_use", JSON.stringify(message.content));
    assert.match(call.id, /^toolu_/);
    assert.equal(call.name, "get_weather");
    assert.ok(["Paris", "Rome"].includes((call.input as { city: string }).city));
  });

  test("a 4-turn tool loop under one Claude Code session reads the previous prompt and reply from cache", async () => {
    const messages: MessageParam[] = [{ role: "user", content: "Weather in Paris, then Rome?" }];
    let previousSequence = 0;
    for (let turn = 0; turn < 4; turn++) {
      const stream = client.messages.stream(
        greedy({
          model: s.model,
          max_tokens: 400,
          system,
          messages,
          tools: [WEATHER],
          tool_choice: FORCE_WEATHER,
        }),
        { headers: { "x-claude-code-session-id": "cc-session-e2e" } },
      );
      const message = await stream.finalMessage();
      const call = message.content.find((b) => b.type === "tool_use");
      assert.ok(call?.type === "tool_use" && message.stop_reason === "tool_use", `turn ${turn}`);
      const { input_tokens, cache_read_input_tokens, cache_creation_input_tokens } = message.usage;
      assert.equal(cache_creation_input_tokens, 0);
      if (turn > 0) {
        // every full block of the previous prompt and reply (its last token was sampled, never fed)
        const floor = previousSequence - 1 - ((previousSequence - 1) % BLOCK_TOKENS);
        assert.ok(
          (cache_read_input_tokens ?? 0) >= floor,
          `turn ${turn}: ${JSON.stringify(message.usage)}, previous prompt and reply ${previousSequence}`,
        );
      }
      previousSequence = input_tokens + (cache_read_input_tokens ?? 0) + message.usage.output_tokens;
      messages.push({ role: "assistant", content: message.content });
      messages.push({
        role: "user",
        content: [
          {
            type: "tool_result",
            tool_use_id: call.id,
            content: [{ type: "text", text: `sunny, turn ${turn}` }],
          },
        ],
      });
    }
  });

  test("a streamed turn's message_start carries its input and cached tokens (LangChain's ChatAnthropic reads only it)", async () => {
    const session = { headers: { "x-claude-code-session-id": "cc-session-usage" } };
    const messages: MessageParam[] = [{ role: "user", content: "List the files of the repository." }];
    const first = await client.messages.create(
      greedy({ model: s.model, max_tokens: 24, system, messages }),
      session,
    );
    messages.push({ role: "assistant", content: first.content });
    messages.push({ role: "user", content: "Now read the first one." });
    const stream = await client.messages.create(
      greedy({ model: s.model, max_tokens: 24, system, messages, stream: true as const }),
      session,
    );
    let start: Anthropic.Usage | null = null;
    let end: Anthropic.MessageDeltaUsage | null = null;
    for await (const event of stream) {
      if (event.type === "message_start") start = event.message.usage;
      if (event.type === "message_delta") end = event.usage;
    }
    assert.ok(start !== null && end !== null);
    const held =
      first.usage.input_tokens + (first.usage.cache_read_input_tokens ?? 0) + first.usage.output_tokens;
    const floor = Math.floor((held - 1) / BLOCK_TOKENS) * BLOCK_TOKENS;
    assert.ok(
      (start.cache_read_input_tokens ?? 0) >= floor,
      `${JSON.stringify(start)}; turn 1 ${JSON.stringify(first.usage)}`,
    );
    assert.deepEqual(
      [start.input_tokens, start.cache_read_input_tokens],
      [end.input_tokens, end.cache_read_input_tokens],
    );
  });

  test("messages.countTokens counts the prompt messages.create is charged for", async () => {
    const params = { model: s.model, system, messages: [{ role: "user" as const, content: "Say hello." }] };
    const { input_tokens } = await client.messages.countTokens(params);
    const message = await client.messages.create({ ...params, max_tokens: 1 });
    assert.equal(input_tokens, message.usage.input_tokens + (message.usage.cache_read_input_tokens ?? 0));
  });

  test("a wrong x-api-key is a 401 authentication_error", async () => {
    const wrong = new Anthropic({ baseURL: s.server.url, apiKey: "wrong", maxRetries: 0 });
    await assert.rejects(
      wrong.messages.create({ model: s.model, max_tokens: 4, messages: [{ role: "user", content: "hi" }] }),
      (error: unknown) =>
        error instanceof Anthropic.AuthenticationError &&
        (error.error as { error: { type: string } }).error.type === "authentication_error",
    );
  });
});
