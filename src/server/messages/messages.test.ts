import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { type Json, withServer } from "../test-support/test-server.js";

const body = (extra: Record<string, unknown> = {}) => ({
  model: "fake-model",
  max_tokens: 64,
  messages: [{ role: "user", content: "hi" }],
  ...extra,
});

/** `event:` name and parsed data of each frame of an Anthropic SSE body. */
function events(text: string): { event: string; data: Json }[] {
  return text
    .split("\n\n")
    .filter((frame) => frame.length > 0)
    .map((frame) => {
      const m = /^event: (\S+)\ndata: (.*)$/s.exec(frame);
      assert.ok(m, `not an event frame: ${JSON.stringify(frame)}`);
      const data = JSON.parse(m[2]!);
      assert.equal(data.type, m[1], "the data's type names its event");
      return { event: m[1]!, data };
    });
}

const WEATHER_TOOL = {
  name: "get_weather",
  input_schema: { type: "object", properties: { city: { type: "string" } } },
};

describe("POST /v1/messages (fake engine)", () => {
  test("a streamed text answer: message_start, ping, one text block, message_delta, message_stop", async () => {
    await withServer({ reply: () => ["Hello", " there", "!"] }, {}, async (t) => {
      const response = await t.post("/v1/messages?beta=true", body({ stream: true, service_tier: "auto" }), {
        "anthropic-version": "2023-06-01",
        "anthropic-beta": "interleaved-thinking-2025-05-14",
      });
      assert.equal(response.status, 200);
      const got = events(await response.text());
      assert.deepEqual(
        got.map((e) => e.event),
        [
          "message_start",
          "ping",
          "content_block_start",
          ...got.filter((e) => e.event === "content_block_delta").map(() => "content_block_delta"),
          "content_block_stop",
          "message_delta",
          "message_stop",
        ],
      );
      const start = got[0]!.data.message;
      assert.match(start.id, /^msg_/);
      assert.deepEqual([start.role, start.content, start.model], ["assistant", [], "fake-model"]);
      const text = got
        .filter((e) => e.event === "content_block_delta")
        .map((e) => e.data.delta.text)
        .join("");
      assert.equal(text, "Hello there!");
      const delta = got.find((e) => e.event === "message_delta")!.data;
      assert.deepEqual(delta.delta, { stop_reason: "end_turn", stop_sequence: null });
      assert.equal(delta.usage.output_tokens, 2);
    });
  });

  test("message_start carries the prompt's input and cached tokens, as message_delta does", async () => {
    await withServer({ reply: () => ["Hello", " there"] }, {}, async (t) => {
      const program = { "x-program-id": "streamed-usage" };
      const first = body({ messages: [{ role: "user", content: "one two three four" }] });
      await (await t.post("/v1/messages", first, program)).json();
      const next = body({
        stream: true,
        messages: [
          { role: "user", content: "one two three four" },
          { role: "assistant", content: "Hello there" },
          { role: "user", content: "five six" },
        ],
      });
      const got = events(await (await t.post("/v1/messages", next, program)).text());
      const start = got.find((e) => e.event === "message_start")!.data.message.usage;
      const end = got.find((e) => e.event === "message_delta")!.data.usage;
      assert.ok(start.cache_read_input_tokens > 0, JSON.stringify(start));
      assert.deepEqual(
        [start.input_tokens, start.cache_read_input_tokens, start.output_tokens],
        [end.input_tokens, end.cache_read_input_tokens, 0],
      );
    });
  });

  test("a stop sequence that ends the reply is named: stop_reason stop_sequence, streamed or not", async () => {
    await withServer({ reply: () => ["Step one.", " STOP here", " never"] }, {}, async (t) => {
      const request = body({ stop_sequences: ["STOP", "END"] });
      const message = (await (await t.post("/v1/messages", request)).json()) as Json;
      assert.deepEqual(
        [message.content, message.stop_reason, message.stop_sequence],
        [[{ type: "text", text: "Step one. " }], "stop_sequence", "STOP"],
      );
      const streamed = events(await (await t.post("/v1/messages", { ...request, stream: true })).text());
      const delta = streamed.find((e) => e.event === "message_delta")!.data;
      assert.deepEqual(delta.delta, { stop_reason: "stop_sequence", stop_sequence: "STOP" });
    });
  });

  test("a streamed tool call: a tool_use block whose input_json_delta pieces add up to its input", async () => {
    const reply = [
      '<tool_call>\n{"name": "get_weather", ',
      '"arguments": {"city": ',
      '"Paris"}}\n</tool_call>',
    ];
    await withServer({ reply: () => reply }, {}, async (t) => {
      const response = await t.post("/v1/messages", body({ stream: true, tools: [WEATHER_TOOL] }));
      const got = events(await response.text());
      const starts = got.filter((e) => e.event === "content_block_start");
      assert.equal(starts.length, 1);
      assert.equal(starts[0]!.data.content_block.type, "tool_use");
      assert.equal(starts[0]!.data.content_block.name, "get_weather");
      assert.match(starts[0]!.data.content_block.id, /^toolu_/);
      const json = got
        .filter((e) => e.event === "content_block_delta")
        .map((e) => e.data.delta.partial_json)
        .join("");
      assert.deepEqual(JSON.parse(json), { city: "Paris" });
      assert.equal(got.find((e) => e.event === "message_delta")!.data.delta.stop_reason, "tool_use");
    });
  });

  test("usage: input_tokens excludes the cached tokens, which are cache reads; nothing is cache creation", async () => {
    await withServer({ reply: () => "fine thanks" }, {}, async (t) => {
      const headers = { "x-claude-code-session-id": "cc-1" };
      const first = (await (await t.post("/v1/messages", body(), headers)).json()) as Json;
      const second = (await (
        await t.post(
          "/v1/messages",
          body({
            messages: [
              { role: "user", content: "hi" },
              { role: "assistant", content: [{ type: "text", text: "fine thanks" }] },
              { role: "user", content: "and you?" },
            ],
          }),
          headers,
        )
      ).json()) as Json;
      assert.equal(first.usage.cache_read_input_tokens, 0);
      assert.ok(second.usage.cache_read_input_tokens > 0, JSON.stringify(second.usage));
      assert.equal(second.usage.cache_creation_input_tokens, 0);
      const [r1, r2] = t.engine.requests;
      assert.equal(r2!.programId, "cc-1");
      const promptWords = r2!.prompt.split(/\s+/).filter((w) => w.length > 0).length;
      assert.equal(second.usage.input_tokens + second.usage.cache_read_input_tokens, promptWords);
      assert.equal(r1!.programId, "cc-1");
      assert.deepEqual(second.content, [{ type: "text", text: "fine thanks" }]);
      assert.equal(second.stop_reason, "end_turn");
    });
  });

  test("a Claude Code subagent (x-claude-code-agent-id) is a program of its own, linked to its parent", async () => {
    await withServer({}, {}, async (t) => {
      const session = { "x-claude-code-session-id": "cc-7" };
      await t.post("/v1/messages", body(), session);
      await t.post("/v1/messages", body(), { ...session, "x-claude-code-agent-id": "a1" });
      await t.post("/v1/messages", body(), {
        ...session,
        "x-claude-code-agent-id": "a2",
        "x-claude-code-parent-agent-id": "a1",
      });
      const [main, child, grandchild] = t.engine.requests;
      assert.equal(main!.programId, "cc-7");
      assert.equal(main!.parentProgramId ?? null, null);
      assert.equal(child!.programId, "cc-7/agent-a1");
      assert.equal(child!.parentProgramId, "cc-7");
      assert.equal(grandchild!.programId, "cc-7/agent-a2");
      assert.equal(grandchild!.parentProgramId, "cc-7/agent-a1");
    });
  });

  test("metadata.user_id names the program, cache_control's ttl bounds its retention", async () => {
    await withServer({}, {}, async (t) => {
      const response = await t.post(
        "/v1/messages",
        body({
          metadata: { user_id: JSON.stringify({ session_id: "sess-9" }) },
          system: [{ type: "text", text: "sys", cache_control: { type: "ephemeral", ttl: "5m" } }],
        }),
      );
      assert.equal(response.status, 200);
      assert.equal(t.engine.requests[0]!.programId, "sess-9");
      assert.equal(t.engine.requests[0]!.retentionHints?.ttlS, 300);
    });
  });

  test("errors are Anthropic-shaped: an image, a bad field, an unknown model", async () => {
    await withServer({}, {}, async (t) => {
      const image = { type: "image", source: { type: "base64", media_type: "image/png", data: "AA==" } };
      const cases: [Record<string, unknown>, number, string, RegExp][] = [
        [
          body({ messages: [{ role: "user", content: [image] }] }),
          400,
          "invalid_request_error",
          /reads text only .*--media-inputs note/,
        ],
        [body({ max_tokens: "many" }), 400, "invalid_request_error", /max_tokens/],
        [body({ model: "claude-opus" }), 404, "not_found_error", /claude-opus/],
      ];
      for (const [request, status, type, message] of cases) {
        const response = await t.post("/v1/messages", request);
        assert.equal(response.status, status);
        const error = (await response.json()) as Json;
        assert.equal(error.type, "error");
        assert.equal(error.error.type, type);
        assert.match(error.error.message, message);
      }
    });
  });

  test("count_tokens counts the rendered prompt, tools included", async () => {
    await withServer({}, {}, async (t) => {
      const count = async (extra: Record<string, unknown>) => {
        const { max_tokens: _, ...request } = body(extra);
        return ((await (await t.post("/v1/messages/count_tokens", request)).json()) as Json).input_tokens;
      };
      const plain = await count({});
      assert.ok(plain > 0);
      assert.ok((await count({ tools: [WEATHER_TOOL] })) > plain);
    });
  });
});

describe("x-api-key", () => {
  test("is accepted like a bearer token on /v1; a wrong key is an Anthropic authentication_error", async () => {
    await withServer({}, { apiKeys: ["secret"] }, async (t) => {
      assert.equal((await t.post("/v1/messages", body(), { "x-api-key": "secret" })).status, 200);
      assert.equal(
        (
          await t.post(
            "/v1/chat/completions",
            { messages: [{ role: "user", content: "hi" }] },
            { "x-api-key": "secret" },
          )
        ).status,
        200,
      );
      const wrong = await t.post("/v1/messages", body(), { "x-api-key": "nope" });
      assert.equal(wrong.status, 401);
      assert.equal(((await wrong.json()) as Json).error.type, "authentication_error");
    });
  });
});
