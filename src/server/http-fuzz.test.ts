/**
 * Whatever a client sends — well-formed or not, program fields of any shape, odd headers — the server
 * answers with a status below 500 and stays up: /health answers after every case.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "../core/test-support/fast-check.js";
import { withServer } from "./test-support/test-server.js";

const anyJson = fc.jsonValue({ maxDepth: 4 });
const programField = fc.oneof(
  fc.string({ maxLength: 300 }),
  fc.integer(),
  fc.double(),
  fc.constant(null),
  fc.boolean(),
  anyJson,
);
const message = fc.record(
  {
    role: fc.oneof(fc.constantFrom("system", "user", "assistant", "tool", "developer"), fc.string()),
    content: fc.oneof(fc.string({ maxLength: 200 }), fc.constant(null), anyJson),
    tool_calls: anyJson,
    tool_call_id: fc.string(),
    name: fc.string(),
  },
  { requiredKeys: ["role"] },
);
const tool = fc.record({
  type: fc.oneof(fc.constant("function"), fc.string()),
  function: fc.record(
    { name: fc.string(), description: fc.string(), parameters: anyJson },
    { requiredKeys: [] },
  ),
});
const chatBody = fc.record(
  {
    model: fc.oneof(fc.constant("fake-model"), fc.string()),
    messages: fc.oneof(fc.array(message, { maxLength: 4 }), anyJson),
    tools: fc.oneof(fc.array(tool, { maxLength: 3 }), anyJson),
    tool_choice: fc.oneof(fc.constantFrom("auto", "none", "required"), anyJson),
    max_tokens: fc.oneof(fc.integer({ min: -5, max: 100_000 }), anyJson),
    max_completion_tokens: fc.oneof(fc.integer({ min: -5, max: 100_000 }), anyJson),
    temperature: fc.oneof(fc.double(), anyJson),
    stream: fc.oneof(fc.boolean(), anyJson),
    stop: fc.oneof(fc.string(), fc.array(fc.string()), anyJson),
    response_format: anyJson,
    job_id: programField,
    program_id: programField,
    session_id: programField,
    session_params: anyJson,
    is_last_step: fc.oneof(fc.boolean(), anyJson),
    this_func_call: programField,
    cache_control: anyJson,
    cache_salt: programField,
    expected_tool_duration_s: fc.oneof(fc.double(), anyJson),
    continue_final_message: fc.oneof(fc.boolean(), anyJson),
    add_generation_prompt: fc.oneof(fc.boolean(), anyJson),
    structured_outputs: anyJson,
    guided_regex: fc.oneof(fc.string({ maxLength: 40 }), anyJson),
    guided_choice: anyJson,
    min_tokens: fc.oneof(fc.integer({ min: -5, max: 200 }), anyJson),
    thinking_budget: fc.oneof(fc.integer({ min: -5, max: 200 }), anyJson),
    reasoning_effort: anyJson,
    skip_special_tokens: fc.oneof(fc.boolean(), anyJson),
    return_token_ids: fc.oneof(fc.boolean(), anyJson),
    reasoning_content: anyJson,
  },
  { requiredKeys: [] },
);
const completionBody = fc.record(
  {
    model: fc.string(),
    prompt: fc.oneof(
      fc.string({ maxLength: 300 }),
      fc.array(fc.string()),
      fc.array(fc.integer({ min: -2, max: 200 }), { maxLength: 40 }),
      anyJson,
    ),
    min_tokens: fc.oneof(fc.integer({ min: -5, max: 200 }), anyJson),
    structured_outputs: anyJson,
    max_tokens: fc.oneof(fc.integer({ min: -5, max: 100_000 }), anyJson),
    echo: anyJson,
    logprobs: anyJson,
    stream: fc.oneof(fc.boolean(), anyJson),
    job_id: programField,
  },
  { requiredKeys: [] },
);
const responsesBody = fc.record(
  {
    model: fc.string(),
    input: fc.oneof(fc.string({ maxLength: 200 }), fc.array(anyJson, { maxLength: 4 }), anyJson),
    instructions: fc.oneof(fc.string({ maxLength: 100 }), anyJson),
    background: fc.oneof(fc.boolean(), anyJson),
    store: fc.oneof(fc.boolean(), anyJson),
    stream: fc.oneof(fc.boolean(), anyJson),
    previous_response_id: fc.oneof(fc.string({ maxLength: 40 }), anyJson),
    max_output_tokens: fc.oneof(fc.integer({ min: -5, max: 100_000 }), anyJson),
  },
  { requiredKeys: [] },
);
const headerValue = fc.stringMatching(/^[\x20-\x7e]{0,300}$/);
const request = fc.record({
  path: fc.constantFrom(
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/models",
    "/v1/programs/x",
    "/v1/messages",
    "/v1/responses",
    "/v1/responses/resp_x",
    "/v1/responses/resp_x/cancel",
    "/v1/responses/resp_x/input_items?limit=0&order=up&after=",
    "/v1/responses/resp_x?stream=true&starting_after=-1",
    "/tokenize",
    "/detokenize",
    "/v1/nope",
  ),
  method: fc.constantFrom("POST", "POST", "POST", "GET", "DELETE", "PUT"),
  body: fc.oneof(chatBody, completionBody, responsesBody, anyJson, fc.string({ maxLength: 200 })),
  /** cut the JSON text short (malformed bodies); 0: send it whole */
  cut: fc.oneof(fc.constant(0), fc.nat({ max: 400 })),
  headers: fc.record(
    {
      "x-program-id": headerValue,
      "x-session-id": headerValue,
      "x-last-step": headerValue,
      "x-request-id": headerValue,
      "content-type": fc.constantFrom("application/json", "text/plain", "application/x-www-form-urlencoded"),
    },
    { requiredKeys: [] },
  ),
});

describe("HTTP fuzz", () => {
  test("2000 arbitrary requests: never a 5xx, and /health answers after each", async () => {
    await withServer({ reply: () => ["a ", "b"] }, {}, async (t) => {
      await fc.assert(
        fc.asyncProperty(request, async (r) => {
          const init: RequestInit = { method: r.method, headers: r.headers };
          if (r.method !== "GET") {
            const text = typeof r.body === "string" ? r.body : (JSON.stringify(r.body) ?? "");
            init.body = r.cut > 0 ? text.slice(0, r.cut) : text;
          }
          const response = await fetch(`${t.url}${r.path}`, init);
          await response.arrayBuffer();
          assert.ok(response.status < 500, `${r.method} ${r.path} -> ${response.status}`);
          assert.equal((await fetch(`${t.url}/health`)).status, 200);
        }),
        { numRuns: 2000 },
      );
    });
  });
});
