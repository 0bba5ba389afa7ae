/** HTTP-level validation: OpenAI-format 400/404/413 errors, context limits, pathological nesting. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EngineRejection } from "../engine/engine-api.js";
import { chat, expectError } from "./test-support/openai-requests.js";
import { withServer } from "./test-support/test-server.js";

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
      await expectError(await t.post("/v1/chat/completions", chat({ n: 65 })), 400, "n");
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

  test("a value of the wrong type names the type expected and the type that came, in every API", async () => {
    await withServer({}, {}, async (t) => {
      const openai = async (path: string, body: unknown, param: string) =>
        (await expectError(await t.post(path, body), 400, param)).error.message;
      assert.equal(
        await openai("/v1/responses", { model: "fake-model", input: 42 }, "input"),
        "input: expected a string or an array, got number",
      );
      assert.equal(
        await openai("/v1/responses", { model: "fake-model", input: [1] }, "input[0]"),
        "input[0]: expected an object, got number",
      );
      assert.equal(
        await openai("/v1/responses", { model: "fake-model" }, "input"),
        "input: expected a string or an array, got nothing",
      );
      assert.equal(
        await openai(
          "/v1/responses",
          { model: "fake-model", input: [{ type: "message", role: "user", content: 7 }] },
          "input[0].content",
        ),
        "input[0].content: expected a string or an array, got number",
      );
      assert.equal(
        await openai(
          "/v1/responses",
          { model: "fake-model", input: "x", max_output_tokens: 1.5 },
          "max_output_tokens",
        ),
        "max_output_tokens: expected an integer, got 1.5",
      );
      assert.equal(
        await openai(
          "/v1/chat/completions",
          chat({ messages: [{ role: "user", content: [{ type: "text", text: 5 }] }] }),
          "messages[0].content[0].text",
        ),
        "messages[0].content[0].text: expected a string, got number",
      );
      assert.equal(
        await openai("/v1/chat/completions", chat({ tool_choice: "sometimes" }), "tool_choice"),
        'tool_choice: expected "none" or "auto" or "required" or an object, got "sometimes"',
      );
      assert.equal(
        await openai(
          "/v1/chat/completions",
          chat({ messages: [{ role: "wizard", content: "x" }] }),
          "messages[0].role",
        ),
        'messages[0].role: expected one of "system", "developer", "user", "assistant", "tool", got "wizard"',
      );
      assert.equal(
        await openai("/v1/completions", { model: "fake-model", prompt: { text: "hi" } }, "prompt"),
        "prompt: expected a string or an array, got object",
      );
      assert.equal(
        await openai("/v1/conversations", { items: "hi" }, "items"),
        "items: expected an array, got string",
      );
      const messages = await t.post("/v1/messages", {
        model: "fake-model",
        max_tokens: 16,
        messages: [{ role: "user", content: 5 }],
      });
      assert.equal(messages.status, 400);
      assert.deepEqual(await messages.json(), {
        type: "error",
        error: {
          type: "invalid_request_error",
          message: "messages[0].content: expected a string or an array, got number",
        },
      });
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
      assert.match(
        wrongModel.error.message,
        /^The model `gpt-9` does not exist; this server serves `[^`]+`\.$/,
      );
      await expectError(await t.post("/v1/nothing", {}), 404);
    });
  });

  test("a wrong method on a route is a 405 whose Allow header names the route's methods, in the API's error shape", async () => {
    await withServer({}, {}, async (t) => {
      const call = (method: string, path: string) => fetch(`${t.url}${path}`, { method });
      const cases: [method: string, path: string, allow: string][] = [
        ["GET", "/v1/chat/completions", "POST"],
        ["PUT", "/v1/completions", "POST"],
        ["DELETE", "/v1/models", "GET, HEAD"],
        ["POST", "/v1/models/fake-model", "GET, HEAD"],
        ["GET", "/v1/responses", "POST"],
        ["PUT", "/v1/responses/resp_1", "DELETE, GET, HEAD"],
        ["PATCH", "/v1/conversations/conv_1/items", "GET, HEAD, POST"],
        ["GET", "/tokenize", "POST"],
        ["POST", "/health", "GET, HEAD"],
      ];
      for (const [method, path, allow] of cases) {
        const response = await call(method, path);
        assert.equal(response.headers.get("allow"), allow, `${method} ${path}`);
        const { error } = await expectError(response, 405, null);
        assert.equal(error.code, "method_not_allowed");
        assert.equal(error.message, `${method} is not allowed on ${path}; it takes ${allow}`);
      }
      const messages = await call("GET", "/v1/messages");
      assert.equal(messages.status, 405);
      assert.equal(messages.headers.get("allow"), "POST");
      assert.deepEqual(await messages.json(), {
        type: "error",
        error: {
          type: "invalid_request_error",
          message: "GET is not allowed on /v1/messages; it takes POST",
        },
      });
      await expectError(await call("GET", "/v1/nothing"), 404);
      assert.equal((await call("GET", "/v1/nothing")).headers.get("allow"), null);
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

describe("robustness", () => {
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
        /maximum context length is 1000 tokens\. However, your prompt resulted in at least 1875 tokens/,
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
});
