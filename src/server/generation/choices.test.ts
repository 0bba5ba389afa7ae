/**
 * `n` choices of one request (best-of-n sampling, an RL group of rollouts): each a generation of the same
 * prompt, numbered as OpenAI numbers them, streamed choice after choice, usage over all of them.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import OpenAI from "openai";
import { createFakeEngine } from "../../engine/test-support/fake-model-runner.js";
import { startServer } from "../server.js";
import { type Json, withServer } from "../test-support/test-server.js";

async function withEngineServer(
  fn: (openai: OpenAI, url: string, engine: ReturnType<typeof createFakeEngine>) => Promise<void>,
): Promise<void> {
  const engine = createFakeEngine({ reply: () => "four words of reply", kvCells: 8192 });
  const server = await startServer({ engine, host: "127.0.0.1", port: 0, logError: () => {} });
  try {
    await fn(new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0 }), server.url, engine);
  } finally {
    await server.close({ drainTimeoutMs: 2_000 });
  }
}

const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Say it." }];

describe("n choices", () => {
  test("chat: n choices, each with its own logprobs and token ids; usage over all of them", async () => {
    await withEngineServer(async (openai) => {
      const one = await openai.chat.completions.create({ model: "continuum-fake", messages });
      const response = await openai.chat.completions.create({
        model: "continuum-fake",
        messages,
        n: 3,
        logprobs: true,
        // @ts-expect-error vLLM's field
        return_token_ids: true,
      });
      assert.deepEqual(
        response.choices.map((c) => [c.index, c.message.content, c.finish_reason]),
        [0, 1, 2].map((i) => [i, "four words of reply", "stop"]),
      );
      for (const choice of response.choices) {
        assert.equal(choice.logprobs!.content!.length, (choice as unknown as Json).token_ids.length);
      }
      const usage = response.usage!;
      assert.equal(usage.prompt_tokens, 3 * one.usage!.prompt_tokens, "each choice's prompt is counted");
      assert.equal(usage.completion_tokens, 3 * one.usage!.completion_tokens);
      assert.ok(usage.prompt_tokens_details!.cached_tokens! > 0, "the choices share the prompt's KV");
    });
  });

  test("chat streaming: every choice's chunks, its index on each, one usage chunk and one [DONE]", async () => {
    await withEngineServer(async (openai) => {
      const stream = await openai.chat.completions.create({
        model: "continuum-fake",
        messages,
        n: 2,
        stream: true,
        stream_options: { include_usage: true },
      });
      const text = ["", ""];
      const finishes: (string | null)[] = [];
      let usageChunks = 0;
      for await (const chunk of stream) {
        if (chunk.usage) usageChunks++;
        for (const choice of chunk.choices) {
          text[choice.index] += choice.delta.content ?? "";
          if (choice.finish_reason) finishes.push(`${choice.index}:${choice.finish_reason}`);
        }
      }
      assert.deepEqual(text, ["four words of reply", "four words of reply"]);
      assert.deepEqual(finishes, ["0:stop", "1:stop"]);
      assert.equal(usageChunks, 1);
    });
  });

  test("chat streaming with return_token_ids: each choice's ids, the shared prompt's once", async () => {
    await withEngineServer(async (_openai, url) => {
      const response = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          model: "continuum-fake",
          messages,
          n: 2,
          stream: true,
          return_token_ids: true,
        }),
      });
      const chunks = (await response.text())
        .split("\n")
        .filter((line) => line.startsWith("data: {"))
        .map((line) => JSON.parse(line.slice(6)) as Json);
      assert.equal(chunks.filter((c) => c.prompt_token_ids).length, 1);
      for (const index of [0, 1]) {
        const ids = chunks.flatMap((c) =>
          c.choices.filter((ch: Json) => ch.index === index).flatMap((ch: Json) => ch.token_ids ?? []),
        );
        assert.equal(String.fromCodePoint(...ids.slice(0, -1)), "four words of reply");
      }
    });
  });

  test("completions: n per prompt, prompt by prompt; n above the limit is a 400", async () => {
    await withEngineServer(async (openai, url) => {
      const prompt = "<|im_start|>user\nSay it.<|im_end|>\n<|im_start|>assistant\n";
      const response = await openai.completions.create({
        model: "continuum-fake",
        prompt: [prompt, `${prompt}four`],
        n: 2,
        echo: true,
        max_tokens: 4,
      });
      const texts = response.choices.map((c) => c.text);
      assert.deepEqual(
        response.choices.map((c) => c.index),
        [0, 1, 2, 3],
      );
      assert.equal(texts[0], `${prompt}four`);
      assert.equal(texts[1], texts[0]);
      assert.ok(
        texts[2]!.startsWith(`${prompt}four`) && texts[2] !== texts[0],
        "the second prompt's choices",
      );
      assert.equal(texts[3], texts[2]);
      const refused = await fetch(`${url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "continuum-fake", prompt, n: 65 }),
      });
      assert.equal(refused.status, 400);
    });
  });

  test("in a program, the first choice is its turn and the others one-offs beside it", async () => {
    await withEngineServer(async (_openai, url, engine) => {
      const response = await fetch(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "continuum-fake", messages, n: 3, job_id: "agent-7" }),
      });
      assert.equal(((await response.json()) as Json).choices.length, 3);
      const programs = engine.snapshot().programs;
      assert.deepEqual(
        programs.map((p) => [p.id, p.turns]),
        [["agent-7", 1]],
      );
    });
  });

  test("request ids: the client's names the first choice, the others it with their index", async () => {
    await withServer({}, {}, async (t) => {
      await (await t.post("/v1/chat/completions", { messages, n: 3 }, { "x-request-id": "abc" })).json();
      const prompt = "Once";
      await (
        await t.post("/v1/completions", { prompt: [prompt, prompt], n: 2 }, { "x-request-id": "xyz" })
      ).json();
      assert.deepEqual(t.engine.requests.map((r) => r.requestId).sort(), [
        "abc",
        "abc-1",
        "abc-2",
        "xyz",
        "xyz-1",
        "xyz-2",
        "xyz-3",
      ]);
    });
  });

  test("a seeded request's choices draw with the seed, the seed + 1, ...", async () => {
    await withServer({}, {}, async (t) => {
      await (await t.post("/v1/chat/completions", { messages, n: 3, seed: 10, temperature: 1 })).json();
      assert.deepEqual(t.engine.requests.map((r) => r.sampling.seed).sort(), [10, 11, 12]);
      await (await t.post("/v1/chat/completions", { messages, n: 2, temperature: 1 })).json();
      assert.deepEqual(
        t.engine.requests.slice(3).map((r) => r.sampling.seed),
        [null, null],
      );
    });
  });
});
