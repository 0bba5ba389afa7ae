/** vLLM's stop_token_ids through the server and the real engine (fake runner: tokens are code points). */
import assert from "node:assert/strict";
import { test } from "node:test";
import { createFakeEngine } from "../../engine/test-support/fake-model-runner.js";
import { startServer } from "../server.js";
import type { Json } from "../test-support/test-server.js";

test("stop_token_ids end the output before the token, as the end of generation does, ignore_eos or not", async () => {
  const engine = createFakeEngine({ reply: () => "four words of reply", kvCells: 8192 });
  const server = await startServer({ engine, host: "127.0.0.1", port: 0, logError: () => {} });
  const chat = async (extra: Record<string, unknown>) => {
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Say it." }], max_tokens: 40, ...extra }),
    });
    return { status: response.status, body: (await response.json()) as Json };
  };
  try {
    const w = "w".codePointAt(0)!;
    for (const extra of [{}, { ignore_eos: true }]) {
      const { body } = await chat({ stop_token_ids: [w], ...extra });
      assert.equal(body.choices[0].message.content, "four ");
      assert.equal(body.choices[0].finish_reason, "stop");
      assert.equal(body.usage.completion_tokens, 6, "the stop token was sampled");
    }
    const refused = await chat({ stop_token_ids: [0x110001] });
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.param, "stop_token_ids");
  } finally {
    await server.close({ drainTimeoutMs: 2_000 });
  }
});
