import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createFakeEngine } from "../../engine/test-support/fake-model-runner.js";
import { startServer } from "../server.js";
import { qwen3ChatTemplate } from "../test-support/llama-templates.js";
import { type Json, type TestServer, withServer } from "../test-support/test-server.js";

const TOOLS = [
  {
    type: "function",
    function: {
      name: "bash",
      description: "Run a command",
      parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
    },
  },
];

/** An agent's chat: a tool call the model made and its result, then the next question. */
const AGENT_CHAT = [
  { role: "system", content: "You are an agent." },
  { role: "user", content: "List the files." },
  {
    role: "assistant",
    content: null,
    tool_calls: [
      { id: "call_1", type: "function", function: { name: "bash", arguments: '{"command":"ls"}' } },
    ],
  },
  { role: "tool", tool_call_id: "call_1", content: "README.md\nsrc" },
  { role: "user", content: "And now?" },
];

async function json(response: Response, status = 200): Promise<Json> {
  const body = (await response.json()) as Json;
  assert.equal(response.status, status, JSON.stringify(body));
  return body;
}

async function chatPromptTokens(post: TestServer["post"], extra: Record<string, unknown>): Promise<number> {
  const chat = await json(await post("/v1/chat/completions", { max_tokens: 8, ...extra }));
  return chat.usage.prompt_tokens;
}

describe("POST /tokenize and /detokenize (fake engine)", () => {
  test("a prompt's tokens come back as its text from /detokenize, as vLLM's `prompt` and llama-server's `content`", async () => {
    await withServer({ maxContextTokens: 2048 }, {}, async (t) => {
      const prompt = "Hello  big\nworld ";
      const tokenized = await json(await t.post("/tokenize", { model: "fake-model", prompt }));
      assert.equal(tokenized.count, 3);
      assert.equal(tokenized.tokens.length, 3);
      assert.equal(tokenized.max_model_len, 2048);
      assert.equal(tokenized.token_strs, null);
      const detokenized = await json(await t.post("/detokenize", { tokens: tokenized.tokens }));
      assert.deepEqual(detokenized, { prompt, content: prompt });
    });
  });

  test("a chat's count is the prompt_tokens a chat completion of the same messages and tools reports", async () => {
    await withServer({}, {}, async (t) => {
      const chat = { messages: AGENT_CHAT, tools: TOOLS };
      const tokenized = await json(await t.post("/tokenize", chat));
      assert.equal(tokenized.count, await chatPromptTokens(t.post, chat));
      assert.equal(tokenized.tokens.length, tokenized.count);
      // the generation prompt `<|im_start|>assistant\n` is one word of the fake engine's
      const withoutPrompt = await json(await t.post("/tokenize", { ...chat, add_generation_prompt: false }));
      assert.equal(withoutPrompt.count, tokenized.count - 1);
    });
  });

  test("a chat rendered by the model's Jinja template (Qwen3) counts as its chat completion does", async () => {
    await withServer({ chatTemplate: qwen3ChatTemplate() }, {}, async (t) => {
      const chat = { messages: AGENT_CHAT, tools: TOOLS, chat_template_kwargs: { enable_thinking: false } };
      const tokenized = await json(await t.post("/tokenize", chat));
      assert.equal(tokenized.count, await chatPromptTokens(t.post, chat));
      const thinking = await json(await t.post("/tokenize", { ...chat, chat_template_kwargs: {} }));
      assert.ok(thinking.count < tokenized.count, "enable_thinking: false closes an empty think block");
      const history = await json(await t.post("/tokenize", { ...chat, add_generation_prompt: false }));
      assert.ok(history.count < thinking.count, "no `<|im_start|>assistant` to answer after");
    });
  });

  test("return_token_strs gives one string per token, the prompt's text when joined", async () => {
    await withServer({}, {}, async (t) => {
      const prompt = "one two  three\tfour";
      const body = await json(await t.post("/tokenize", { prompt, return_token_strs: true }));
      assert.equal(body.token_strs.length, body.tokens.length);
      assert.deepEqual(body.token_strs, ["one", " two", "  three", "\tfour"]);
    });
  });

  test("llama-server's `content` is answered in its shape: ids, or {id, piece} with with_pieces", async () => {
    await withServer({}, {}, async (t) => {
      const content = "alpha beta";
      const vllm = await json(await t.post("/tokenize", { prompt: content, add_special_tokens: false }));
      const plain = await json(await t.post("/tokenize", { content }));
      assert.deepEqual(plain, { tokens: vllm.tokens });
      const pieces = await json(
        await t.post("/tokenize", { content, add_special: false, parse_special: true, with_pieces: true }),
      );
      assert.deepEqual(pieces, {
        tokens: [
          { id: vllm.tokens[0], piece: "alpha" },
          { id: vllm.tokens[1], piece: " beta" },
        ],
      });
      const refused = await json(await t.post("/tokenize", { content, parse_special: false }), 400);
      assert.equal(refused.error.param, "parse_special");
    });
  });

  test("a token id outside the vocabulary is a 400 naming it", async () => {
    await withServer({}, {}, async (t) => {
      for (const [tokens, named] of [
        [[0, 32000], "tokens[1] is 32000"],
        [[-1], "tokens[0] is -1"],
      ] as const) {
        const body = await json(await t.post("/detokenize", { tokens }), 400);
        assert.match(body.error.message, new RegExp(`^${named.replace(/[[\]]/g, "\\$&")}, not a token id`));
        assert.equal(body.error.param, "tokens");
      }
      const fraction = await json(await t.post("/detokenize", { tokens: [1.5] }), 400);
      assert.equal(fraction.error.param, "tokens[0]");
    });
  });

  test("an unknown model is the 404 the other endpoints give", async () => {
    await withServer({}, {}, async (t) => {
      const model = "gpt-9";
      const chat = await json(
        await t.post("/v1/chat/completions", { model, messages: [{ role: "user", content: "hi" }] }),
        404,
      );
      assert.equal(chat.error.code, "model_not_found");
      for (const [path, body] of [
        ["/tokenize", { model, prompt: "hi" }],
        ["/tokenize", { model, messages: [{ role: "user", content: "hi" }] }],
        ["/tokenize", { model, content: "hi" }],
        ["/detokenize", { model, tokens: [] }],
      ] as const) {
        assert.deepEqual(await json(await t.post(path, body), 404), chat, path);
      }
    });
  });

  test("what cannot be tokenized as asked is a 400 that says why", async () => {
    await withServer({}, {}, async (t) => {
      const messages = [{ role: "user", content: "hi" }];
      const cases: [Record<string, unknown>, RegExp][] = [
        [{}, /as `prompt` \(vLLM\), a chat as `messages` \(vLLM\), or the text as `content`/],
        [{ prompt: "a", content: "a" }, /not `prompt` and `content`/],
        [{ messages, continue_final_message: true, add_generation_prompt: false }, /continue_final_message/],
        [{ messages, add_special_tokens: true }, /would add them twice/],
        [{ messages, chat_template: "{{ messages }}" }, /chat_template is not supported/],
      ];
      for (const [body, message] of cases) {
        const error = await json(await t.post("/tokenize", body), 400);
        assert.match(error.error.message, message, JSON.stringify(body));
      }
    });
  });
});

describe("POST /tokenize and /detokenize (the engine over the fake runner)", () => {
  test("the engine's tokenizer: a chat's count is its prompt_tokens, and tokens round-trip", async () => {
    const engine = createFakeEngine({ kvCells: 4096 });
    const server = await startServer({ engine, host: "127.0.0.1", port: 0, logError: () => {} });
    const post = (path: string, body: unknown) =>
      fetch(`${server.url}${path}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
      });
    try {
      const chat = { messages: AGENT_CHAT, tools: TOOLS };
      const tokenized = await json(await post("/tokenize", { ...chat, return_token_strs: true }));
      assert.equal(tokenized.count, await chatPromptTokens(post, chat));
      assert.equal(tokenized.max_model_len, engine.maxContextTokens);
      const detokenized = await json(await post("/detokenize", { tokens: tokenized.tokens }));
      assert.equal(detokenized.prompt, tokenized.token_strs.join(""));
      assert.match(detokenized.prompt, /<\|im_start\|>assistant\n$/);
      const text = "naïve café ✓";
      const prompt = await json(await post("/tokenize", { prompt: text }));
      assert.equal((await json(await post("/detokenize", { tokens: prompt.tokens }))).content, text);
      const bad = await json(await post("/detokenize", { tokens: [engine.vocabSize] }), 400);
      assert.match(bad.error.message, new RegExp(`tokens\\[0\\] is ${engine.vocabSize}`));
    } finally {
      await server.close({ drainTimeoutMs: 2_000 });
    }
  });
});
