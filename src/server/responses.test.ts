/**
 * POST /v1/responses over the fake engine: how input items and tools reach the prompt, the program id
 * a Codex session gets, the store, and the streamed event sequence.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createApp } from "./app.js";
import { chatRequestOf, inputMessages } from "./responses-input.js";
import { responsesSchema } from "./responses-schema.js";
import { ResponseStore } from "./responses-store.js";
import { FakeEngine, type FakeEngineOptions } from "./test-support/fake-engine.js";
import type { Json } from "./test-support/test-server.js";

const CALL = '<tool_call>\n{"name": "run_shell", "arguments": {"command": "ls"}}\n</tool_call>';
const RUN_SHELL = {
  type: "function",
  name: "run_shell",
  parameters: { type: "object", properties: { command: { type: "string" } } },
};

function server(engineOptions: FakeEngineOptions = {}, apiKeys: string[] = []) {
  const engine = new FakeEngine(engineOptions);
  const logged: string[] = [];
  const { app } = createApp({ engine, apiKeys, logError: (line) => logged.push(line), dashboard: false });
  const post = (body: unknown, headers: Record<string, string> = {}) =>
    app.request("/v1/responses", {
      method: "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body: JSON.stringify(body),
    });
  const call = (method: "GET" | "DELETE", path: string, headers: Record<string, string> = {}) =>
    app.request(path, { method, headers });
  return { engine, logged, post, call };
}

/** The `event:` names and `data:` payloads of a Responses SSE body. */
function sseEvents(text: string): { event: string; data: Json }[] {
  return text
    .split("\n\n")
    .filter((frame) => frame.length > 0)
    .map((frame) => {
      const [eventLine, dataLine] = frame.split("\n") as [string, string];
      return { event: eventLine.slice("event: ".length), data: JSON.parse(dataLine.slice("data: ".length)) };
    });
}

describe("Responses input as chat messages", () => {
  test("developer turns become system; calls join the assistant turn; outputs become tool turns", () => {
    const messages = inputMessages([
      { role: "developer", content: [{ type: "input_text", text: "Be brief." }] },
      { type: "message", role: "user", content: "Fix it." },
      { type: "reasoning", summary: [] },
      { type: "message", role: "assistant", content: [{ type: "output_text", text: "Looking." }] },
      { type: "function_call", call_id: "c1", name: "run_shell", arguments: '{"command":"ls"}' },
      { type: "function_call", call_id: "c2", name: "read", arguments: "{}" },
      { type: "function_call_output", call_id: "c1", output: "a.txt" },
      { type: "function_call_output", call_id: "c2", output: [{ type: "input_text", text: "hi" }] },
    ]);
    assert.deepEqual(messages, [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Fix it." },
      {
        role: "assistant",
        content: "Looking.",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "run_shell", arguments: '{"command":"ls"}' } },
          { id: "c2", type: "function", function: { name: "read", arguments: "{}" } },
        ],
      },
      { role: "tool", content: "a.txt", tool_call_id: "c1", name: "run_shell" },
      { role: "tool", content: "hi", tool_call_id: "c2", name: "read" },
    ]);
  });

  test("instructions come first; hosted tools are dropped and a forced hosted tool falls back to auto", () => {
    const body = responsesSchema.parse({
      instructions: "You are Codex.",
      input: "hi",
      tools: [RUN_SHELL, { type: "web_search" }, { type: "namespace", name: "mcp" }, { type: "web_search" }],
      tool_choice: { type: "web_search" },
      reasoning: { effort: "high" },
      include: ["reasoning.encrypted_content"],
      store: false,
    });
    const { chat, droppedTools, tools } = chatRequestOf(body, []);
    assert.deepEqual(chat.messages, [
      { role: "system", content: "You are Codex." },
      { role: "user", content: "hi" },
    ]);
    assert.deepEqual(droppedTools, ["web_search", "namespace"]);
    assert.deepEqual(
      tools.map((t) => t.name),
      ["run_shell"],
    );
    assert.equal(chat.tool_choice, "auto");
  });

  test("an image part or an unknown item type is a 400 naming it", async () => {
    const { post } = server();
    const image = await post({
      input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }],
    });
    assert.equal(image.status, 400);
    assert.equal(((await image.json()) as Json).error.param, "input[0].content[0]");
    const unknown = await post({ input: [{ type: "item_reference", id: "msg_1" }] });
    assert.equal(unknown.status, 400);
    assert.equal(((await unknown.json()) as Json).error.param, "input[0].type");
  });
});

describe("POST /v1/responses (fake engine)", () => {
  test("a call in the output is a function_call item; dropped tools are absent from tools, logged once", async () => {
    const { post, logged, engine } = server({ reply: () => CALL });
    const body = { input: "list", tools: [RUN_SHELL, { type: "web_search" }] };
    const first = await post(body);
    assert.equal(first.status, 200);
    assert.equal(first.headers.get("x-continuum-dropped-tools"), "web_search");
    const response = (await first.json()) as Json;
    assert.equal(response.status, "completed");
    assert.deepEqual(
      response.tools.map((t: Json) => t.name),
      ["run_shell"],
    );
    assert.equal(response.output.length, 1);
    const call = response.output[0];
    assert.equal(call.type, "function_call");
    assert.match(call.id, /^fc_/);
    assert.equal(call.name, "run_shell");
    assert.deepEqual(JSON.parse(call.arguments), { command: "ls" });
    assert.ok(engine.requests[0]!.prompt.includes('"name":"run_shell"'));
    assert.ok(!engine.requests[0]!.prompt.includes("web_search"));
    await post(body);
    assert.equal(logged.filter((line) => line.includes('"web_search"')).length, 1);
  });

  test("max_output_tokens cuts the output: status incomplete, with the reason", async () => {
    const { post } = server({ reply: () => ["one ", "two ", "three ", "four"] });
    const response = (await (await post({ input: "count", max_output_tokens: 2 })).json()) as Json;
    assert.equal(response.status, "incomplete");
    assert.deepEqual(response.incomplete_details, { reason: "max_output_tokens" });
    assert.equal(response.usage.output_tokens, 2);
    assert.equal(response.usage.output_tokens_details.reasoning_tokens, 0);
  });

  test("the response object has every field Open Responses requires: the request's values, else neutral ones", async () => {
    const { post } = server({ reply: () => ["one ", "two"] });
    const settings = {
      user: "u-1",
      safety_identifier: "safe-1",
      prompt_cache_key: "key-1",
      max_tool_calls: 3,
      top_logprobs: 2,
      presence_penalty: 0.5,
      frequency_penalty: -0.5,
    };
    const given = (await (
      await post({ input: "hi", tools: [RUN_SHELL], tool_choice: { type: "web_search" }, ...settings })
    ).json()) as Json;
    for (const [key, value] of Object.entries(settings)) assert.equal(given[key], value, key);
    assert.equal(given.tool_choice, "auto", "a dropped hosted tool's choice ran as auto");
    assert.deepEqual(given.tools, [{ ...RUN_SHELL, description: null, strict: null }]);
    assert.equal(given.status, "completed");
    assert.ok(Number.isInteger(given.completed_at) && given.completed_at >= given.created_at);
    assert.equal(given.background, false);
    assert.equal(given.service_tier, "default");

    const plain = (await (await post({ input: "hi" })).json()) as Json;
    for (const key of ["user", "safety_identifier", "prompt_cache_key", "max_tool_calls"])
      assert.equal(plain[key], null, key);
    assert.equal(plain.top_logprobs, 0);
    assert.equal(plain.presence_penalty, 0);
    assert.equal(plain.frequency_penalty, 0);

    const cut = (await (await post({ input: "hi", max_output_tokens: 1 })).json()) as Json;
    assert.equal(cut.status, "incomplete");
    assert.equal(cut.completed_at, null);

    const events = sseEvents(await (await post({ input: "hi", stream: true, user: "u-2" })).text());
    const snapshots = events.filter((e) => e.data.response).map((e) => e.data.response);
    assert.deepEqual(
      snapshots.map((r) => [r.status, r.completed_at === null, r.user]),
      [
        ["in_progress", true, "u-2"],
        ["in_progress", true, "u-2"],
        ["completed", false, "u-2"],
      ],
    );
  });

  test("a Codex session is one program: session-id, then thread-id, client_metadata, prompt_cache_key", async () => {
    const { post, engine } = server();
    await post({ input: "a", prompt_cache_key: "key" }, { "session-id": "s1", "thread-id": "t1" });
    await post({ input: "a", prompt_cache_key: "key" }, { "thread-id": "t1" });
    await post({ input: "a", prompt_cache_key: "key", client_metadata: { session_id: "m1" } });
    await post({ input: "a", prompt_cache_key: "key" });
    await post({ input: "a", prompt_cache_key: "key" }, { "x-program-id": "explicit", "session-id": "s1" });
    await post({ input: "a" });
    assert.deepEqual(
      engine.requests.map((r) => r.programId),
      ["s1", "t1", "m1", "key", "explicit", null],
    );
  });

  test("store: true keeps the conversation for previous_response_id, per tenant; unknown ids are 404", async () => {
    const { post, engine } = server({ reply: () => "Hello Ada." }, ["key-a", "key-b"]);
    const asA = { Authorization: "Bearer key-a" };
    const first = (await (
      await post({ instructions: "Old rules.", input: "I am Ada.", store: true }, asA)
    ).json()) as Json;
    const second = await post({ previous_response_id: first.id, input: "Who am I?" }, asA);
    assert.equal(second.status, 200);
    const prompt = engine.requests[1]!.prompt;
    assert.ok(/I am Ada\.[\s\S]*Hello Ada\.[\s\S]*Who am I\?/.test(prompt), prompt);
    assert.ok(!prompt.includes("Old rules."), "instructions are not carried over");
    const otherTenant = await post(
      { previous_response_id: first.id, input: "Who am I?" },
      {
        Authorization: "Bearer key-b",
      },
    );
    assert.equal(otherTenant.status, 404);
    const notStored = await post(
      { previous_response_id: ((await second.json()) as Json).id, input: "x" },
      asA,
    );
    assert.equal(notStored.status, 404);
    assert.equal(((await notStored.json()) as Json).error.code, "previous_response_not_found");
  });

  test("a stored response comes back from GET /v1/responses/{id} as it was returned, to its tenant, until DELETE", async () => {
    const { post, call } = server({ reply: () => "Hello Ada." }, ["key-a", "key-b"]);
    const asA = { Authorization: "Bearer key-a" };
    const whole = (await (await post({ input: "I am Ada.", store: true }, asA)).json()) as Json;
    const streamed = sseEvents(
      await (await post({ input: "Again.", store: true, stream: true }, asA)).text(),
    );
    const completed = streamed.at(-1)!.data.response;
    for (const response of [whole, completed]) {
      const got = await call("GET", `/v1/responses/${response.id}`, asA);
      assert.equal(got.status, 200);
      assert.deepEqual(await got.json(), response);
    }
    assert.equal(
      (await call("GET", `/v1/responses/${whole.id}`, { Authorization: "Bearer key-b" })).status,
      404,
    );
    const notStored = (await (await post({ input: "x" }, asA)).json()) as Json;
    assert.equal((await call("GET", `/v1/responses/${notStored.id}`, asA)).status, 404);

    const deleted = await call("DELETE", `/v1/responses/${whole.id}`, asA);
    assert.deepEqual(await deleted.json(), { id: whole.id, object: "response", deleted: true });
    const gone = await call("GET", `/v1/responses/${whole.id}`, asA);
    assert.equal(gone.status, 404);
    assert.match(((await gone.json()) as Json).error.message, /not found/);
    assert.equal((await post({ previous_response_id: whole.id, input: "Who am I?" }, asA)).status, 404);
    assert.equal((await call("DELETE", `/v1/responses/${whole.id}`, asA)).status, 404);
  });

  test("text.format: structured outputs as a grammar, echoed in the response; a schema it cannot enforce is a 400", async () => {
    const { post, engine } = server({ reply: () => '{"ok": true}' });
    const schema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"] };
    const format = { type: "json_schema", name: "answer", schema, strict: true };
    const response = (await (await post({ input: "Is it?", text: { format } })).json()) as Json;
    assert.match(engine.requests[0]!.sampling.grammar ?? "", /"\\"ok\\"" ws ":" ws boolean/);
    assert.deepEqual(response.text, { format: { ...format, description: null } });
    await post({ input: "JSON.", text: { format: { type: "json_object" } } });
    assert.match(engine.requests[1]!.sampling.grammar ?? "", /^root ::= object$/m);
    const plain = (await (await post({ input: "Text.", text: { format: { type: "text" } } })).json()) as Json;
    assert.equal(engine.requests[2]!.sampling.grammar, null);
    assert.deepEqual(plain.text, { format: { type: "text" } });

    const unenforceable = { ...format, schema: { $ref: "#/nowhere" } };
    const refused = await post({ input: "x", text: { format: unenforceable } });
    assert.equal(refused.status, 400);
    assert.equal(((await refused.json()) as Json).error.param, "text.format.schema");
    const forced = await post({ input: "x", text: { format }, tools: [RUN_SHELL], tool_choice: "required" });
    assert.equal(forced.status, 400);
    assert.equal(((await forced.json()) as Json).error.param, "text.format");
    assert.equal(engine.requests.length, 3, "a refused request never reaches the engine");
  });

  test("the store keeps the most recently used responses", () => {
    const store = new ResponseStore(2);
    const turn = (content: string) => ({ conversation: [{ role: "user" as const, content }], response: {} });
    store.set(null, "a", turn("a"));
    store.set(null, "b", turn("b"));
    store.get(null, "a");
    store.set(null, "c", turn("c"));
    assert.deepEqual(store.get(null, "a"), turn("a"));
    assert.equal(store.get(null, "b"), undefined);
    assert.equal(store.get("tenant-2", "a"), undefined);
  });

  test("streaming: text then a call, as the Responses events in order", async () => {
    const pieces = [
      "Let me look.",
      "\n<tool_call>\n",
      '{"name": "run_shell", ',
      '"arguments": {"command": "ls"}}',
      "\n</tool_call>",
    ];
    const { post } = server({ reply: () => pieces });
    const res = await post({ input: "list", tools: [RUN_SHELL], stream: true });
    assert.equal(res.headers.get("content-type"), "text/event-stream; charset=utf-8");
    const events = sseEvents(await res.text());
    for (const [i, { event, data }] of events.entries()) {
      assert.equal(data.type, event);
      assert.equal(data.sequence_number, i);
    }
    const types = events.map((e) => e.event).filter((t, i, all) => t !== all[i - 1] || !t.endsWith(".delta"));
    assert.deepEqual(types, [
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const text = events
      .filter((e) => e.event === "response.output_text.delta")
      .map((e) => e.data.delta)
      .join("");
    const args = events
      .filter((e) => e.event === "response.function_call_arguments.delta")
      .map((e) => e.data.delta)
      .join("");
    assert.equal(text.trim(), "Let me look.");
    assert.deepEqual(JSON.parse(args), { command: "ls" });
    const completed = events.at(-1)!.data.response;
    assert.equal(completed.status, "completed");
    assert.deepEqual(
      completed.output.map((item: Json) => item.type),
      ["message", "function_call"],
    );
    const announced = events.find((e) => e.data.item?.type === "function_call")!.data.item;
    assert.equal(completed.output[1].call_id, announced.call_id);
    assert.deepEqual(JSON.parse(completed.output[1].arguments), { command: "ls" });
    assert.equal(completed.usage.total_tokens, completed.usage.input_tokens + completed.usage.output_tokens);
  });
});
