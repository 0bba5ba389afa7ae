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

/** A field of a route's body where a value goes: `@@` in the body's text is replaced by it. */
interface Slot {
  /** the field the error names */
  readonly field: string;
  readonly path: string;
  readonly body: string;
  /** the field holds JSON as a string (a call's arguments), which nests as deep as its text */
  readonly jsonString?: boolean;
}

const chatTurns = (args: string) =>
  `"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":${args}}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]`;
const chatTools = `"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]`;
const anthropicTurns = (input: string) =>
  `"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":${input}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]`;
const anthropic = (fields: string) => `{"model":"fake-model","max_tokens":4,${fields}}`;
const responseTurns = (args: string) =>
  `"input":[{"type":"message","role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"f","arguments":${args}},{"type":"function_call_output","call_id":"c1","output":"ok"}]`;
const user = `"messages":[{"role":"user","content":"hi"}]`;

/** Every route that reads a JSON body, with the fields its clients fill with JSON of their own. */
const DEEP_SLOTS: readonly Slot[] = [
  {
    field: "messages[1].tool_calls[0].function.arguments",
    path: "/v1/chat/completions",
    body: `{${chatTurns("@@")},${chatTools}}`,
  },
  {
    field: "messages[1].tool_calls[0].function.arguments",
    path: "/v1/chat/completions",
    body: `{${chatTurns("@@")},${chatTools}}`,
    jsonString: true,
  },
  {
    field: "messages[0].content",
    path: "/v1/chat/completions",
    body: `{"messages":[{"role":"user","content":@@}]}`,
  },
  {
    field: "tools[0].function.parameters",
    path: "/v1/chat/completions",
    body: `{${user},"tools":[{"type":"function","function":{"name":"f","parameters":@@}}]}`,
  },
  {
    field: "response_format.json_schema.schema",
    path: "/v1/chat/completions",
    body: `{${user},"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":@@}}}`,
  },
  {
    field: "structured_outputs.json",
    path: "/v1/chat/completions",
    body: `{${user},"structured_outputs":{"json":@@}}`,
    jsonString: true,
  },
  {
    field: "chat_template_kwargs.x",
    path: "/v1/chat/completions",
    body: `{${user},"chat_template_kwargs":{"x":@@}}`,
  },
  { field: "unknown_field", path: "/v1/chat/completions", body: `{${user},"unknown_field":@@}` },
  {
    field: "structured_outputs.json",
    path: "/v1/completions",
    body: `{"prompt":"hi","structured_outputs":{"json":@@}}`,
  },
  { field: "prompt", path: "/v1/completions", body: `{"prompt":@@}` },
  { field: "messages[1].content[0].input", path: "/v1/messages", body: anthropic(anthropicTurns("@@")) },
  {
    field: "tools[0].input_schema",
    path: "/v1/messages",
    body: anthropic(`${user},"tools":[{"name":"f","input_schema":@@}]`),
  },
  { field: "metadata", path: "/v1/messages", body: anthropic(`${user},"metadata":@@`) },
  {
    field: "messages[1].content[0].input",
    path: "/v1/messages/count_tokens",
    body: anthropic(anthropicTurns("@@")),
  },
  { field: "system", path: "/v1/messages/count_tokens", body: anthropic(`${user},"system":@@`) },
  {
    field: "input[1].arguments",
    path: "/v1/responses",
    body: `{"model":"fake-model",${responseTurns("@@")}}`,
    jsonString: true,
  },
  {
    field: "input[0].content",
    path: "/v1/responses",
    body: `{"model":"fake-model","input":[{"type":"message","role":"user","content":@@}]}`,
  },
  {
    field: "tools[0].parameters",
    path: "/v1/responses",
    body: `{"model":"fake-model","input":"hi","tools":[{"type":"function","name":"f","parameters":@@}]}`,
  },
  {
    field: "text.format.schema",
    path: "/v1/responses",
    body: `{"model":"fake-model","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":@@}}}`,
  },
  { field: "prompt", path: "/v1/responses", body: `{"model":"fake-model","input":"hi","prompt":@@}` },
  {
    field: "messages[1].tool_calls[0].function.arguments",
    path: "/tokenize",
    body: `{${chatTurns("@@")},${chatTools}}`,
  },
  {
    field: "messages[1].tool_calls[0].function.arguments",
    path: "/tokenize",
    body: `{${chatTurns("@@")},${chatTools}}`,
    jsonString: true,
  },
  { field: "prompt", path: "/tokenize", body: `{"prompt":@@}` },
  { field: "tokens", path: "/detokenize", body: `{"tokens":@@}` },
  {
    field: "items[0].content",
    path: "/v1/conversations",
    body: `{"items":[{"type":"message","role":"user","content":@@}]}`,
  },
  { field: "items[0]", path: "/v1/conversations", body: `{"items":[@@]}` },
  {
    field: "items[0].content",
    path: "/v1/conversations/{id}/items",
    body: `{"items":[{"type":"message","role":"user","content":@@}]}`,
  },
  { field: "metadata", path: "/v1/conversations/{id}", body: `{"metadata":@@}` },
];

/** JSON nested `depth` levels, each level an array or an object as `kinds` picks, as text (JSON.stringify cannot go this deep). */
function deepJson(depth: number, kinds: readonly boolean[]): string {
  let open = "";
  let close = "";
  for (let level = 0; level < depth; level++) {
    const array = kinds[level % kinds.length] as boolean;
    open += array ? "[" : '{"a":';
    close = (array ? "]" : "}") + close;
  }
  return `${open}1${close}`;
}

const deepCase = fc.record({
  slot: fc.constantFrom(...DEEP_SLOTS),
  depth: fc.integer({ min: 65, max: 20_000 }),
  kinds: fc.array(fc.boolean(), { minLength: 1, maxLength: 4 }),
});

describe("HTTP fuzz", () => {
  test("JSON nested thousands of levels deep in any field of any route is a 400 naming the field", async () => {
    await withServer({ reply: () => ["a ", "b"] }, {}, async (t) => {
      const conversation = (await (await t.post("/v1/conversations", {})).json()) as { id: string };
      await fc.assert(
        fc.asyncProperty(deepCase, async ({ slot, depth, kinds }) => {
          const deep = deepJson(depth, kinds);
          const body = slot.body.replace("@@", slot.jsonString ? JSON.stringify(deep) : deep);
          const response = await t.post(slot.path.replace("{id}", conversation.id), body);
          const text = await response.text();
          assert.equal(response.status, 400, `${slot.path} ${slot.body}: ${text.slice(0, 300)}`);
          assert.ok(
            text.includes(`${slot.field}`) && text.includes("nests deeper than 64 levels"),
            text.slice(0, 300),
          );
          assert.equal((await fetch(`${t.url}/health`)).status, 200);
        }),
        { numRuns: 300, seed: 57 },
      );
    });
  });

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
