/**
 * Logprobs through the server and the real engine (fake runner, whose distribution is known: the sampled
 * token 1/2, the next code points 1/4, 1/8, ...), read with the openai SDK as an RL rollout would.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import OpenAI from "openai";
import { createFakeEngine } from "../../engine/test-support/fake-model-runner.js";
import { startServer } from "../server.js";

const REPLY = "héllo wörld, the END of it";

async function withServer(fn: (openai: OpenAI, url: string) => Promise<void>): Promise<void> {
  const engine = createFakeEngine({ reply: () => REPLY, kvCells: 8192 });
  const server = await startServer({ engine, host: "127.0.0.1", port: 0, logError: () => {} });
  try {
    await fn(new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "x", maxRetries: 0 }), server.url);
  } finally {
    await server.close({ drainTimeoutMs: 2_000 });
  }
}

const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Say it." }];

// biome-ignore lint/suspicious/noExplicitAny: response bodies are read field by field
type Json = any;

/** The JSON of each `data:` frame of an SSE body, without the closing [DONE]. */
function sseChunks(text: string): Json[] {
  return text
    .split("\n")
    .filter((line) => line.startsWith("data: ") && line !== "data: [DONE]")
    .map((line) => JSON.parse(line.slice(6)));
}

async function post(url: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

describe("logprobs", () => {
  test("chat: one entry per generated token, the end of generation last, with top_logprobs", async () => {
    await withServer(async (openai) => {
      const response = await openai.chat.completions.create({
        model: "continuum-fake",
        messages,
        logprobs: true,
        top_logprobs: 3,
      });
      const choice = response.choices[0]!;
      assert.equal(choice.message.content, REPLY);
      const content = choice.logprobs!.content!;
      // every code point is a token, then the end-of-generation token (no text)
      assert.equal(content.length, [...REPLY].length + 1);
      assert.equal(response.usage!.completion_tokens, content.length);
      assert.equal(content.map((e) => e.token).join(""), REPLY);
      assert.equal(content.at(-1)!.token, "");
      for (const entry of content) {
        assert.ok(Math.abs(entry.logprob - Math.log(0.5)) < 1e-9);
        assert.deepEqual(entry.bytes, [...Buffer.from(entry.token, "utf8")]);
        assert.deepEqual(
          entry.top_logprobs.map((t) => t.logprob),
          [Math.log(1 / 2), Math.log(1 / 4), Math.log(1 / 8)],
        );
        assert.equal(entry.top_logprobs[0]!.token, entry.token);
      }
      const plain = await openai.chat.completions.create({ model: "continuum-fake", messages });
      assert.equal(plain.choices[0]!.logprobs, null);
    });
  });

  test("chat streaming: each chunk carries its own text's tokens; a stop string's come last", async () => {
    await withServer(async (openai) => {
      const stream = await openai.chat.completions.create({
        model: "continuum-fake",
        messages,
        logprobs: true,
        stream: true,
        stop: [" END"],
      });
      let text = "";
      const carried: { piece: string; tokens: string }[] = [];
      for await (const chunk of stream) {
        const choice = chunk.choices[0];
        if (!choice) continue;
        const piece = choice.delta.content ?? "";
        const entries = choice.logprobs?.content ?? [];
        if (entries.length > 0) carried.push({ piece, tokens: entries.map((e) => e.token).join("") });
        text += piece;
        for (const e of entries) assert.deepEqual(e.top_logprobs, []);
      }
      assert.equal(text, "héllo wörld, the");
      for (const { piece, tokens } of carried.slice(0, -1)) {
        assert.equal(tokens, piece, "a chunk's tokens spell its text");
      }
      // the stop string's tokens were sampled: their entries come with the last chunk
      assert.equal(carried.at(-1)!.tokens, " END");
      assert.equal(carried.map((c) => c.tokens).join(""), "héllo wörld, the END");
    });
  });

  test("completions: tokens, token_logprobs, top_logprobs with the sampled token, text_offset", async () => {
    await withServer(async (openai, url) => {
      const response = await openai.completions.create({
        model: "continuum-fake",
        prompt: "<|im_start|>user\nSay it.<|im_end|>\n<|im_start|>assistant\n",
        max_tokens: 5,
        logprobs: 2,
      });
      const { tokens, token_logprobs, top_logprobs, text_offset } = response.choices[0]!.logprobs!;
      assert.deepEqual(tokens, ["h", "é", "l", "l", "o"]);
      assert.deepEqual(text_offset, [0, 1, 2, 3, 4]);
      assert.ok(token_logprobs!.every((l) => Math.abs(l - Math.log(0.5)) < 1e-9));
      assert.deepEqual(Object.keys(top_logprobs![0]!), ["h", "i"]);
      // streamed, the offsets go on from chunk to chunk
      const streamed = await post(url, "/v1/completions", {
        model: "continuum-fake",
        prompt: "<|im_start|>user\nSay it.<|im_end|>\n<|im_start|>assistant\n",
        max_tokens: 5,
        logprobs: 0,
        stream: true,
      });
      const offsets: number[] = [];
      const sse = await streamed.text();
      for (const line of sse.split("\n")) {
        if (!line.startsWith("data: {")) continue;
        const choice = JSON.parse(line.slice(6)).choices[0];
        if (choice?.logprobs) offsets.push(...choice.logprobs.text_offset);
      }
      assert.deepEqual(offsets, [0, 1, 2, 3, 4]);
    });
  });

  test("an RL rollout's chat turn: return_token_ids gives the prompt's and the output's ids beside the logprobs, streamed or not", async () => {
    await withServer(async (_openai, url) => {
      const response = await post(url, "/v1/chat/completions", {
        model: "continuum-fake",
        messages,
        logprobs: true,
        return_token_ids: true,
      });
      const body = (await response.json()) as {
        prompt_token_ids: number[];
        choices: { token_ids: number[]; logprobs: { content: unknown[] } }[];
        usage: { prompt_tokens: number; completion_tokens: number };
      };
      const choice = body.choices[0]!;
      assert.equal(body.prompt_token_ids.length, body.usage.prompt_tokens);
      assert.equal(choice.token_ids.length, body.usage.completion_tokens);
      assert.equal(choice.logprobs.content.length, choice.token_ids.length);
      // the fake's tokens are code points: the ids spell the reply, then its end-of-generation token
      assert.equal(String.fromCodePoint(...choice.token_ids.slice(0, -1)), REPLY);
      // streamed (an RL proxy between an agent that streams and the server): each chunk the ids of the
      // tokens its text carries, the first chunk with text the prompt's
      for (const path of ["/v1/chat/completions", "/v1/completions"]) {
        const request = path.endsWith("chat/completions") ? { messages } : { prompt: "Say it." };
        const [whole, streamed] = await Promise.all(
          [false, true].map((stream) =>
            post(url, path, { model: "continuum-fake", ...request, return_token_ids: true, stream }),
          ),
        );
        const expected = (await whole!.json()) as Json;
        const chunks = sseChunks(await streamed!.text());
        const choiceOf = (c: Json) => c.choices[0] ?? {};
        const promptIds = chunks
          .flatMap((c) => [c.prompt_token_ids, choiceOf(c).prompt_token_ids])
          .filter(Boolean);
        assert.deepEqual(
          promptIds,
          [expected.prompt_token_ids ?? expected.choices[0].prompt_token_ids],
          path,
        );
        assert.deepEqual(
          chunks.flatMap((c) => choiceOf(c).token_ids ?? []),
          expected.choices[0].token_ids,
          path,
        );
        // each chunk's ids spell its text (the fake's tokens are code points)
        for (const c of chunks) {
          const text = choiceOf(c).delta?.content ?? choiceOf(c).text ?? "";
          const ids: number[] = choiceOf(c).token_ids ?? [];
          if (text.length > 0) assert.equal(String.fromCodePoint(...ids), text, path);
        }
      }
    });
  });

  test("responses: include message.output_text.logprobs puts the text's tokens on the text, streamed or not", async () => {
    await withServer(async (_openai, url) => {
      const request = {
        model: "continuum-fake",
        input: "Say it.",
        include: ["message.output_text.logprobs"],
        top_logprobs: 2,
      };
      const body = (await (await post(url, "/v1/responses", request)).json()) as {
        output: { content: { text: string; logprobs: { token: string; top_logprobs: unknown[] }[] }[] }[];
      };
      const part = body.output[0]!.content[0]!;
      assert.equal(part.text, REPLY);
      assert.equal(part.logprobs.map((e) => e.token).join(""), REPLY);
      assert.ok(part.logprobs.every((e) => e.top_logprobs.length === 2));
      const plain = (await (
        await post(url, "/v1/responses", { model: "continuum-fake", input: "Say it." })
      ).json()) as {
        output: { content: Record<string, unknown>[] }[];
      };
      assert.equal(plain.output[0]!.content[0]!["logprobs"], undefined);

      const sse = await (await post(url, "/v1/responses", { ...request, stream: true })).text();
      const frames = sse
        .split("\n")
        .filter((line) => line.startsWith("data: "))
        .map((line) => JSON.parse(line.slice(6)) as Record<string, unknown>);
      const deltas = frames.filter((f) => f["type"] === "response.output_text.delta") as {
        delta: string;
        logprobs: { token: string }[];
      }[];
      for (const d of deltas) assert.equal(d.logprobs.map((e) => e.token).join(""), d.delta);
      const done = frames.find((f) => f["type"] === "response.output_text.done") as {
        logprobs: { token: string }[];
      };
      assert.equal(done.logprobs.map((e) => e.token).join(""), REPLY);
    });
  });

  test("completions with echo: the prompt's tokens' logprobs first (the first null), computed whole even when cached", async () => {
    await withServer(async (openai, url) => {
      const prompt = "Say it. ".repeat(40);
      // the prompt's KV is cached by a plain request first: echo with logprobs still computes every position
      await openai.completions.create({ model: "continuum-fake", prompt, max_tokens: 3 });
      const response = (await (
        await post(url, "/v1/completions", {
          model: "continuum-fake",
          prompt,
          max_tokens: 3,
          logprobs: 1,
          echo: true,
        })
      ).json()) as Json;
      const choice = response.choices[0];
      const { tokens, token_logprobs, top_logprobs, text_offset } = choice.logprobs;
      assert.ok(choice.text.startsWith(prompt));
      // the fake's tokens are code points: the prompt's, then the three generated
      assert.equal([...choice.text].length, [...prompt].length + 3);
      assert.deepEqual(tokens, [...choice.text]);
      assert.equal(token_logprobs[0], null);
      assert.equal(top_logprobs[0], null);
      assert.ok(token_logprobs.slice(1).every((l: number) => Math.abs(l - Math.log(0.5)) < 1e-9));
      assert.deepEqual(Object.keys(top_logprobs[1]), ["a"], "the scored token's text, with one alternative");
      assert.deepEqual(
        text_offset,
        [...prompt, "h", "é", "l"].map((_, i) => i),
      );
      assert.equal(response.usage.prompt_tokens_details.cached_tokens, 0, "no cached prefix reused");
      // a token-id prompt (as lm-evaluation-harness sends it) echoes as its text, one entry per id and output token
      const ids = [...prompt].map((ch) => ch.codePointAt(0)!);
      const byIds = (await (
        await post(url, "/v1/completions", {
          model: "continuum-fake",
          prompt: ids,
          max_tokens: 1,
          logprobs: 1,
          echo: true,
        })
      ).json()) as Json;
      assert.ok(byIds.choices[0].text.startsWith(prompt));
      assert.equal(byIds.choices[0].logprobs.token_logprobs.length, ids.length + 1);
    });
  });

  test("vLLM's prompt_logprobs: per prompt token (the first null) its own entry by id, rank and text, then the alternatives", async () => {
    await withServer(async (_openai, url) => {
      const prompt = "Say it. ".repeat(3);
      const completion = (await (
        await post(url, "/v1/completions", {
          model: "continuum-fake",
          prompt,
          max_tokens: 2,
          prompt_logprobs: 1,
        })
      ).json()) as Json;
      const entries = completion.choices[0].prompt_logprobs;
      assert.equal(entries.length, [...prompt].length);
      assert.equal(entries[0], null);
      // the fake's tokens are code points, each the most likely at its position
      for (const [i, entry] of entries.slice(1).entries()) {
        const char = [...prompt][i + 1]!;
        assert.deepEqual(entry, {
          [String(char.codePointAt(0))]: { logprob: Math.log(0.5), rank: 1, decoded_token: char },
        });
      }
      assert.equal(completion.choices[0].text.length > 0, true);
      const chat = (await (
        await post(url, "/v1/chat/completions", { model: "continuum-fake", messages, prompt_logprobs: 0 })
      ).json()) as Json;
      assert.equal(chat.prompt_logprobs.length, chat.usage.prompt_tokens);
      const streamed = await post(url, "/v1/chat/completions", {
        model: "continuum-fake",
        messages,
        prompt_logprobs: 0,
        stream: true,
      });
      assert.equal(streamed.status, 400);
    });
  });

  test("requests the API refuses: top_logprobs without logprobs, more than 20, echo with logprobs streamed", async () => {
    await withServer(async (_openai, url) => {
      const refused = async (path: string, body: Record<string, unknown>, param: string) => {
        const response = await post(url, path, { model: "continuum-fake", ...body });
        assert.equal(response.status, 400);
        assert.equal(((await response.json()) as { error: { param: string } }).error.param, param);
      };
      await refused("/v1/chat/completions", { messages, top_logprobs: 2 }, "top_logprobs");
      await refused("/v1/chat/completions", { messages, logprobs: true, top_logprobs: 21 }, "top_logprobs");
      await refused("/v1/completions", { prompt: "x", logprobs: 21 }, "logprobs");
      await refused("/v1/completions", { prompt: "x", logprobs: 1, echo: true, stream: true }, "echo");
    });
  });
});
