/**
 * cached_tokens is what the engine really reused. A prompt P is served cold, then again (its KV is
 * resident: reused), then distinct prompts push P's llama sequence out of the engine's few sequence
 * slots while the scheduler's block pool (much larger) could still hold P's blocks. The scheduler dropped
 * the sequence itself, so P's third run is planned and reported as computed afresh, and the /metrics
 * counters add up to what the responses said.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import OpenAI from "openai";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { startLlamaServer } from "../test-support/llama-server.js";

const FLAGS = [
  "--scheduling-policy",
  "vllm",
  "--cpu-offload-gb",
  "0",
  "--kv-cache-tokens",
  "8192",
  "--max-num-seqs",
  "1",
  "--max-seq-slots",
  "3",
];

function prompt(topic: string, words: number): string {
  return Array.from({ length: words }, (_, i) => `${topic}${i % 7} item ${i}`).join(" ");
}

describe("cached_tokens after the scheduler dropped a sequence (real engine, tiny model)", {
  skip: llamaSkip,
}, () => {
  test("a returning prompt whose sequence was dropped reports only what was reused; metrics match", async () => {
    const s = await startLlamaServer(FLAGS);
    try {
      const complete = async (text: string) => {
        const response = await s.openai.completions.create({
          model: s.model,
          prompt: text,
          max_tokens: 4,
          temperature: 0,
        });
        const usage = response.usage!;
        return {
          text: response.choices[0]!.text,
          promptTokens: usage.prompt_tokens,
          cachedTokens:
            (usage as { prompt_tokens_details?: { cached_tokens?: number } }).prompt_tokens_details
              ?.cached_tokens ?? 0,
        };
      };
      const P = prompt("alpha", 120);
      const served: { promptTokens: number; cachedTokens: number }[] = [];
      const cold = await complete(P);
      served.push(cold);
      assert.equal(cold.cachedTokens, 0);
      const warm = await complete(P);
      served.push(warm);
      assert.ok(warm.cachedTokens >= warm.promptTokens - 16, `warm: ${JSON.stringify(warm)}`);
      for (let i = 0; i < 4; i++) served.push(await complete(prompt(`other${i}x`, 20)));

      assert.ok(s.engine.kvStats().evictions > 0, "the few sequences pushed P's out");
      const again = await complete(P);
      served.push(again);
      assert.equal(again.cachedTokens, 0, "P's sequence is gone: nothing reported reused");
      assert.equal(again.text, cold.text, "recomputed KV gives the same greedy text");

      const m = await s.metrics();
      const sum = (f: (r: { promptTokens: number; cachedTokens: number }) => number) =>
        served.reduce((a, r) => a + f(r), 0);
      assert.equal(
        m["continuum:prompt_tokens_cached_total"],
        sum((r) => r.cachedTokens),
      );
      assert.equal(
        m["continuum:prefix_cache_hits_total"],
        sum((r) => r.cachedTokens),
      );
      assert.equal(
        m["continuum:prefix_cache_queries_total"],
        sum((r) => r.promptTokens),
      );
    } finally {
      await s.close();
    }
  });

  test("tenants: another API key's cached prompt is never reused, so cached_tokens cannot probe it", async () => {
    const s = await startLlamaServer(
      [...FLAGS, "--max-seq-slots", "4", "--api-key", "key-a", "--api-key", "key-b"],
      {
        apiKey: "key-a",
      },
    );
    try {
      const tenantB = new OpenAI({ baseURL: `${s.server.url}/v1`, apiKey: "key-b", maxRetries: 0 });
      const cached = async (client: OpenAI, text: string, extra: object = {}) => {
        const response = await client.completions.create({
          model: s.model,
          prompt: text,
          max_tokens: 2,
          temperature: 0,
          ...extra,
        });
        return (
          (response.usage as { prompt_tokens_details?: { cached_tokens?: number } }).prompt_tokens_details
            ?.cached_tokens ?? 0
        );
      };
      const secret = (pin: string) =>
        `${prompt("payroll", 40)} the door code is ${pin} ${prompt("tail", 30)}`;
      await cached(s.openai, secret("4721"));
      assert.ok((await cached(s.openai, secret("4721"))) > 0, "A's own repeat reuses its KV");
      // B's first guess finds nothing of A's; later guesses reuse B's own earlier text up to the digits,
      // and the right guess no more than a wrong one.
      assert.equal(await cached(tenantB, secret("1234")), 0);
      const wrong = await cached(tenantB, secret("9999"));
      const right = await cached(tenantB, secret("4721"));
      assert.equal(right, wrong, "B learns nothing from cached_tokens");
      assert.equal(
        await cached(s.openai, secret("4721"), { cache_salt: "user-9" }),
        0,
        "cache_salt scopes reuse",
      );
    } finally {
      await s.close();
    }
  });
});
