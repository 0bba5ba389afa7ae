/**
 * A reply that continues the assistant's last message: vLLM's `continue_final_message` on chat completions
 * and /tokenize, and Anthropic's prefill on /v1/messages (a last message of the assistant's).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { qwen3ChatTemplate } from "../test-support/llama-templates.js";
import { type Json, withServer } from "../test-support/test-server.js";

const question = { role: "user", content: "Name a colour as JSON." };
const prefill = '{"colour": "';

test("continue_final_message: the prompt ends in the assistant's text, not in a closed turn or a new one", async () => {
  await withServer({ reply: () => ['red"}'] }, {}, async (t) => {
    const messages = [question, { role: "assistant", content: prefill }];
    const chat = (await (
      await t.post("/v1/chat/completions", {
        messages,
        continue_final_message: true,
        add_generation_prompt: false,
      })
    ).json()) as Json;
    assert.equal(chat.choices[0].message.content, 'red"}', "the continuation only, as vLLM answers");
    const prompt = t.engine.requests[0]!.prompt;
    assert.ok(prompt.endsWith(`<|im_start|>assistant\n${prefill}`), prompt);
    // without it, the assistant's message is a turn of its own and the reply a new one
    await t.post("/v1/chat/completions", { messages });
    assert.ok(t.engine.requests[1]!.prompt.endsWith(`${prefill}<|im_end|>\n<|im_start|>assistant\n`));
    // /tokenize counts the same prompt
    const tokenized = (await (
      await t.post("/tokenize", { messages, continue_final_message: true, add_generation_prompt: false })
    ).json()) as Json;
    assert.equal(tokenized.count, chat.usage.prompt_tokens);
  });
});

test("continue_final_message through a model's own template (Qwen3's)", async () => {
  await withServer({ chatTemplate: qwen3ChatTemplate(), reply: () => ['red"}'] }, {}, async (t) => {
    const messages = [question, { role: "assistant", content: prefill }];
    const response = await t.post("/v1/chat/completions", { messages, continue_final_message: true });
    assert.equal(response.status, 200);
    const prompt = t.engine.requests[0]!.prompt;
    assert.ok(prompt.endsWith(`${question.content}<|im_end|>\n<|im_start|>assistant\n${prefill}`), prompt);
  });
});

test("continue_final_message that cannot be continued is a 400 that says why", async () => {
  await withServer({}, {}, async (t) => {
    const call = { id: "c1", type: "function", function: { name: "f", arguments: "{}" } };
    const cases: [Record<string, unknown>, string, RegExp][] = [
      [{ messages: [question], continue_final_message: true }, "messages", /assistant's text/],
      [
        {
          messages: [question, { role: "assistant", content: null, tool_calls: [call] }],
          continue_final_message: true,
        },
        "messages",
        /without tool calls/,
      ],
      [
        {
          messages: [question, { role: "assistant", content: prefill }],
          continue_final_message: true,
          add_generation_prompt: true,
        },
        "add_generation_prompt",
        /cannot both be true/,
      ],
    ];
    for (const [body, param, message] of cases) {
      const response = await t.post("/v1/chat/completions", body);
      assert.equal(response.status, 400);
      const { error } = (await response.json()) as Json;
      assert.equal(error.param, param);
      assert.match(error.message, message);
    }
  });
});

test("messages: a last message of the assistant's is a prefill the reply continues, and count_tokens counts it", async () => {
  await withServer({ reply: () => ['red"}'] }, {}, async (t) => {
    const request = { model: "fake-model", messages: [question, { role: "assistant", content: prefill }] };
    const reply = (await (await t.post("/v1/messages", { ...request, max_tokens: 16 })).json()) as Json;
    assert.deepEqual(
      reply.content,
      [{ type: "text", text: 'red"}' }],
      "Anthropic's reply leaves the prefill out",
    );
    assert.ok(t.engine.requests[0]!.prompt.endsWith(`<|im_start|>assistant\n${prefill}`));
    const counted = (await (await t.post("/v1/messages/count_tokens", request)).json()) as Json;
    assert.equal(counted.input_tokens, reply.usage.input_tokens + reply.usage.cache_read_input_tokens);
  });
});
