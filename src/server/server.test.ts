import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { describe, test } from "node:test";
import { EngineRejection } from "../engine/engine-api.js";
import { type Json, sseEvents, withServer } from "./test-support/test-server.js";

const chat = (extra: Record<string, unknown> = {}) => ({
  model: "fake-model",
  messages: [{ role: "user", content: "hi" }],
  ...extra,
});

interface ErrorJson {
  error: { message: string; type: string; param: string | null; code: string | null };
}

async function expectError(response: Response, status: number, param?: string | null): Promise<ErrorJson> {
  assert.equal(response.status, status);
  assert.match(response.headers.get("content-type") ?? "", /application\/json/);
  const body = (await response.json()) as ErrorJson;
  assert.deepEqual(Object.keys(body.error).sort(), ["code", "message", "param", "type"]);
  assert.equal(typeof body.error.message, "string");
  assert.ok(body.error.message.length > 0);
  if (param !== undefined) assert.equal(body.error.param, param);
  return body;
}

describe("validation errors", () => {
  test("bad JSON, wrong types and unsupported values get 400 in OpenAI's error format", async () => {
    await withServer({}, {}, async (t) => {
      const badJson = await expectError(await t.post("/v1/chat/completions", "{not json"), 400, null);
      assert.equal(badJson.error.code, "invalid_json");
      await expectError(await t.post("/v1/chat/completions", ""), 400);
      await expectError(await t.post("/v1/chat/completions", "[1,2]"), 400);
      await expectError(await t.post("/v1/chat/completions", chat({ messages: [] })), 400, "messages");
      await expectError(
        await t.post("/v1/chat/completions", chat({ temperature: "hot" })),
        400,
        "temperature",
      );
      await expectError(await t.post("/v1/chat/completions", chat({ temperature: 3 })), 400, "temperature");
      await expectError(await t.post("/v1/chat/completions", chat({ max_tokens: 0 })), 400, "max_tokens");
      await expectError(await t.post("/v1/chat/completions", chat({ n: 2 })), 400, "n");
      await expectError(await t.post("/v1/chat/completions", chat({ stop: 5 })), 400, "stop");
      await expectError(
        await t.post("/v1/chat/completions", chat({ messages: [{ role: "wizard", content: "x" }] })),
        400,
        "messages[0].role",
      );
      // program fields are known fields: a wrong type is an error, not silently ignored
      await expectError(
        await t.post("/v1/chat/completions", chat({ is_last_step: "yes" })),
        400,
        "is_last_step",
      );
      await expectError(await t.post("/v1/chat/completions", chat({ job_id: { id: 1 } })), 400, "job_id");
      await expectError(await t.post("/v1/chat/completions", chat({}), { "X-Last-Step": "maybe" }), 400);
      await expectError(
        await t.post("/v1/chat/completions", chat({ job_id: "a", program_id: "b" })),
        400,
        "program_id",
      );
      await expectError(
        await t.post(
          "/v1/chat/completions",
          chat({ tool_choice: { type: "function", function: { name: "x" } } }),
        ),
        400,
        "tool_choice",
      );
      await expectError(
        await t.post("/v1/chat/completions", chat({ response_format: { type: "yaml" } })),
        400,
        "response_format.type",
      );
      await expectError(
        await t.post(
          "/v1/chat/completions",
          chat({ messages: [{ role: "user", content: [{ type: "image_url" }] }] }),
        ),
        400,
        "messages[0].content[0]",
      );
      await expectError(await t.post("/v1/completions", { prompt: 42 }), 400, "prompt");
      assert.equal(t.engine.requests.length, 0, "no invalid request reaches the engine");
    });
  });

  test("unknown fields are ignored; unknown models get 404; unknown routes 404", async () => {
    await withServer({}, {}, async (t) => {
      const ok = await t.post(
        "/v1/chat/completions",
        chat({ frobnicate: true, metadata: { a: 1 }, store: false }),
      );
      assert.equal(ok.status, 200);
      await ok.json();
      const wrongModel = await expectError(
        await t.post("/v1/chat/completions", chat({ model: "gpt-9" })),
        404,
      );
      assert.equal(wrongModel.error.code, "model_not_found");
      await expectError(await t.post("/v1/nothing", {}), 404);
    });
  });

  test("a prompt longer than the context is a 400 context_length_exceeded, also when the engine refuses it", async () => {
    await withServer(
      {
        maxContextTokens: 50,
        reject: (r) =>
          r.prompt.includes("pool")
            ? new EngineRejection("does not fit the KV pool", "prompt_too_long")
            : null,
      },
      {},
      async (t) => {
        const long = chat({ messages: [{ role: "user", content: "word ".repeat(80) }] });
        const tooLong = await expectError(await t.post("/v1/chat/completions", long), 400);
        assert.equal(tooLong.error.code, "context_length_exceeded");
        const tooMany = await expectError(
          await t.post("/v1/chat/completions", chat({ max_tokens: 1000 })),
          400,
        );
        assert.equal(tooMany.error.param, "max_tokens");
        const pool = chat({ messages: [{ role: "user", content: "fill the pool" }] });
        const poolError = await expectError(await t.post("/v1/chat/completions", pool), 400);
        assert.equal(poolError.error.code, "context_length_exceeded");
      },
    );
  });

  test("a body over the size limit gets 413", async () => {
    await withServer({}, { maxBodyBytes: 1000 }, async (t) => {
      const big = chat({ messages: [{ role: "user", content: "x".repeat(5000) }] });
      await expectError(await t.post("/v1/chat/completions", big), 413);
    });
  });
});

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
          seed: 7,
          maxTokens: 9,
          stop: ["END"],
          grammar: null,
          ignoreEos: false,
        },
      );
      await (await t.post("/v1/chat/completions", chat({ stop: ["a", "b"], ignore_eos: true }))).json();
      assert.deepEqual(t.engine.requests[1]!.sampling.stop, ["a", "b"]);
      assert.equal(t.engine.requests[1]!.sampling.ignoreEos, true);
      const promptTokens = t.engine.countTokens(t.engine.requests[1]!.prompt);
      assert.equal(
        t.engine.requests[1]!.sampling.maxTokens,
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
      assert.match(bad.error.message, /prompt\[1\]\[1\]: token id 40000 is not in the model's vocabulary/);
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

describe("SSE streaming", () => {
  test("chat chunks: role first, content deltas, finish, usage chunk, [DONE]", async () => {
    await withServer({ reply: () => ["Hel", "lo", " you"] }, {}, async (t) => {
      const response = await t.post(
        "/v1/chat/completions",
        chat({ stream: true, stream_options: { include_usage: true } }),
      );
      assert.equal(response.status, 200);
      assert.match(response.headers.get("content-type") ?? "", /^text\/event-stream/);
      const raw = await response.text();
      assert.ok(raw.endsWith("data: [DONE]\n\n"));
      const events = sseEvents(raw);
      assert.equal(events.at(-1), "[DONE]");
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as Json);
      for (const c of chunks) {
        assert.equal(c["object"], "chat.completion.chunk");
        assert.equal(c["id"], chunks[0]!["id"]);
      }
      assert.deepEqual(chunks[0]!["choices"][0].delta, { role: "assistant", content: "" });
      const text = chunks.map((c) => c["choices"][0]?.delta?.content ?? "").join("");
      assert.equal(text, "Hello you");
      const finish = chunks.at(-2)!;
      assert.equal(finish["choices"][0].finish_reason, "stop");
      assert.equal(finish["usage"], null);
      const usage = chunks.at(-1)!;
      assert.deepEqual(usage["choices"], []);
      assert.equal(usage["usage"].completion_tokens, 2);
      assert.equal(typeof usage["usage"].prompt_tokens_details.cached_tokens, "number");
    });
  });

  test("without include_usage there is no usage field; text completions stream too", async () => {
    await withServer({ reply: () => ["a", "b"] }, {}, async (t) => {
      const events = sseEvents(await (await t.post("/v1/chat/completions", chat({ stream: true }))).text());
      for (const e of events.slice(0, -1)) assert.ok(!("usage" in JSON.parse(e)));
      const text = sseEvents(await (await t.post("/v1/completions", { prompt: "x", stream: true })).text());
      assert.equal(text.at(-1), "[DONE]");
      const parsed = text.slice(0, -1).map((e) => JSON.parse(e) as Json);
      assert.equal(parsed.map((c) => c["choices"][0].text).join(""), "ab");
      assert.equal(parsed.at(-1)!["choices"][0].finish_reason, "stop");
    });
  });

  test("frames are flushed as they are generated, not at the end", async () => {
    await withServer({ reply: () => ["a", "b", "c", "d"], delayMs: 80 }, {}, async (t) => {
      const started = performance.now();
      const response = await t.post("/v1/chat/completions", chat({ stream: true }));
      const reader = response.body!.getReader();
      const arrivals: number[] = [];
      for (let r = await reader.read(); !r.done; r = await reader.read())
        arrivals.push(performance.now() - started);
      assert.ok(arrivals.length >= 3, `${arrivals.length} reads`);
      assert.ok(arrivals.at(-1)! - arrivals[0]! >= 150, `arrivals ${arrivals.map(Math.round)}`);
    });
  });

  test("an engine rejection before the first event is an HTTP error even when streaming", async () => {
    await withServer({ reject: () => new EngineRejection("queue full", "overloaded", 3) }, {}, async (t) => {
      const response = await t.post("/v1/chat/completions", chat({ stream: true }));
      const body = await expectError(response, 429);
      assert.equal(body.error.code, "overloaded");
      assert.equal(response.headers.get("retry-after"), "3");
    });
  });
});

describe("program fields", () => {
  test("from the body (job_id string or number, program_id, this_func_call) and headers", async () => {
    await withServer({}, {}, async (t) => {
      const send = async (extra: Record<string, unknown>, headers: Record<string, string> = {}) => {
        const response = await t.post("/v1/chat/completions", chat(extra), headers);
        assert.equal(response.status, 200, await response.clone().text());
        await response.json();
        return t.engine.requests.at(-1)!;
      };
      let r = await send({ job_id: "django-123", is_last_step: false, this_func_call: "pytest" });
      assert.deepEqual([r.programId, r.isLastStep, r.toolHint], ["django-123", false, "pytest"]);
      r = await send({ job_id: 17, is_last_step: true });
      assert.deepEqual([r.programId, r.isLastStep, r.toolHint], ["17", true, null]);
      r = await send({ job_id: null, is_last_step: null, this_func_call: null }); // crashed the fork
      assert.deepEqual([r.programId, r.isLastStep], [null, false]);
      r = await send({ program_id: "p-9" });
      assert.equal(r.programId, "p-9");
      r = await send({}, { "X-Program-Id": "hdr-1", "X-Last-Step": "true" });
      assert.deepEqual([r.programId, r.isLastStep], ["hdr-1", true]);
      r = await send({ session_id: "s-1" });
      assert.equal(r.programId, "s-1");
      r = await send({ session_params: { session_id: 42 } });
      assert.equal(r.programId, "42");
      r = await send({}, { "X-Session-ID": "router-7" });
      assert.equal(r.programId, "router-7");
      r = await send({ job_id: "same" }, { "X-Program-Id": "same", "X-Session-ID": "same" });
      assert.equal(r.programId, "same", "sources that agree are one program");
      r = await send({});
      assert.deepEqual([r.programId, r.isLastStep, r.toolHint], [null, false, null]);
    });
  });
});

test("a chat whose history holds the model's earlier answers is a returning turn, its earlier turns counted (its program went on elsewhere)", async () => {
  await withServer({}, {}, async (t) => {
    const send = async (messages: unknown[]) => {
      const response = await t.post("/v1/chat/completions", { messages, job_id: "moved" });
      assert.equal(response.status, 200);
      await response.json();
      return t.engine.requests.at(-1)!.priorTurns;
    };
    assert.equal(await send([{ role: "user", content: "Fix it." }]), 0);
    const call = { id: "c1", type: "function", function: { name: "ls", arguments: "{}" } };
    const history = [
      { role: "user", content: "Fix it." },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: "c1", content: "a.py" },
    ];
    assert.equal(await send(history), 1);
    const twice = [...history, { role: "assistant", content: null, tool_calls: [call] }, history[2]];
    assert.equal(await send(twice), 2);
    const completion = await t.post("/v1/completions", { prompt: "Fix it.", job_id: "moved" });
    await completion.json();
    assert.equal(t.engine.requests.at(-1)!.priorTurns, undefined, "a bare prompt says nothing");
  });
});

test("dashboard: the page and its libraries are open, its state wants the API key; --no-dashboard turns it off", async () => {
  await withServer({}, { apiKeys: ["sekrit"] }, async (t) => {
    const page = await fetch(`${t.url}/dashboard`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /<script type="module" src="dashboard\/assets\/app.js">/);
    for (const asset of ["app.js", "preact-htm.js", "uplot.js", "uplot.css"]) {
      const response = await fetch(`${t.url}/dashboard/assets/${asset}`);
      assert.equal(response.status, 200, asset);
      assert.ok((await response.text()).length > 100, asset);
    }
    assert.equal((await fetch(`${t.url}/dashboard/assets/secrets.json`)).status, 404);
    await expectError(await fetch(`${t.url}/dashboard/state`), 401);
    await (
      await t.post("/v1/chat/completions", chat({ job_id: "p-1" }), { Authorization: "Bearer sekrit" })
    ).json();
    const state = await fetch(`${t.url}/dashboard/state`, { headers: { Authorization: "Bearer sekrit" } });
    assert.equal(state.status, 200);
    const body = (await state.json()) as Json;
    assert.equal(body.server.model, "fake-model");
    assert.equal(body.server.instance, `127.0.0.1:${t.server.port}`, "the page's header names the instance");
    assert.equal(body.pool.totalBlocks, 1024);
    const program = body.programs.find((p: Json) => p.id.endsWith("p-1"));
    assert.equal(program.kv.poolHolder, "reusable", "where its KV is, as the engine says");
    assert.ok(Array.isArray(body.history));
    assert.equal(body.distributions.finishReasons.stop, 1, "the finished request, by its finish reason");
    const later = await fetch(`${t.url}/dashboard/state?since=${Date.now() / 1000 + 60}`, {
      headers: { Authorization: "Bearer sekrit" },
    });
    assert.deepEqual(((await later.json()) as Json).history, [], "a page asks only for points it lacks");
  });
  await withServer({}, { dashboard: false }, async (t) => {
    assert.equal((await fetch(`${t.url}/dashboard`)).status, 404);
    assert.equal((await fetch(`${t.url}/dashboard/state`)).status, 404);
  });
});

test("dashboard state: with two API keys each tenant sees only its own programs, under its own ids", async () => {
  await withServer({}, { apiKeys: ["key-a", "key-b"] }, async (t) => {
    for (const [key, job] of [
      ["key-a", "a-job"],
      ["key-b", "b-job"],
      ["key-b", "shared-name"],
      ["key-a", "shared-name"],
    ] as const) {
      await (
        await t.post("/v1/chat/completions", chat({ job_id: job }), { Authorization: `Bearer ${key}` })
      ).json();
    }
    const programIds = async (key: string) => {
      const state = await fetch(`${t.url}/dashboard/state`, { headers: { Authorization: `Bearer ${key}` } });
      const body = (await state.json()) as Json;
      return body.programs.map((p: Json) => p.id).sort();
    };
    assert.deepEqual(await programIds("key-a"), ["a-job", "shared-name"]);
    assert.deepEqual(await programIds("key-b"), ["b-job", "shared-name"]);
  });
});

test("dashboard state: the device the model runs on, as fields and as the banner's line", async () => {
  const device = {
    backend: "vulkan",
    device: "AMD Radeon RX 7900 XTX",
    memoryBytes: 24 * 1024 ** 3,
    layersOffloaded: 20,
    layersTotal: 32,
    kvCache: "split" as const,
  };
  await withServer({ device }, {}, async (t) => {
    const body = (await (await fetch(`${t.url}/dashboard/state`)).json()) as Json;
    assert.deepEqual(body.device, {
      ...device,
      summary:
        "vulkan · AMD Radeon RX 7900 XTX · 24.0 GiB · 20/32 layers on the GPU · KV cache split between the GPU and RAM",
    });
  });
});

test("retention hints: cache_control (top level or nvext) and an expected tool duration reach the engine", async () => {
  await withServer({}, {}, async (t) => {
    const send = async (extra: Record<string, unknown>) => {
      const response = await t.post("/v1/chat/completions", chat({ job_id: "j", ...extra }));
      assert.equal(response.status, 200, await response.clone().text());
      await response.json();
      return t.engine.requests.at(-1)?.retentionHints;
    };
    assert.deepEqual(await send({ cache_control: { type: "ephemeral", ttl: "30s" } }), {
      ttlS: 30,
      expectedToolS: null,
    });
    assert.deepEqual(await send({ nvext: { cache_control: { type: "ephemeral", ttl: "5m" } } }), {
      ttlS: 300,
      expectedToolS: null,
    });
    assert.deepEqual(await send({ cache_control: { type: "ephemeral" }, expected_tool_duration_s: 12 }), {
      ttlS: null,
      expectedToolS: 12,
    });
    assert.deepEqual(await send({}), { ttlS: null, expectedToolS: null });
    const bad = await t.post(
      "/v1/chat/completions",
      chat({ cache_control: { type: "ephemeral", ttl: "soon" } }),
    );
    assert.equal(bad.status, 400);
    await bad.json();
  });
});

test("DELETE /v1/programs/{id} ends a live program (a router's finish-session); unknown ids are 404", async () => {
  await withServer({}, {}, async (t) => {
    await (await t.post("/v1/chat/completions", chat({ job_id: "agent-1" }))).json();
    const ended = await fetch(`${t.url}/v1/programs/agent-1`, { method: "DELETE" });
    assert.equal(ended.status, 200);
    assert.deepEqual(await ended.json(), { id: "agent-1", object: "program", deleted: true });
    assert.deepEqual(t.engine.endedPrograms, ["agent-1"]);
    const again = await fetch(`${t.url}/v1/programs/agent-1`, { method: "DELETE" });
    assert.equal(again.status, 404);
    assert.equal(((await again.json()) as { error: { code: string } }).error.code, "not_found");
  });
});

test("drainPrograms: turns of programs already here are served, new programs go elsewhere, health says draining", async () => {
  await withServer({}, {}, async (t) => {
    await (await t.post("/v1/chat/completions", chat({ job_id: "here" }))).json();
    const drained = t.server.drainPrograms(5_000);
    const health = await fetch(`${t.url}/health`);
    assert.equal(health.status, 503);
    assert.deepEqual(await health.json(), { status: "draining" });
    const returning = await t.post("/v1/chat/completions", chat({ job_id: "here" }));
    assert.equal(returning.status, 200, "a returning turn is served");
    await returning.json();
    for (const fresh of [chat({ job_id: "new" }), chat()]) {
      const refused = await t.post("/v1/chat/completions", fresh);
      assert.equal(refused.status, 503);
      assert.ok(refused.headers.get("retry-after"));
      assert.equal(((await refused.json()) as { error: { code: string } }).error.code, "draining");
    }
    assert.equal((await fetch(`${t.url}/v1/programs/here`, { method: "DELETE" })).status, 200);
    assert.equal(await drained, true, "the drain ends once the last program here has ended");
  });
});

test("two sources naming different programs are a 400 that names both", async () => {
  await withServer({}, {}, async (t) => {
    for (const [extra, headers, names] of [
      [{ job_id: "body" }, { "X-Program-Id": "hdr" }, /job_id .* X-Program-Id/],
      [{ session_id: "a" }, { "X-Session-ID": "b" }, /session_id .* X-Session-ID/],
      [
        { program_id: "p", session_params: { session_id: "q" } },
        {},
        /program_id .* session_params\.session_id/,
      ],
    ] as const) {
      const response = await t.post("/v1/chat/completions", chat(extra), headers);
      assert.equal(response.status, 400);
      const body = (await response.json()) as { error: { message: string; param: string } };
      assert.match(body.error.message, names);
      assert.equal(body.error.param, "program_id");
    }
  });
});

describe("tool calls", () => {
  const tools = [
    {
      type: "function",
      function: {
        name: "get_weather",
        description: "Weather in a city",
        parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
      },
    },
  ];

  test("a Hermes call becomes tool_calls with finish_reason tool_calls; tools and results are in the prompt", async () => {
    const reply =
      'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
    await withServer({ reply: () => reply }, {}, async (t) => {
      const messages = [
        { role: "system", content: "You are helpful." },
        { role: "user", content: "Weather in Oslo and Paris?" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            {
              id: "call_1",
              type: "function",
              function: { name: "get_weather", arguments: '{"city":"Oslo"}' },
            },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: "Oslo: 3C, rain" },
      ];
      const body = (await (await t.post("/v1/chat/completions", { messages, tools })).json()) as Json;
      const choice = body["choices"][0];
      assert.equal(choice.finish_reason, "tool_calls");
      assert.equal(choice.message.content, "Let me check.");
      assert.equal(choice.message.tool_calls.length, 1);
      const call = choice.message.tool_calls[0];
      assert.equal(call.type, "function");
      assert.match(call.id, /^call_/);
      assert.equal(call.function.name, "get_weather");
      assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });

      const prompt = t.engine.requests[0]!.prompt;
      assert.match(prompt, /<\|im_start\|>system\nYou are helpful\.\n\n# Tools\n/);
      assert.ok(prompt.includes('"name":"get_weather"'), "the tool list is rendered");
      assert.ok(
        prompt.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city":"Oslo"}}\n</tool_call>'),
      );
      assert.ok(prompt.includes("<|im_start|>tool\nOslo: 3C, rain<|im_end|>"));
    });
  });

  test("streamed: content before the call streams, then the call: its name, then its arguments as they are generated", async () => {
    const pieces = [
      "Sure",
      ". <tool",
      '_call>{"name": "get_weather", ',
      '"arguments": {"ci',
      'ty": "Ro',
      'me"}}</tool_call>',
    ];
    await withServer({ reply: () => pieces }, {}, async (t) => {
      const raw = await (
        await t.post("/v1/chat/completions", { messages: chat().messages, tools, stream: true })
      ).text();
      const chunks = sseEvents(raw)
        .slice(0, -1)
        .map((e) => JSON.parse(e) as Json);
      const content = chunks.map((c) => c["choices"][0].delta.content ?? "").join("");
      assert.equal(content, "Sure. ");
      const calls = chunks.flatMap((c) => c["choices"][0].delta.tool_calls ?? []);
      assert.ok(calls.every((c: Json) => c.index === 0));
      assert.equal(calls[0].function.name, "get_weather", "the first delta names the function");
      assert.equal(calls[0].function.arguments, "");
      assert.ok(calls.length > 2, "arguments arrive in several deltas as they are generated");
      const args = calls.map((c: Json) => c.function.arguments).join("");
      assert.deepEqual(JSON.parse(args), { city: "Rome" });
      assert.equal(chunks.at(-1)!["choices"][0].finish_reason, "tool_calls");
    });
  });

  test("a single bash block becomes a call of the bash-like tool; tool_choice none leaves text alone", async () => {
    const bash = [
      {
        type: "function",
        function: {
          name: "bash",
          parameters: { type: "object", properties: { command: { type: "string" } } },
        },
      },
    ];
    const reply = "THOUGHT: look around\n\n```bash\ncd /testbed && ls -la\n```";
    await withServer({ reply: () => reply }, {}, async (t) => {
      const body = (await (await t.post("/v1/chat/completions", chat({ tools: bash }))).json()) as Json;
      const message = body["choices"][0].message;
      assert.equal(message.content, "THOUGHT: look around");
      assert.deepEqual(JSON.parse(message.tool_calls[0].function.arguments), {
        command: "cd /testbed && ls -la",
      });
      const none = (await (
        await t.post("/v1/chat/completions", chat({ tools: bash, tool_choice: "none" }))
      ).json()) as Json;
      assert.equal(none["choices"][0].message.content, reply);
      assert.equal(none["choices"][0].finish_reason, "stop");
      // without tools nothing is parsed either
      const plain = (await (await t.post("/v1/chat/completions", chat())).json()) as Json;
      assert.equal(plain["choices"][0].message.tool_calls, undefined);
    });
  });

  test("tool_choice required forces a call grammar", async () => {
    await withServer(
      { reply: () => '<tool_call>\n{"name": "get_weather", "arguments": {"city": "X"}}\n</tool_call>' },
      {},
      async (t) => {
        await (await t.post("/v1/chat/completions", chat({ tools, tool_choice: "required" }))).json();
        const grammar = t.engine.requests[0]!.sampling.grammar ?? "";
        assert.match(grammar, /^root ::= "<tool_call>\\n"/);
        assert.ok(grammar.includes('\\"get_weather\\"'));
      },
    );
  });

  test("a call echoed back renders as the model wrote it: the next turn's prompt extends this turn's prompt and output", async () => {
    const output =
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo", "days": [1, 2]}}\n</tool_call>';
    await withServer({ reply: () => output }, {}, async (t) => {
      const first = [{ role: "user", content: "Weather in Oslo?" }];
      const answer = (await (
        await t.post("/v1/chat/completions", { messages: first, tools })
      ).json()) as Json;
      const message = answer["choices"][0].message;
      assert.equal(message.tool_calls[0].function.arguments, '{"city": "Oslo", "days": [1, 2]}');
      const result = { role: "tool", tool_call_id: message.tool_calls[0].id, content: "3C" };
      const next = await t.post("/v1/chat/completions", { messages: [...first, message, result], tools });
      await next.json();
      const [turn1, turn2] = t.engine.requests.map((r) => r.prompt);
      assert.ok(
        turn2!.startsWith(turn1! + output),
        `${JSON.stringify(turn1 + output)}\n${JSON.stringify(turn2)}`,
      );
    });
  });
});

describe("a program's turns through an agent framework's loop", () => {
  const tools = [
    {
      type: "function",
      function: {
        name: "run_shell",
        description: "Run a shell command",
        parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
      },
    },
  ];
  const call = (id: string, command: string) => ({
    role: "assistant",
    content: null,
    tool_calls: [
      { id, type: "function", function: { name: "run_shell", arguments: JSON.stringify({ command }) } },
    ],
  });

  test("each turn's prompt extends the previous one, whatever its tool_choice (none included)", async () => {
    const replies = ["ls", "cat a.py", "pytest"].map(
      (command) => `<tool_call>\n{"name": "run_shell", "arguments": {"command": "${command}"}}\n</tool_call>`,
    );
    let turn = 0;
    await withServer({ reply: () => replies[turn++] ?? "All tests pass." }, {}, async (t) => {
      const messages: unknown[] = [{ role: "user", content: "Fix the failing test." }];
      const choices = ["auto", "required", { type: "function", function: { name: "run_shell" } }, "none"];
      for (const [i, tool_choice] of choices.entries()) {
        const response = await t.post("/v1/chat/completions", {
          messages,
          tools,
          tool_choice,
          job_id: "loop",
        });
        const body = (await response.json()) as Json;
        assert.equal(response.status, 200, JSON.stringify(body));
        if (i > 0) {
          const [previous, current] = t.engine.requests.slice(-2).map((r) => r.prompt);
          assert.ok(
            current!.startsWith(previous!),
            `turn ${i + 1} (${JSON.stringify(tool_choice)}) extends turn ${i}`,
          );
          assert.ok(body["usage"].prompt_tokens_details.cached_tokens > 0);
        }
        const message = body["choices"][0].message;
        if (tool_choice === "none") {
          assert.equal(message.content, "All tests pass.");
          assert.equal(message.tool_calls, undefined);
          break;
        }
        const id = message.tool_calls[0].id;
        messages.push(call(id, JSON.parse(message.tool_calls[0].function.arguments).command));
        messages.push({ role: "tool", tool_call_id: id, content: `output ${i}` });
      }
      assert.ok(
        t.engine.requests.at(-1)!.prompt.includes('"name": "run_shell"'),
        "the tools stay in the prompt",
      );
    });
  });

  test("a forced call cut off by max_tokens is a partial tool_calls entry with finish_reason length, never markup", async () => {
    const pieces = [
      "<tool_call>\n",
      '{"name": "run_',
      'shell", "arguments": ',
      '{"command": "ls -la ',
      "/src and more",
      " words",
    ];
    await withServer({ reply: () => pieces }, {}, async (t) => {
      const request = {
        messages: [{ role: "user", content: "List." }],
        tools,
        tool_choice: "required",
        max_tokens: 6,
      };
      const body = (await (await t.post("/v1/chat/completions", request)).json()) as Json;
      const choice = body["choices"][0];
      assert.equal(choice.finish_reason, "length");
      assert.equal(choice.message.content, null);
      assert.equal(choice.message.tool_calls.length, 1);
      assert.equal(choice.message.tool_calls[0].function.name, "run_shell");
      assert.equal(choice.message.tool_calls[0].function.arguments, '{"command": "ls -la ');

      const raw = await (await t.post("/v1/chat/completions", { ...request, stream: true })).text();
      const chunks = sseEvents(raw)
        .slice(0, -1)
        .map((e) => JSON.parse(e) as Json);
      const content = chunks.map((c) => c["choices"][0].delta.content ?? "").join("");
      assert.equal(content, "", "no markup streamed as content");
      const calls = chunks.flatMap((c) => c["choices"][0].delta.tool_calls ?? []);
      assert.equal(calls.map((c: Json) => c.function.name).join(""), "run_shell");
      assert.equal(calls.map((c: Json) => c.function.arguments).join(""), '{"command": "ls -la ');
      assert.equal(chunks.at(-1)!["choices"][0].finish_reason, "length");
    });
  });

  test("a call cut off before its name is complete takes the one offered tool it can be", async () => {
    await withServer({ reply: () => ["<tool_call>\n", '{"name": "run_', "sh"] }, {}, async (t) => {
      const request = {
        messages: [{ role: "user", content: "List." }],
        tools,
        tool_choice: "required",
        max_tokens: 2,
      };
      const body = (await (await t.post("/v1/chat/completions", request)).json()) as Json;
      assert.deepEqual(body["choices"][0].message.tool_calls[0].function, {
        name: "run_shell",
        arguments: "",
      });
    });
  });

  test("responses and chunks carry a system_fingerprint, the same for every request", async () => {
    await withServer({}, {}, async (t) => {
      const first = (await (await t.post("/v1/chat/completions", chat())).json()) as Json;
      assert.match(first["system_fingerprint"], /^fp_[0-9a-f]{10}$/);
      const raw = await (await t.post("/v1/chat/completions", chat({ stream: true }))).text();
      for (const event of sseEvents(raw).slice(0, -1)) {
        assert.equal((JSON.parse(event) as Json)["system_fingerprint"], first["system_fingerprint"]);
      }
      const text = (await (await t.post("/v1/completions", { prompt: "Hi" })).json()) as Json;
      assert.equal(text["system_fingerprint"], first["system_fingerprint"]);
    });
  });
});

/** Sends a request on a raw socket, waits for the engine to have it, then drops the connection. */
function sendAndDisconnect(url: string, body: unknown, waitUntil: () => Promise<void>): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
    });
    req.on("error", () => {});
    req.on("response", (res) => {
      res.once("data", () => {
        req.destroy();
        resolve();
      });
    });
    req.end(JSON.stringify(body));
    waitUntil()
      .then(() => {
        if (!(body as { stream?: boolean }).stream) {
          req.destroy();
          resolve();
        }
      })
      .catch(reject);
  });
}

async function eventually(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail(`timed out waiting for ${what}`);
}

describe("robustness", () => {
  test("a client disconnect aborts the engine request (non-streaming and streaming)", async () => {
    const pieces = Array.from({ length: 200 }, () => "tok ");
    await withServer({ reply: () => pieces, delayMs: 20 }, {}, async (t) => {
      await sendAndDisconnect(t.url, chat(), () => t.engine.waitForRequests(1));
      await eventually(() => t.engine.aborted.length === 1, "the non-streaming abort");
      await sendAndDisconnect(t.url, chat({ stream: true }), () => t.engine.waitForRequests(2));
      await eventually(() => t.engine.aborted.length === 2, "the streaming abort");
      await eventually(() => t.server.api.inflight.size === 0, "in-flight requests to drain");
      assert.deepEqual(
        t.engine.aborted,
        t.engine.requests.map((r) => r.requestId),
      );
    });
  });

  test("overload: engine refusal and the server's in-flight cap both give 429 with Retry-After", async () => {
    await withServer(
      { reply: () => ["a", "b", "c"], delayMs: 100 },
      { maxInflightRequests: 1 },
      async (t) => {
        const first = t.post("/v1/chat/completions", chat());
        await t.engine.waitForRequests(1);
        const second = await t.post("/v1/chat/completions", chat());
        const err = await expectError(second, 429);
        assert.equal(err.error.type, "rate_limit_error");
        assert.equal(second.headers.get("retry-after"), "1");
        assert.equal((await first).status, 200);
      },
    );
    await withServer({ reject: () => new EngineRejection("busy", "overloaded", 2.2) }, {}, async (t) => {
      const response = await t.post("/v1/completions", { prompt: "x" });
      await expectError(response, 429);
      assert.equal(response.headers.get("retry-after"), "3");
    });
    await withServer({ reject: () => new EngineRejection("bye", "shutting_down") }, {}, async (t) => {
      const response = await t.post("/v1/completions", { prompt: "x" });
      await expectError(response, 503);
      assert.ok(response.headers.get("retry-after"));
    });
  });

  test("--api-key: Bearer required on /v1, /health and /metrics stay open", async () => {
    await withServer({}, { apiKeys: ["sekrit"] }, async (t) => {
      const missing = await expectError(await t.post("/v1/chat/completions", chat()), 401);
      assert.equal(missing.error.code, "invalid_api_key");
      await expectError(await t.post("/v1/chat/completions", chat(), { Authorization: "Bearer nope" }), 401);
      await expectError(await fetch(`${t.url}/v1/models`), 401);
      const ok = await t.post("/v1/chat/completions", chat(), { Authorization: "Bearer sekrit" });
      assert.equal(ok.status, 200);
      await ok.json();
      assert.equal((await fetch(`${t.url}/health`)).status, 200);
      const metrics = await fetch(`${t.url}/metrics`);
      assert.equal(metrics.status, 200);
      await metrics.text();
    });
  });

  test("several API keys are tenants: the same program id is another program, cached KV is salted apart", async () => {
    await withServer({}, { apiKeys: ["key-a", "key-b"] }, async (t) => {
      const as = (key: string, body: object) =>
        t.post("/v1/chat/completions", { ...chat(), ...body }, { Authorization: `Bearer ${key}` });
      for (const response of [
        await as("key-a", { job_id: "build-7" }),
        await as("key-b", { job_id: "build-7", is_last_step: true }),
        await as("key-a", { job_id: "build-7", cache_salt: "user-1" }),
      ]) {
        assert.equal(response.status, 200);
        await response.json();
      }
      const [a, b, aSalted] = t.engine.requests;
      assert.notEqual(a?.programId, b?.programId, "B's last step cannot end A's program");
      assert.equal(a?.programId, aSalted?.programId);
      assert.equal(new Set([a?.cacheSalt, b?.cacheSalt, aSalted?.cacheSalt]).size, 3);
      const deleted = await fetch(`${t.url}/v1/programs/build-7`, {
        method: "DELETE",
        headers: { Authorization: "Bearer key-b" },
      });
      assert.equal(deleted.status, 200, "B ends its own build-7");
      assert.deepEqual(t.engine.endedPrograms, [b?.programId]);
    });
  });

  test("a prompt far beyond the context is refused before it is tokenized", async () => {
    await withServer({ maxContextTokens: 1000 }, {}, async (t) => {
      let counted = 0;
      const count = t.engine.countPromptTokens.bind(t.engine);
      t.engine.countPromptTokens = (text: string) => {
        counted++;
        return count(text);
      };
      const huge = await expectError(await t.post("/v1/completions", { prompt: "ab ".repeat(20_000) }), 400);
      assert.equal(huge.error.code, "context_length_exceeded");
      assert.match(
        huge.error.message,
        /maximum context length is 1000 tokens\. However, your messages resulted in at least 1875 tokens/,
      );
      assert.equal(counted, 0);
      const fits = await t.post("/v1/completions", { prompt: "ab ".repeat(100) });
      assert.equal(fits.status, 200);
      await fits.json();
    });
  });

  test("a tool whose parameters nest thousands of levels deep is a 400, never a 500", async () => {
    await withServer({}, {}, async (t) => {
      // Written as text: JSON.stringify itself cannot go this deep.
      const levels = 20_000;
      const deep = `${'{"type":"object","properties":{"x":'.repeat(levels)}{"type":"string"}${"}}".repeat(levels)}`;
      for (const toolChoice of ["auto", "required"]) {
        const body = await expectError(
          await t.post(
            "/v1/chat/completions",
            `{"messages":[{"role":"user","content":"hi"}],"tool_choice":"${toolChoice}","tools":[{"type":"function","function":{"name":"f","parameters":${deep}}}]}`,
          ),
          400,
        );
        assert.match(body.error.message, /nests deeper than 64 levels/);
      }
    });
  });

  test("tool-call arguments echoed back as an object nesting thousands of levels deep are a 400, never a 500", async () => {
    await withServer({}, {}, async (t) => {
      const levels = 20_000;
      const deep = `${'{"a":'.repeat(levels)}1${"}".repeat(levels)}`;
      const body = await expectError(
        await t.post(
          "/v1/chat/completions",
          `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":${deep}}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]}`,
        ),
        400,
      );
      assert.match(body.error.message, /nests deeper than 64 levels/);
      assert.equal(t.engine.requests.length, 0);
      // Shallow object arguments are still rendered into the prompt.
      const ok = await t.post(
        "/v1/chat/completions",
        chat({
          messages: [
            { role: "user", content: "hi" },
            {
              role: "assistant",
              content: null,
              tool_calls: [
                { id: "c1", type: "function", function: { name: "f", arguments: { a: { b: 1 } } } },
              ],
            },
            { role: "tool", tool_call_id: "c1", content: "ok" },
          ],
        }),
      );
      assert.equal(ok.status, 200);
      await ok.json();
      assert.match(t.engine.requests[0]?.prompt ?? "", /"arguments": \{"a":\{"b":1\}\}/);
    });
  });

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

  test("an over-long completion names the field the client sent", async () => {
    await withServer({ maxContextTokens: 100 }, {}, async (t) => {
      const newer = await expectError(
        await t.post("/v1/chat/completions", chat({ max_completion_tokens: 1000 })),
        400,
        "max_completion_tokens",
      );
      assert.match(newer.error.message, /Reduce the prompt or max_completion_tokens/);
      await expectError(await t.post("/v1/chat/completions", chat({ max_tokens: 1000 })), 400, "max_tokens");
    });
  });

  test("--allowed-origins: preflight and responses carry CORS headers for allowed origins only", async () => {
    await withServer({}, { allowedOrigins: ["https://ui.example"], apiKeys: ["k"] }, async (t) => {
      const preflight = await fetch(`${t.url}/v1/chat/completions`, {
        method: "OPTIONS",
        headers: {
          Origin: "https://ui.example",
          "Access-Control-Request-Method": "POST",
          "Access-Control-Request-Headers": "authorization,content-type",
        },
      });
      assert.equal(preflight.status, 204);
      assert.equal(preflight.headers.get("access-control-allow-origin"), "https://ui.example");
      assert.match(preflight.headers.get("access-control-allow-headers") ?? "", /Authorization/i);
      const ok = await t.post("/v1/chat/completions", chat(), {
        Authorization: "Bearer k",
        Origin: "https://ui.example",
      });
      assert.equal(ok.headers.get("access-control-allow-origin"), "https://ui.example");
      await ok.json();
      const other = await t.post("/v1/chat/completions", chat(), {
        Authorization: "Bearer k",
        Origin: "https://evil.example",
      });
      assert.equal(other.headers.get("access-control-allow-origin"), null);
      await other.json();
    });
    await withServer({}, {}, async (t) => {
      const preflight = await fetch(`${t.url}/v1/chat/completions`, {
        method: "OPTIONS",
        headers: { Origin: "https://ui.example", "Access-Control-Request-Method": "POST" },
      });
      assert.equal(preflight.headers.get("access-control-allow-origin"), null, "no CORS unless allowed");
      await preflight.text();
    });
  });

  test("--allowed-origins: a preflight from an allowed origin gets the SDK headers it asks for", async () => {
    await withServer({}, { allowedOrigins: ["https://ui.example"], apiKeys: ["k"] }, async (t) => {
      const preflight = (origin: string) =>
        fetch(`${t.url}/v1/chat/completions`, {
          method: "OPTIONS",
          headers: {
            Origin: origin,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "x-stainless-os, x-stainless-lang, authorization",
          },
        });
      const allowed = await preflight("https://ui.example");
      assert.equal(allowed.status, 204);
      const allowedHeaders = (allowed.headers.get("access-control-allow-headers") ?? "").split(",");
      assert.deepEqual(allowedHeaders, ["x-stainless-os", "x-stainless-lang", "authorization"]);
      const refused = await preflight("https://evil.example");
      await refused.text();
      const corsHeaders = [...refused.headers.keys()].filter((name) => name.startsWith("access-control-"));
      assert.deepEqual(corsHeaders, []);
    });
  });

  test("a queued stream gets its headers at once; a client that leaves it is counted as an abort", async () => {
    await withServer({ reply: () => ["a ", "b ", "c"], delayMs: 3000 }, {}, async (t) => {
      const controller = new AbortController();
      const started = performance.now();
      const streaming = fetch(`${t.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(chat({ stream: true })),
        signal: controller.signal,
      });
      const headers = await streaming;
      assert.equal(headers.status, 200);
      assert.match(headers.headers.get("content-type") ?? "", /text\/event-stream/);
      assert.ok(performance.now() - started < 2000, "headers long before the first token (3 s)");
      controller.abort();
      await headers.body?.cancel().catch(() => {});
      let aborts = 0;
      for (let i = 0; i < 50 && aborts === 0; i++) {
        await new Promise((r) => setTimeout(r, 20));
        const text = await (await fetch(`${t.url}/metrics`)).text();
        aborts = Number(
          /continuum:request_success_total\{[^}]*finished_reason="abort"[^}]*\} (\d+)/.exec(text)?.[1] ?? 0,
        );
      }
      assert.equal(aborts, 1);
    });
  });

  test("time per output token and inter-token latency histograms", async () => {
    await withServer({ reply: () => ["a ", "b ", "c ", "d"], delayMs: 20 }, {}, async (t) => {
      const response = await t.post("/v1/chat/completions", chat());
      await response.json();
      const text = await (await fetch(`${t.url}/metrics`)).text();
      const count = (name: string) =>
        Number(new RegExp(`^${name}_count(?:\\{[^}]*\\})? (\\d+)`, "m").exec(text)?.[1] ?? -1);
      assert.equal(count("continuum:request_time_per_output_token_seconds"), 1);
      assert.equal(count("continuum:inter_token_latency_seconds"), 3);
    });
  });

  test("vLLM's token latency histograms: vllm:inter_token_latency_seconds and vllm:time_per_output_token_seconds per token, the request TPOT per request", async () => {
    await withServer({ reply: () => ["a ", "b ", "c ", "d"], delayMs: 30 }, {}, async (t) => {
      for (let i = 0; i < 2; i++) await (await t.post("/v1/chat/completions", chat())).json();
      const text = await (await fetch(`${t.url}/metrics`)).text();
      const series = (name: string, suffix: string) =>
        Number(new RegExp(`^${name}_${suffix}(?:\\{[^}]*\\})? ([0-9.e+-]+)`, "m").exec(text)?.[1] ?? -1);
      const buckets = (name: string) =>
        [...text.matchAll(new RegExp(`^${name}_bucket\\{le="([^"]+)"`, "gm"))].map((m) => m[1]);
      const vllmBuckets = [
        "0.01",
        "0.025",
        "0.05",
        "0.075",
        "0.1",
        "0.15",
        "0.2",
        "0.3",
        "0.4",
        "0.5",
        "0.75",
        "1",
        "2.5",
        "5",
        "7.5",
        "10",
        "20",
        "40",
        "80",
        "+Inf",
      ];
      // Two requests of four pieces each: three intervals per request.
      for (const name of ["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"]) {
        assert.equal(series(name, "count"), 6, name);
        assert.ok(series(name, "sum") >= 6 * 0.025, `${name}: six intervals of about 30 ms`);
        assert.deepEqual(buckets(name), vllmBuckets, name);
      }
      assert.equal(series("vllm:request_time_per_output_token_seconds", "count"), 2);
      assert.ok(series("vllm:request_time_per_output_token_seconds", "sum") >= 2 * 0.025);
      assert.deepEqual(buckets("vllm:request_time_per_output_token_seconds"), vllmBuckets);
      assert.match(text, /^vllm:inter_token_latency_seconds_count\{model_name="fake-model"\} 6$/m);
    });
  });

  test("program ids longer than 256 characters are refused with a 400 naming the field", async () => {
    await withServer({}, {}, async (t) => {
      const long = "x".repeat(257);
      const inBody = await expectError(
        await t.post("/v1/chat/completions", { ...chat(), job_id: long }),
        400,
      );
      assert.match(inBody.error.message, /job_id/);
      const inHeader = await expectError(
        await t.post("/v1/chat/completions", chat(), { "X-Session-ID": long }),
        400,
      );
      assert.match(inHeader.error.message, /X-Session-ID has 257 characters/);
      assert.equal(t.engine.requests.length, 0);
    });
  });

  test("close() drains in-flight requests, refuses new ones, then shuts the engine down", async () => {
    await withServer({ reply: () => ["a ", "b ", "c"], delayMs: 50 }, {}, async (t) => {
      const inflight = t.post("/v1/chat/completions", chat());
      await t.engine.waitForRequests(1);
      const closing = t.server.close({ drainTimeoutMs: 5_000 });
      assert.equal(t.server.api.draining, true);
      const response = await inflight;
      assert.equal(response.status, 200);
      assert.equal(((await response.json()) as Json)["choices"][0].message.content, "a b c");
      await closing;
      assert.equal(t.engine.shutdownCalls, 1);
      assert.deepEqual(t.engine.aborted, []);
    });
  });

  test("close() aborts requests still running after the drain timeout", async () => {
    const pieces = Array.from({ length: 100 }, () => "x ");
    await withServer({ reply: () => pieces, delayMs: 50 }, {}, async (t) => {
      const inflight = t.post("/v1/chat/completions", chat()).catch(() => null);
      await t.engine.waitForRequests(1);
      await t.server.close({ drainTimeoutMs: 100 });
      assert.equal(t.engine.aborted.length, 1);
      assert.equal(t.engine.shutdownCalls, 1);
      await inflight;
    });
  });
});

/** Prometheus text format: `# HELP`/`# TYPE` lines, then `name{label="v",...} value` samples. */
function parseExposition(text: string): Map<string, { labels: string; value: number }[]> {
  const samples = new Map<string, { labels: string; value: number }[]>();
  const types = new Set<string>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) {
      types.add(type[1] as string);
      continue;
    }
    if (line.startsWith("# HELP ")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$/.exec(
      line,
    );
    assert.ok(m, `not a Prometheus sample line: ${line}`);
    const name = m[1] as string;
    const family = name.replace(/_(bucket|sum|count)$/, "");
    assert.ok(types.has(name) || types.has(family), `sample before its # TYPE: ${line}`);
    const value = Number(m[3]);
    assert.ok(!Number.isNaN(value), line);
    samples.set(name, [...(samples.get(name) ?? []), { labels: m[2] ?? "", value }]);
  }
  return samples;
}

describe("metrics", () => {
  test("the vllm: series routers scrape exist, parse, and agree with the continuum: ones", async () => {
    await withServer(
      { metrics: { running: 3, waiting: 5, kvUsage: 0.375, prefixQueryTokens: 200, prefixHitTokens: 50 } },
      {},
      async (t) => {
        const samples = parseExposition(await (await fetch(`${t.url}/metrics`)).text());
        const one = (name: string) => {
          const found = samples.get(name);
          assert.ok(found && found.length === 1, `${name}: ${JSON.stringify(found)}`);
          return found[0] as { labels: string; value: number };
        };
        for (const [vllm, ours] of [
          ["vllm:num_requests_running", "continuum:num_requests_running"],
          ["vllm:num_requests_waiting", "continuum:num_requests_waiting"],
          ["vllm:kv_cache_usage_perc", "continuum:kv_cache_usage_perc"],
          ["vllm:gpu_cache_usage_perc", "continuum:kv_cache_usage_perc"],
          ["vllm:gpu_prefix_cache_queries_total", "continuum:prefix_cache_queries_total"],
          ["vllm:gpu_prefix_cache_hits_total", "continuum:prefix_cache_hits_total"],
        ] as const) {
          assert.equal(one(vllm).value, one(ours).value, vllm);
        }
        assert.equal(one("vllm:num_requests_waiting").value, 5);
        assert.equal(one("vllm:gpu_prefix_cache_hit_rate").value, 0.25);
        const info = one("vllm:cache_config_info");
        assert.equal(info.value, 1);
        assert.match(info.labels, /block_size="16"/);
        assert.match(info.labels, /num_gpu_blocks="1024"/);
      },
    );
  });

  test("Prometheus exposition with vLLM-parallel names", async () => {
    await withServer(
      {
        metrics: {
          pinnedPrograms: 2,
          kvUsage: 0.25,
          prefixQueryTokens: 100,
          prefixHitTokens: 40,
          preemptions: 3,
        },
      },
      {},
      async (t) => {
        await (await t.post("/v1/chat/completions", chat())).json();
        const response = await fetch(`${t.url}/metrics`);
        assert.match(response.headers.get("content-type") ?? "", /^text\/plain/);
        const text = await response.text();
        for (const name of [
          "continuum:num_requests_running",
          "continuum:num_requests_waiting",
          "continuum:num_pinned_programs",
          "continuum:kv_cache_usage_perc",
          "continuum:prefix_cache_queries_total",
          "continuum:prefix_cache_hits_total",
          "continuum:num_preemptions_total",
        ]) {
          assert.match(text, new RegExp(`^# TYPE ${name} `, "m"), name);
        }
        for (const name of [
          "continuum:time_to_first_token_seconds",
          "continuum:e2e_request_latency_seconds",
          "continuum:request_queue_time_seconds",
        ]) {
          assert.match(text, new RegExp(`^# TYPE ${name} histogram$`, "m"), name);
          assert.match(text, new RegExp(`^${name}_count\\{model_name="fake-model"\\} 1$`, "m"), name);
        }
        assert.match(text, /^continuum:num_pinned_programs\{model_name="fake-model"\} 2$/m);
        assert.match(text, /^continuum:kv_cache_usage_perc\{model_name="fake-model"\} 0.25$/m);
        assert.match(text, /^continuum:prefix_cache_hits_total\{model_name="fake-model"\} 40$/m);
        // counters do not double on a second scrape
        const again = await (await fetch(`${t.url}/metrics`)).text();
        assert.match(again, /^continuum:prefix_cache_queries_total\{model_name="fake-model"\} 100$/m);
        assert.match(
          again,
          /^continuum:request_success_total\{finished_reason="stop",model_name="fake-model"\} 1$/m,
        );
      },
    );
  });
});
