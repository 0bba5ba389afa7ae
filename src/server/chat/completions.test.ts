/** Non-streaming responses of /v1/chat/completions and /v1/completions, sampling and grammars, /v1/models. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { chat, expectError } from "../test-support/openai-requests.js";
import { type Json, sseEvents, withServer } from "../test-support/test-server.js";

describe("responses", () => {
  test("chat completion: message, finish_reason, usage with cached_tokens", async () => {
    await withServer({ reply: () => "four words of output" }, {}, async (t) => {
      const first = await t.post("/v1/chat/completions", chat({ job_id: "job-1" }));
      assert.equal(first.status, 200);
      const body = (await first.json()) as Json;
      assert.equal(body["object"], "chat.completion");
      assert.match(body["id"], /^chatcmpl-/);
      assert.equal(body["model"], "fake-model");
      assert.deepEqual(body["choices"][0].message, { role: "assistant", content: "four words of output" });
      assert.equal(body["choices"][0].finish_reason, "stop");
      const usage = body["usage"];
      assert.equal(usage.completion_tokens, 4);
      assert.equal(usage.total_tokens, usage.prompt_tokens + 4);
      assert.deepEqual(usage.prompt_tokens_details, { cached_tokens: 0 });

      // The next turn of the program repeats the whole history: the fake engine reuses it.
      const second = await t.post("/v1/chat/completions", {
        job_id: "job-1",
        messages: [
          { role: "user", content: "hi" },
          { role: "assistant", content: "four words of output" },
          { role: "user", content: "more" },
        ],
      });
      const usage2 = ((await second.json()) as Json)["usage"];
      assert.ok(usage2.prompt_tokens_details.cached_tokens > 0);
      assert.ok(usage2.prompt_tokens_details.cached_tokens < usage2.prompt_tokens);
    });
  });

  test("sampling parameters reach the engine", async () => {
    await withServer({}, {}, async (t) => {
      const response = await t.post(
        "/v1/chat/completions",
        chat({
          temperature: 0.2,
          top_p: 0.9,
          top_k: -1,
          min_p: 0.05,
          seed: 7,
          presence_penalty: 0.5,
          frequency_penalty: -0.25,
          repetition_penalty: 1.1,
          stop: "END",
          max_completion_tokens: 9,
        }),
      );
      await response.json();
      const s = t.engine.requests[0]!.sampling;
      assert.deepEqual(
        { ...s },
        {
          temperature: 0.2,
          topP: 0.9,
          topK: 0,
          minP: 0.05,
          presencePenalty: 0.5,
          frequencyPenalty: -0.25,
          repetitionPenalty: 1.1,
          seed: 7,
          maxTokens: 9,
          stop: ["END"],
          grammar: null,
          ignoreEos: false,
          minTokens: 0,
          logprobs: null,
        },
      );
      await (await t.post("/v1/chat/completions", chat({ logprobs: true, top_logprobs: 3 }))).json();
      assert.equal(t.engine.requests[1]!.sampling.logprobs, 3);
      await (await t.post("/v1/chat/completions", chat({ stop: ["a", "b"], ignore_eos: true }))).json();
      assert.deepEqual(t.engine.requests[2]!.sampling.stop, ["a", "b"]);
      assert.equal(t.engine.requests[2]!.sampling.ignoreEos, true);
      const promptTokens = t.engine.countTokens(t.engine.requests[2]!.prompt);
      assert.equal(
        t.engine.requests[2]!.sampling.maxTokens,
        t.engine.maxContextTokens - promptTokens,
        "default: the rest",
      );
    });
  });

  test("response_format json_object and json_schema become grammars", async () => {
    await withServer({ reply: () => '{"a": 1}' }, {}, async (t) => {
      await (await t.post("/v1/chat/completions", chat({ response_format: { type: "json_object" } }))).json();
      assert.match(t.engine.requests[0]!.sampling.grammar ?? "", /^root ::= object$/m);
      const schema = { type: "object", properties: { a: { type: "integer" } }, required: ["a"] };
      await (
        await t.post(
          "/v1/chat/completions",
          chat({ response_format: { type: "json_schema", json_schema: { name: "x", schema } } }),
        )
      ).json();
      assert.match(t.engine.requests[1]!.sampling.grammar ?? "", /"\\"a\\"" ws ":" ws integer ws/);
      const bad = { type: "json_schema", json_schema: { name: "x", schema: { $ref: "#/nowhere" } } };
      await expectError(await t.post("/v1/chat/completions", chat({ response_format: bad })), 400);
    });
  });

  test("a JSON-schema pattern is enforced by the grammar, or refused with a 400 naming it", async () => {
    await withServer({ reply: () => '"AB-12"' }, {}, async (t) => {
      const schemaWith = (pattern: string) => ({
        type: "object",
        properties: { code: { type: "string", pattern } },
        required: ["code"],
      });
      const format = (pattern: string) => ({
        response_format: { type: "json_schema", json_schema: { name: "x", schema: schemaWith(pattern) } },
      });
      await (await t.post("/v1/chat/completions", chat(format("^[A-Z]{2}-\\d+$")))).json();
      assert.match(t.engine.requests[0]!.sampling.grammar ?? "", /\[A-Z\]\{2,2\} "-" \[0-9\]\+/);

      const refused = await expectError(
        await t.post("/v1/chat/completions", chat(format("^(?!admin)\\w+$"))),
        400,
        "response_format.json_schema.schema",
      );
      assert.equal(refused.error.type, "invalid_request_error");
      assert.match(refused.error.message, /code: pattern "\^\(\?!admin\)\\\\w\+\$" cannot be enforced/);

      const tool = { type: "function", function: { name: "lookup", parameters: schemaWith("(a)\\1") } };
      const forced = await expectError(
        await t.post("/v1/chat/completions", chat({ tools: [tool], tool_choice: "required" })),
        400,
        "tools",
      );
      assert.match(forced.error.message, /code: pattern "\(a\)\\\\1" cannot be enforced/);
      assert.equal(t.engine.requests.length, 1, "a refused request never reaches the engine");
    });
  });

  test("/v1/completions: a list of prompts (text or token ids) gets one choice per prompt, in order", async () => {
    await withServer({ reply: (r) => ` re:${r.promptTokenIds?.join(",") ?? r.prompt}` }, {}, async (t) => {
      const texts = (await (await t.post("/v1/completions", { prompt: ["one", "two"] })).json()) as Json;
      assert.deepEqual(
        texts.choices.map((c: Json) => [c.index, c.text]),
        [
          [0, " re:one"],
          [1, " re:two"],
        ],
      );
      assert.equal(texts.usage.prompt_tokens, 2);
      const ids = (await (await t.post("/v1/completions", { prompt: [[1, 2, 3], [7]] })).json()) as Json;
      assert.deepEqual(
        ids.choices.map((c: Json) => c.text),
        [" re:1,2,3", " re:7"],
      );
      const single = (await (await t.post("/v1/completions", { prompt: [5, 6] })).json()) as Json;
      assert.deepEqual(
        single.choices.map((c: Json) => c.text),
        [" re:5,6"],
      );

      const raw = await (await t.post("/v1/completions", { prompt: ["a", "b"], stream: true })).text();
      const chunks = sseEvents(raw)
        .slice(0, -1)
        .map((e) => (JSON.parse(e) as Json).choices[0]);
      for (const index of [0, 1]) {
        const own = chunks.filter((c: Json) => c.index === index);
        assert.equal(own.map((c: Json) => c.text).join(""), ` re:${index === 0 ? "a" : "b"}`);
        assert.equal(own.at(-1).finish_reason, "stop");
      }

      const bad = await expectError(
        await t.post("/v1/completions", { prompt: [[1], [2, 40000]] }),
        400,
        "prompt",
      );
      assert.match(bad.error.message, /prompt\[1\]\[1\] is 40000, not a token id of this model/);
      await expectError(await t.post("/v1/completions", { prompt: [1, -2] }), 400, "prompt");
      await expectError(await t.post("/v1/completions", { prompt: [1.5] }), 400);
      const before = t.engine.requests.length;
      await expectError(await t.post("/v1/completions", { prompt: [[1], [99999]] }), 400, "prompt");
      assert.equal(t.engine.requests.length, before, "a bad id in any prompt queues none of them");
    });
  });

  test("text completion, echo, and /v1/models", async () => {
    await withServer({ reply: () => " world" }, {}, async (t) => {
      const response = await t.post("/v1/completions", { model: "fake-model", prompt: "hello", echo: true });
      const body = (await response.json()) as Json;
      assert.equal(body["object"], "text_completion");
      assert.equal(body["choices"][0].text, "hello world");
      assert.equal(body["usage"].prompt_tokens, 1);
      assert.equal(t.engine.requests[0]!.prompt, "hello");
      const models = (await (await fetch(`${t.url}/v1/models`)).json()) as Json;
      assert.equal(models["data"][0].id, "fake-model");
      assert.equal(models["data"][0].max_model_len, 4096);
      assert.equal((await fetch(`${t.url}/health`)).status, 200);
    });
  });
});

describe("robustness", () => {
  test("GET /v1/models/{id}: the served model, or a 404 naming what is served", async () => {
    await withServer({}, { servedModelNames: ["alias/with-slash"] }, async (t) => {
      const models = (await (await fetch(`${t.url}/v1/models`)).json()) as Json;
      const id = models.data[0].id as string;
      const one = (await (await fetch(`${t.url}/v1/models/${id}`)).json()) as Json;
      assert.deepEqual({ ...one, created: 0 }, { ...models.data[0], created: 0 });
      assert.equal(
        ((await (await fetch(`${t.url}/v1/models/alias/with-slash`)).json()) as Json).id,
        "alias/with-slash",
      );
      const missing = await expectError(await fetch(`${t.url}/v1/models/gpt-9`), 404, "model");
      assert.equal(missing.error.code, "model_not_found");
    });
  });
});
