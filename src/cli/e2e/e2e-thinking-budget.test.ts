/**
 * A thinking budget on the real engine (built-in tiny model served with DeepSeek-R1's template, whose prompt
 * opens the thinking block): the tiny model never closes it by itself, so without a budget all of its output
 * is thinking; with one, the engine writes the close once the budget is spent and the model answers after it.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { llamaTemplate } from "../../server/test-support/llama-templates.js";
import { startLlamaServer } from "../test-support/llama-server.js";

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field
type Json = any;

test("thinking_budget: the engine closes the thinking after the budget and the model answers", {
  skip: llamaSkip,
}, async () => {
  const dir = await mkdtemp(join(tmpdir(), "continuum-think-"));
  const template = join(dir, "r1.jinja");
  await writeFile(template, llamaTemplate("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B"));
  const s = await startLlamaServer(["--chat-template", template]);
  try {
    const chat = async (extra: object) => {
      const response = await fetch(`${s.server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: "Bearer unused" },
        body: JSON.stringify({
          model: s.model,
          messages: [{ role: "user", content: "Think, then answer." }],
          chat_template_kwargs: { enable_thinking: true },
          max_tokens: 40,
          temperature: 0,
          ignore_eos: true,
          ...extra,
        }),
      });
      return ((await response.json()) as Json).choices[0].message;
    };
    const unbounded = await chat({});
    assert.ok(unbounded.reasoning_content.length > 0);
    assert.equal(unbounded.content, "", "the tiny model never closes its thinking");
    const budgeted = await chat({ thinking_budget: 6 });
    const thinkingTokens = s.engine.runner.tokenizeContinuation(budgeted.reasoning_content).length;
    assert.ok(thinkingTokens <= 7, `${thinkingTokens} tokens of thinking for a budget of 6`);
    assert.ok(budgeted.content.length > 0, "an answer after the close the engine wrote");
    assert.ok(
      unbounded.reasoning_content.startsWith(budgeted.reasoning_content),
      "the same greedy thinking, cut",
    );
  } finally {
    await s.close();
    await rm(dir, { recursive: true, force: true });
  }
});
