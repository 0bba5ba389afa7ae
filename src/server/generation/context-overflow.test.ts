/**
 * A prompt over the context gets, on each API, the refusal its harnesses read as "compact and retry":
 * OpenAI's `context_length_exceeded` (opencode, the OpenAI SDKs), Anthropic's `prompt is too long` (Claude
 * Code), and in a streamed Responses request a `response.failed` event (Codex).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EngineRejection } from "../../engine/engine-api.js";
import { type Json, withServer } from "../test-support/test-server.js";

// The fake engine counts words: `<|im_start|>user`, 80 x `word`, `<|im_end|>`, `<|im_start|>assistant`.
const LONG = [{ role: "user", content: "word ".repeat(80) }];
const PROMPT_TOKENS = 83;
const CONTEXT = 50;

const OPENAI_OVERFLOW = {
  error: {
    message: `This model's maximum context length is ${CONTEXT} tokens. However, your messages resulted in ${PROMPT_TOKENS} tokens. Please reduce the length of the messages.`,
    type: "invalid_request_error",
    param: "messages",
    code: "context_length_exceeded",
  },
};

const RESPONSES_OVERFLOW = {
  error: {
    message: "Your input exceeds the context window of this model. Please adjust your input and try again.",
    type: "invalid_request_error",
    param: "input",
    code: "context_length_exceeded",
  },
};

async function expectJson(response: Response, status: number): Promise<Json> {
  assert.equal(response.status, status);
  return response.json();
}

describe("a prompt over the context", () => {
  test("/v1/chat/completions: 400 context_length_exceeded in OpenAI's words, also when the engine refuses it", async () => {
    const engine = {
      maxContextTokens: CONTEXT,
      reject: (r: { prompt: string }) =>
        r.prompt.includes("pool") ? new EngineRejection("does not fit the KV pool", "prompt_too_long") : null,
    };
    await withServer(engine, {}, async (t) => {
      const body = await expectJson(await t.post("/v1/chat/completions", { messages: LONG }), 400);
      assert.deepEqual(body, OPENAI_OVERFLOW);
      const streamed = await t.post("/v1/chat/completions", { messages: LONG, stream: true });
      assert.deepEqual(await expectJson(streamed, 400), OPENAI_OVERFLOW, "refused before the stream starts");
      const refused = await t.post("/v1/chat/completions", {
        messages: [{ role: "user", content: "fill the pool" }],
      });
      assert.deepEqual((await expectJson(refused, 400)).error.code, "context_length_exceeded");
    });
  });

  test("/v1/completions: the same refusal, naming the prompt", async () => {
    await withServer({ maxContextTokens: CONTEXT }, {}, async (t) => {
      for (const stream of [false, true]) {
        const body = await expectJson(
          await t.post("/v1/completions", { prompt: "word ".repeat(80), stream }),
          400,
        );
        assert.equal(body.error.code, "context_length_exceeded");
        assert.equal(body.error.param, "prompt");
        assert.match(
          body.error.message,
          /^This model's maximum context length is 50 tokens\. However, your prompt resulted in \d+ tokens\. Please reduce the length of the prompt\.$/,
        );
      }
    });
  });

  test("/v1/messages: 400 invalid_request_error `prompt is too long: N tokens > M maximum`, streamed or not", async () => {
    await withServer({ maxContextTokens: CONTEXT }, {}, async (t) => {
      const expected = {
        type: "error",
        error: {
          type: "invalid_request_error",
          message: `prompt is too long: ${PROMPT_TOKENS} tokens > ${CONTEXT - 1} maximum`,
        },
      };
      for (const stream of [false, true]) {
        const response = await t.post("/v1/messages?beta=true", {
          max_tokens: 32000,
          messages: LONG,
          stream,
        });
        assert.deepEqual(await expectJson(response, 400), expected);
      }
    });
  });

  test("/v1/responses: a 400 context_length_exceeded, or streamed, response.created then response.failed", async () => {
    await withServer({ maxContextTokens: CONTEXT }, {}, async (t) => {
      const input = LONG[0]?.content;
      assert.deepEqual(await expectJson(await t.post("/v1/responses", { input }), 400), RESPONSES_OVERFLOW);
      const streamed = await t.post("/v1/responses", { input, stream: true });
      assert.equal(streamed.status, 200);
      const events = (await streamed.text())
        .split("\n\n")
        .filter((frame) => frame.length > 0)
        .map((frame) => JSON.parse(frame.split("\n")[1]!.slice("data: ".length)) as Json);
      assert.deepEqual(
        events.map((e) => [e.type, e.sequence_number, e.response.status]),
        [
          ["response.created", 0, "in_progress"],
          ["response.failed", 1, "failed"],
        ],
      );
      assert.deepEqual(events[1].response.error, {
        code: "context_length_exceeded",
        message: RESPONSES_OVERFLOW.error.message,
      });
    });
  });
});
