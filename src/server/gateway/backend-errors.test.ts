import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ContextOverflow } from "../generation/context-overflow.js";
import { anthropicErrorBody } from "../messages/messages-errors.js";
import { backendError } from "./backend-errors.js";

describe("a backend's refusal as the gateway's client reads it", () => {
  it("a context overflow, in each engine's words, is the client's own context-overflow error", () => {
    const cases: [unknown, number, number][] = [
      // llama-server
      [
        {
          error: {
            code: 400,
            message: "the request exceeds the available context size, try increasing it",
            type: "exceed_context_size_error",
            n_prompt_tokens: 5012,
            n_ctx: 4096,
          },
        },
        5012,
        4096,
      ],
      // vLLM
      [
        {
          error: {
            message:
              "This model's maximum context length is 8192 tokens. However, your request has 9000 input tokens. Please reduce the length of the input messages.",
            type: "BadRequestError",
            code: 400,
          },
        },
        9000,
        8192,
      ],
      // Continuum
      [
        {
          error: {
            message:
              "This model's maximum context length is 4096 tokens. However, your messages resulted in 5000 tokens. Please reduce the length of the messages.",
            type: "invalid_request_error",
            code: "context_length_exceeded",
          },
        },
        5000,
        4096,
      ],
      // Anthropic's words (a Continuum replica's /v1/messages)
      [
        {
          type: "error",
          error: { type: "invalid_request_error", message: "prompt is too long: 5000 tokens > 4095 maximum" },
        },
        5000,
        4096,
      ],
      // SGLang
      [
        {
          object: "error",
          message: "The input (40000 tokens) is longer than the model's context length (32768 tokens).",
          type: "BadRequestError",
        },
        40000,
        32768,
      ],
    ];
    for (const [body, prompt, context] of cases) {
      const error = backendError("b1", 400, body);
      assert.ok(error instanceof ContextOverflow, JSON.stringify(body));
      assert.equal(error.code, "context_length_exceeded");
      assert.equal(error.promptTokens, prompt);
      assert.equal(error.maxContextTokens, context);
      assert.equal(
        anthropicErrorBody(error).error.message,
        `prompt is too long: ${prompt} tokens > ${context - 1} maximum`,
        "Claude Code reads Anthropic's words",
      );
    }
  });

  it("other refusals keep the backend's status, message, type and code", () => {
    const error = backendError("b2", 422, {
      error: {
        message: "temperature must be >= 0",
        type: "invalid_request_error",
        code: "invalid_value",
        param: "temperature",
      },
    });
    assert.deepEqual(
      [error.status, error.message, error.type, error.code, error.param],
      [422, "temperature must be >= 0", "invalid_request_error", "invalid_value", "temperature"],
    );
    const fastApi = backendError("b2", 500, { detail: "engine crashed" });
    assert.deepEqual(
      [fastApi.status, fastApi.message, fastApi.type],
      [500, "engine crashed", "server_error"],
    );
    const text = backendError("b3", 502, "Bad Gateway");
    assert.equal(text.message, "Bad Gateway");
  });
});
