/**
 * POST /v1/responses over the fake engine: how input items and tools reach the prompt, the program id
 * a Codex session gets, the store, and the streamed event sequence; then a stored response's input items,
 * background responses (polled, replayed, cancelled, failed, drained) and the refusals around them.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type { GenerateEvent, GenerateRequest } from "../../engine/engine-api.js";
import { createApp } from "../app.js";
import { FakeEngine, type FakeEngineOptions } from "../test-support/fake-engine.js";
import { type Json, withServer } from "../test-support/test-server.js";
import type { BackgroundRun } from "./responses-background.js";
import { chatRequestOf, inputMessages } from "./responses-input.js";
import type { ResponseObject } from "./responses-output.js";
import { responsesSchema } from "./responses-schema.js";
import { ResponseStore, type StoredResponse } from "./responses-store.js";

const CALL = '<tool_call>\n{"name": "run_shell", "arguments": {"command": "ls"}}\n</tool_call>';
const RUN_SHELL = {
  type: "function",
  name: "run_shell",
  parameters: { type: "object", properties: { command: { type: "string" } } },
};

const LOOKUP = {
  type: "function",
  name: "lookup",
  parameters: { type: "object", properties: { city: { type: "string" } } },
};
/** Codex sends each MCP server's tools as one namespace. */
const NAMESPACE = {
  type: "namespace",
  name: "mcp__fixture",
  description: "Tools of the fixture MCP server.",
  tools: [LOOKUP, { type: "local_shell" }],
};
/** Codex's freeform apply_patch, as GPT-5 gets it. */
const APPLY_PATCH = {
  type: "custom",
  name: "apply_patch",
  description: "Edit files with a patch.",
  format: {
    type: "grammar",
    syntax: "lark",
    definition: 'start: begin_patch hunk+ end_patch\nbegin_patch: "*** Begin Patch" LF',
  },
};
const FREE_NOTE = { type: "custom", name: "note" };
const LOOKUP_CALL =
  '<tool_call>\n{"name": "mcp__fixture__lookup", "arguments": {"city": "Oslo"}}\n</tool_call>';

function server(
  engineOptions: FakeEngineOptions = {},
  apiKeys: string[] = [],
  engine = new FakeEngine(engineOptions),
  maxInflightRequests: number | null = null,
) {
  const logged: string[] = [];
  const api = createApp({
    engine,
    apiKeys,
    logError: (line) => logged.push(line),
    dashboard: false,
    maxInflightRequests,
  });
  const { app } = api;
  /** `signal`: the client's connection (aborted: the client went away) */
  const post = (body: unknown, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    app.request("/v1/responses", {
      method: "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
  const call = (method: "GET" | "DELETE" | "POST", path: string, headers: Record<string, string> = {}) =>
    app.request(path, { method, headers });
  return { engine, logged, post, call, api };
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
      tools: [RUN_SHELL, { type: "web_search" }, { type: "local_shell" }, { type: "web_search" }],
      tool_choice: { type: "web_search" },
      reasoning: { effort: "high" },
      include: ["reasoning.encrypted_content"],
      store: false,
    });
    const { chat, tools } = chatRequestOf(body, []);
    assert.deepEqual(chat.messages, [
      { role: "system", content: "You are Codex." },
      { role: "user", content: "hi" },
    ]);
    assert.deepEqual(tools.dropped, ["web_search", "local_shell"]);
    assert.deepEqual(
      tools.chatTools.map((t) => t.name),
      ["run_shell"],
    );
    assert.equal(chat.tool_choice, "auto");
  });

  test("a call of a namespaced tool is named <namespace>__<name> in chat; a forced one is too", () => {
    const body = responsesSchema.parse({
      input: [
        { type: "message", role: "user", content: "Weather in Oslo?" },
        { type: "function_call", call_id: "c1", name: "lookup", namespace: "mcp__fixture", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: "rain" },
      ],
      tools: [NAMESPACE],
      tool_choice: { type: "function", name: "lookup", namespace: "mcp__fixture" },
    });
    const { chat, tools } = chatRequestOf(body, []);
    assert.deepEqual(chat.messages.slice(1), [
      {
        role: "assistant",
        content: null,
        tool_calls: [
          { id: "c1", type: "function", function: { name: "mcp__fixture__lookup", arguments: "{}" } },
        ],
      },
      { role: "tool", content: "rain", tool_call_id: "c1", name: "mcp__fixture__lookup" },
    ]);
    assert.deepEqual(chat.tool_choice, { type: "function", function: { name: "mcp__fixture__lookup" } });
    assert.deepEqual(tools.dropped, ["local_shell"]);
    assert.deepEqual(tools.callOf("mcp__fixture__lookup"), {
      type: "function",
      name: "lookup",
      namespace: "mcp__fixture",
    });
    assert.deepEqual(tools.callOf("run_shell"), { type: "function", name: "run_shell" });
  });

  test("an image part or an unknown item type is a 400 naming it", async () => {
    const { post } = server();
    const image = await post({
      input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }],
    });
    assert.equal(image.status, 400);
    assert.equal(((await image.json()) as Json).error.param, "input[0].content[0]");
    const unknown = await post({ input: [{ type: "computer_call", id: "cu_1" }] });
    assert.equal(unknown.status, 400);
    assert.equal(((await unknown.json()) as Json).error.param, "input[0].type");
    const notKept = await post({ input: [{ type: "item_reference", id: "msg_1" }] });
    assert.equal(notKept.status, 400);
    assert.equal(((await notKept.json()) as Json).error.param, "input[0].id");
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

  test("a namespace's tools are offered; their calls come back with the namespace and continue the conversation", async () => {
    const { post, call: request, engine } = server({ reply: () => LOOKUP_CALL });
    const tools = [RUN_SHELL, NAMESPACE];
    const res = await post({ input: "Weather in Oslo?", tools });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("x-continuum-dropped-tools"), "local_shell");
    const response = (await res.json()) as Json;
    assert.ok(engine.requests[0]!.prompt.includes('"name":"mcp__fixture__lookup"'));
    assert.ok(engine.requests[0]!.prompt.includes('"name":"run_shell"'));
    // the response lists the namespace with the tools it offered (its local_shell was dropped)
    assert.deepEqual(response.tools[1], {
      type: "namespace",
      name: "mcp__fixture",
      description: "Tools of the fixture MCP server.",
      tools: [{ ...LOOKUP, description: null, strict: null }],
    });
    const call = response.output[0];
    assert.equal(call.type, "function_call");
    assert.equal(call.name, "lookup");
    assert.equal(call.namespace, "mcp__fixture");
    assert.deepEqual(JSON.parse(call.arguments), { city: "Oslo" });

    // the next turn sends the call back with its namespace: the model sees the name it wrote
    const next = await post({
      previous_response_id: response.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: "rain" }],
      tools,
    });
    assert.equal(next.status, 200);
    const history = engine.requests[1]!.prompt;
    assert.ok(history.includes('"name": "mcp__fixture__lookup"'), history);
    const listed = (await (
      await request("GET", `/v1/responses/${((await next.json()) as Json).id}/input_items?order=asc`)
    ).json()) as Json;
    const listedCall = listed.data.find((item: Json) => item.type === "function_call");
    assert.deepEqual([listedCall.name, listedCall.namespace], ["lookup", "mcp__fixture"]);

    const stream = await post({ input: "Weather in Oslo?", tools, stream: true });
    const events = sseEvents(await stream.text());
    const added = events.find((e) => e.event === "response.output_item.added")!.data.item;
    assert.deepEqual([added.name, added.namespace], ["lookup", "mcp__fixture"]);
    const argsDone = events.find((e) => e.event === "response.function_call_arguments.done")!.data;
    assert.equal(argsDone.name, "lookup");
    const done = events.at(-1)!.data.response.output[0];
    assert.deepEqual([done.name, done.namespace], ["lookup", "mcp__fixture"]);
  });

  test("a custom tool is a function of one string; its call comes back as a custom_tool_call with that text", async () => {
    const patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch";
    const call = `<tool_call>\n${JSON.stringify({ name: "apply_patch", arguments: { input: patch } })}\n</tool_call>`;
    const { post, call: request, engine } = server({ reply: () => call });
    const tools = [
      APPLY_PATCH,
      { type: "namespace", name: "mcp__fs", description: "Files.", tools: [FREE_NOTE] },
    ];
    const response = (await (await post({ input: "Set x to 2.", tools })).json()) as Json;
    // the model is told the input's format, and the grammar itself
    const prompt = engine.requests[0]!.prompt;
    assert.ok(prompt.includes('"name":"apply_patch"') && prompt.includes("Lark grammar"), prompt);
    assert.ok(prompt.includes("begin_patch"), "the grammar's text");
    assert.ok(prompt.includes('"name":"mcp__fs__note"'));
    assert.deepEqual(response.tools, [
      { ...APPLY_PATCH, description: "Edit files with a patch." },
      {
        type: "namespace",
        name: "mcp__fs",
        description: "Files.",
        tools: [{ ...FREE_NOTE, description: null, format: { type: "text" } }],
      },
    ]);
    const item = response.output[0];
    assert.equal(item.type, "custom_tool_call");
    assert.match(item.id, /^ctc_/);
    assert.equal(item.name, "apply_patch");
    assert.equal(item.input, patch);

    // sent back with its output, it is the call the model wrote: the next prompt repeats it
    const next = await post({
      previous_response_id: response.id,
      input: [{ type: "custom_tool_call_output", call_id: item.call_id, output: "Done." }],
      tools,
    });
    assert.equal(next.status, 200);
    assert.ok(engine.requests[1]!.prompt.includes(JSON.stringify(patch).slice(1, 40)));
    const listed = (await (
      await request("GET", `/v1/responses/${((await next.json()) as Json).id}/input_items?order=asc`)
    ).json()) as Json;
    assert.deepEqual(
      listed.data.map((i: Json) => i.type),
      ["message", "custom_tool_call", "custom_tool_call_output"],
    );

    const stream = await post({ input: "Set x to 2.", tools, stream: true });
    const events = sseEvents(await stream.text());
    assert.ok(!events.some((e) => e.event === "response.function_call_arguments.delta"));
    const added = events.find((e) => e.event === "response.output_item.added")!.data.item;
    assert.deepEqual([added.type, added.input], ["custom_tool_call", ""]);
    const deltas = events.filter((e) => e.event === "response.custom_tool_call_input.delta");
    assert.equal(deltas.map((e) => e.data.delta).join(""), patch);
    const done = events.find((e) => e.event === "response.custom_tool_call_input.done")!.data;
    assert.equal(done.input, patch);
    assert.equal(events.at(-1)!.data.response.output[0].input, patch);
  });

  test("a custom tool call given as input is a call of its one string argument", () => {
    const messages = inputMessages([
      { type: "custom_tool_call", call_id: "c1", name: "note", namespace: "mcp__fs", input: "buy milk" },
      { type: "custom_tool_call_output", call_id: "c1", output: "noted" },
    ]);
    assert.deepEqual(messages, [
      {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: "c1",
            type: "function",
            function: { name: "mcp__fs__note", arguments: '{"input":"buy milk"}' },
          },
        ],
      },
      { role: "tool", content: "noted", tool_call_id: "c1", name: "mcp__fs__note" },
    ]);
  });

  test("a namespaced tool whose name is another tool's is a 400 naming it", async () => {
    const { post } = server();
    const clash = { type: "function", name: "mcp__fixture__lookup", parameters: { type: "object" } };
    const res = await post({ input: "hi", tools: [clash, NAMESPACE] });
    assert.equal(res.status, 400);
    assert.equal(((await res.json()) as Json).error.param, "tools[1].tools[0]");
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
    // as OpenAI's: usage only once the response is done, never zeros before
    assert.deepEqual(
      snapshots.map((r) => r.usage === null),
      [true, true, false],
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
      engine.requests.slice(0, 5).map((r) => r.programId),
      ["s1", "t1", "m1", "key", "explicit"],
    );
    // naming none, it runs in a program the server finds for it
    assert.match(engine.requests[5]?.programId ?? "", /^implicit-[0-9a-f]{16}$/);
  });

  test("a response is kept unless store: false (OpenAI's default), continued by previous_response_id per tenant; others are 404", async () => {
    const { post, engine } = server({ reply: () => "Hello Ada." }, ["key-a", "key-b"]);
    const asA = { Authorization: "Bearer key-a" };
    // OpenAI's own multi-turn example: create, then continue, never naming `store`
    const first = (await (
      await post({ instructions: "Old rules.", input: "I am Ada." }, asA)
    ).json()) as Json;
    assert.equal(first.store, true);
    const second = await post({ previous_response_id: first.id, input: "Who am I?", store: false }, asA);
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

  test("a prompt template kept at OpenAI is refused by name, never dropped; an unknown conversation is a 404", async () => {
    const { post, engine } = server({ reply: () => "Hello." });
    const refused = await post({
      input: "And then?",
      prompt: { id: "pmpt_123", variables: { city: "Paris" } },
    });
    assert.equal(refused.status, 400);
    const error = ((await refused.json()) as Json).error;
    assert.deepEqual([error.code, error.param], ["unsupported_parameter", "prompt"]);
    for (const conversation of ["conv_68a1", { id: "conv_68a1" }]) {
      const unknown = await post({ input: "And then?", conversation });
      assert.equal(unknown.status, 404);
      assert.equal(((await unknown.json()) as Json).error.param, "conversation");
    }
    assert.equal(engine.requests.length, 0, "nothing reached the engine without the history it asked for");
    assert.equal((await post({ input: "Hi.", conversation: null })).status, 200);
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
    const notStored = (await (await post({ input: "x", store: false }, asA)).json()) as Json;
    assert.equal(notStored.store, false);
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

  test("the store keeps the most recently used responses, and never forgets a running background one", () => {
    const store = new ResponseStore(2);
    const turn = (content: string, run?: { live: boolean }): StoredResponse => ({
      conversation: [{ role: "user" as const, content }],
      response: {} as ResponseObject,
      inputItems: [],
      ...(run ? { run: run as BackgroundRun } : {}),
    });
    store.set(null, "a", turn("a"));
    store.set(null, "b", turn("b"));
    store.get(null, "a");
    store.set(null, "c", turn("c"));
    assert.deepEqual(store.get(null, "a"), turn("a"));
    assert.equal(store.get(null, "b"), undefined);
    assert.equal(store.get("tenant-2", "a"), undefined);

    const running = { live: true };
    store.set(null, "bg", turn("bg", running));
    store.set(null, "d", turn("d"));
    store.set(null, "e", turn("e"));
    assert.ok(store.get(null, "bg"), "a running background response stays");
    assert.equal(store.get(null, "d"), undefined);
    running.live = false;
    store.set(null, "f", turn("f"));
    store.set(null, "g", turn("g"));
    assert.equal(store.get(null, "bg"), undefined, "an ended one is forgotten as any other");
  });

  test("the store also holds at most so many bytes: a long conversation pushes older responses out, never itself", () => {
    const store = new ResponseStore(1024, 10_000);
    const turn = (content: string): StoredResponse => ({
      conversation: [{ role: "user" as const, content }],
      response: {} as ResponseObject,
      inputItems: [],
    });
    for (const id of ["a", "b", "c"]) store.set(null, id, turn("x".repeat(3000)));
    assert.ok(store.get(null, "a") && store.storedBytes > 9000 && store.storedBytes <= 10_000);
    store.set(null, "d", turn("x".repeat(3000)));
    assert.equal(store.get(null, "b"), undefined, "the least recently used went first");
    assert.ok(store.get(null, "a") && store.get(null, "c") && store.get(null, "d"));
    store.set(null, "huge", turn("x".repeat(50_000)));
    assert.ok(store.get(null, "huge"), "the newest stays even past the budget alone");
    assert.equal(store.get(null, "a"), undefined);
    store.delete(null, "huge");
    assert.equal(store.storedBytes, 0);
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

/** Resolves once `check` holds (polled every 10 ms, for at most 4 s). */
async function eventually(check: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.fail(`timed out waiting for ${what}`);
}

const words = (count: number) => Array.from({ length: count }, (_, i) => `w${i} `);

/** A fake engine whose generations fail after their first piece. */
class FailingEngine extends FakeEngine {
  override generate(request: GenerateRequest, signal: AbortSignal): AsyncIterable<GenerateEvent> {
    const events = super.generate(request, signal);
    return (async function* () {
      for await (const event of events) {
        yield event;
        throw new Error("device lost");
      }
    })();
  }
}

describe("the Responses lifecycle: input items, background responses, cancel", () => {
  test("GET /v1/responses/{id}/input_items lists a stored response's input items with ids: newest first, paged", async () => {
    const { post, call } = server({ reply: () => "Done." });
    const input = [
      { role: "developer", content: "Be brief." },
      { type: "message", role: "user", content: [{ type: "input_text", text: "Fix it." }] },
      { type: "message", id: "msg_given", role: "assistant", content: "Looking." },
      { type: "function_call", call_id: "c1", name: "run_shell", arguments: "{}" },
      { type: "function_call_output", call_id: "c1", output: "a.txt" },
    ];
    const first = (await (await post({ input, store: true })).json()) as Json;
    const list = async (id: string, query = "") =>
      (await (await call("GET", `/v1/responses/${id}/input_items${query}`)).json()) as Json;
    const listed = await list(first.id);
    assert.equal(listed.object, "list");
    assert.equal(listed.has_more, false);
    const items = [...listed.data].reverse();
    const ids = items.map((item: Json) => item.id);
    assert.equal(listed.first_id, ids.at(-1));
    assert.equal(listed.last_id, ids[0]);
    assert.equal(new Set(ids).size, 5);
    assert.deepEqual(
      items.map(({ id, ...item }: Json) => item),
      [
        {
          type: "message",
          role: "developer",
          status: "completed",
          content: [{ type: "input_text", text: "Be brief." }],
        },
        {
          type: "message",
          role: "user",
          status: "completed",
          content: [{ type: "input_text", text: "Fix it." }],
        },
        {
          type: "message",
          role: "assistant",
          status: "completed",
          content: [{ type: "output_text", text: "Looking.", annotations: [] }],
        },
        { type: "function_call", call_id: "c1", name: "run_shell", arguments: "{}", status: "completed" },
        { type: "function_call_output", call_id: "c1", output: "a.txt", status: "completed" },
      ],
    );
    assert.match(ids[0], /^msg_/);
    assert.equal(ids[2], "msg_given", "an id the client gave is kept");
    assert.match(ids[3], /^fc_/);
    assert.deepEqual(
      (await list(first.id)).data.map((item: Json) => item.id),
      [...ids].reverse(),
      "the ids are the same on every listing",
    );

    const page1 = await list(first.id, "?order=asc&limit=2");
    assert.deepEqual(
      [page1.data.map((item: Json) => item.id), page1.first_id, page1.last_id, page1.has_more],
      [ids.slice(0, 2), ids[0], ids[1], true],
    );
    const page2 = await list(first.id, `?order=asc&limit=2&after=${page1.last_id}`);
    assert.deepEqual([page2.data.map((item: Json) => item.id), page2.has_more], [ids.slice(2, 4), true]);
    const page3 = await list(first.id, `?order=asc&limit=2&after=${page2.last_id}`);
    assert.deepEqual([page3.data.map((item: Json) => item.id), page3.has_more], [ids.slice(4), false]);
    const newest = await list(first.id, "?limit=1");
    assert.deepEqual([newest.data[0].id, newest.has_more], [ids[4], true]);
    const before = await list(first.id, `?order=asc&before=${ids[2]}`);
    assert.deepEqual(
      before.data.map((item: Json) => item.id),
      ids.slice(0, 2),
    );

    // a continued response's input is what its model saw: the previous items and output, then its own
    const second = (await (
      await post({ previous_response_id: first.id, input: "And now?", store: true })
    ).json()) as Json;
    const chain = (await list(second.id, "?order=asc&limit=100")).data;
    assert.equal(chain.length, 7);
    assert.deepEqual(
      chain.slice(0, 5).map((item: Json) => item.id),
      ids,
    );
    assert.deepEqual(chain[5], first.output[0]);
    assert.deepEqual(chain[6].content, [{ type: "input_text", text: "And now?" }]);

    for (const [query, param] of [
      ["?limit=0", "limit"],
      ["?limit=101", "limit"],
      ["?order=up", "order"],
      ["?after=msg_nowhere", "after"],
    ] as const) {
      const refused = await call("GET", `/v1/responses/${first.id}/input_items${query}`);
      assert.equal(refused.status, 400, query);
      assert.equal(((await refused.json()) as Json).error.param, param, query);
    }
    const notStored = (await (await post({ input: "x", store: false })).json()) as Json;
    for (const id of [notStored.id, "resp_unknown"]) {
      const missing = await call("GET", `/v1/responses/${id}/input_items`);
      assert.equal(missing.status, 404);
      assert.equal(((await missing.json()) as Json).error.code, "not_found");
    }
  });

  test("background: returned queued at once, polled with GET until completed, then continued", async () => {
    const { post, call, engine, api } = server({ reply: () => words(10), delayMs: 20 });
    const created = await post({ input: "Count.", background: true });
    assert.equal(created.status, 200);
    const queued = (await created.json()) as Json;
    assert.deepEqual(
      [queued.status, queued.background, queued.store, queued.output, queued.usage, queued.completed_at],
      ["queued", true, true, [], null, null],
    );
    assert.equal(engine.finished.length, 0, "the response came back before its generation ended");
    assert.equal(api.inflight.size, 1, "the background response is in flight");
    const get = async () => (await (await call("GET", `/v1/responses/${queued.id}`)).json()) as Json;
    let polled = await get();
    await eventually(async () => {
      polled = await get();
      return polled.status !== "queued" && polled.status !== "in_progress";
    }, "the background response to end");
    assert.equal(polled.status, "completed");
    assert.equal(polled.id, queued.id);
    assert.equal(polled.background, true);
    assert.ok(Number.isInteger(polled.completed_at));
    assert.equal(polled.output[0].content[0].text.trim(), words(10).join("").trim());
    assert.equal(polled.usage.output_tokens, 10);
    await eventually(() => api.inflight.size === 0, "the run to leave the in-flight requests");
    const items = (await (await call("GET", `/v1/responses/${queued.id}/input_items`)).json()) as Json;
    assert.deepEqual(items.data[0].content, [{ type: "input_text", text: "Count." }]);

    const next = await post({ previous_response_id: queued.id, input: "Again." });
    assert.equal(next.status, 200);
    assert.ok(/Count\.[\s\S]*w9[\s\S]*Again\./.test(engine.requests[1]!.prompt));
  });

  test("background with stream: the client going away leaves it running; GET ?stream=true replays its events from starting_after", async () => {
    const { post, call, engine } = server({ reply: () => words(12), delayMs: 20 });
    const client = new AbortController();
    const res = await post({ input: "Count.", background: true, stream: true }, {}, client.signal);
    assert.equal(res.headers.get("content-type"), "text/event-stream; charset=utf-8");
    const reader = res.body!.getReader();
    let seen = "";
    while (!seen.includes("response.output_text.delta"))
      seen += new TextDecoder().decode((await reader.read()).value);
    client.abort();
    await reader.cancel();
    seen = seen.slice(0, seen.lastIndexOf("\n\n") + 2);
    const id = sseEvents(seen)[0]!.data.response.id;

    // picked up while it runs: the stream follows it to its end
    const replay = async (query = "") =>
      (await call("GET", `/v1/responses/${id}?stream=true${query}`)).text();
    const whole = await replay();
    const events = sseEvents(whole);
    assert.deepEqual(engine.aborted, [], "the engine request ran on");
    assert.equal(engine.finished.length, 1);
    assert.ok(whole.startsWith(seen), "the same events as first sent");
    for (const [i, { event, data }] of events.entries()) {
      assert.equal(data.type, event);
      assert.equal(data.sequence_number, i);
    }
    assert.deepEqual(
      events.slice(0, 3).map((e) => [e.event, e.data.response?.status]),
      [
        ["response.created", "queued"],
        ["response.queued", "queued"],
        ["response.in_progress", "in_progress"],
      ],
    );
    const last = events.at(-1)!;
    assert.equal(last.event, "response.completed");
    const text = events
      .filter((e) => e.event === "response.output_text.delta")
      .map((e) => e.data.delta)
      .join("");
    assert.equal(text.trim(), words(12).join("").trim());
    assert.deepEqual(sseEvents(await replay("&starting_after=5")), events.slice(6));
    assert.deepEqual(sseEvents(await replay(`&starting_after=${events.length + 3}`)), []);
    const got = (await (await call("GET", `/v1/responses/${id}`)).json()) as Json;
    assert.deepEqual(got, last.data.response);
  });

  test("cancel is taken when the server is at its in-flight cap, which the background response fills", async () => {
    const { post, call, engine } = server({ reply: () => words(300), delayMs: 10 }, [], undefined, 1);
    const queued = (await (await post({ input: "Go on.", background: true })).json()) as Json;
    assert.equal((await post({ input: "Me too." })).status, 429);
    const cancelled = await call("POST", `/v1/responses/${queued.id}/cancel`);
    assert.equal(cancelled.status, 200);
    assert.equal(((await cancelled.json()) as Json).status, "cancelled");
    await eventually(() => engine.aborted.length === 1, "the engine request's abort");
  });

  test("cancel: a live background response ends cancelled, its engine request aborted; cancelling again returns it", async () => {
    const { post, call, engine, api } = server({ reply: () => words(300), delayMs: 10 });
    const queued = (await (await post({ input: "Go on.", background: true })).json()) as Json;
    const get = async () => (await (await call("GET", `/v1/responses/${queued.id}`)).json()) as Json;
    await eventually(async () => (await get()).status === "in_progress", "the generation to start");
    const cancelled = await call("POST", `/v1/responses/${queued.id}/cancel`);
    assert.equal(cancelled.status, 200);
    const body = (await cancelled.json()) as Json;
    assert.deepEqual(
      [body.id, body.status, body.output, body.background],
      [queued.id, "cancelled", [], true],
    );
    await eventually(() => engine.aborted.length === 1, "the engine request's abort");
    assert.equal(`resp_${engine.aborted[0]}`, queued.id);
    await eventually(() => api.inflight.size === 0, "the run to end");
    assert.equal((await get()).status, "cancelled");
    const again = await call("POST", `/v1/responses/${queued.id}/cancel`);
    assert.equal(again.status, 200);
    assert.deepEqual(await again.json(), body);
    assert.equal((await call("DELETE", `/v1/responses/${queued.id}`)).status, 200);

    // streamed: its events end with response.failed holding the cancelled response
    const streamed = await post({ input: "Go on.", background: true, stream: true });
    const reader = streamed.body!.getReader();
    let first = "";
    while (!first.includes("\n\n")) first += new TextDecoder().decode((await reader.read()).value);
    const id = sseEvents(first.slice(0, first.indexOf("\n\n") + 2))[0]!.data.response.id;
    assert.equal(
      ((await (await call("POST", `/v1/responses/${id}/cancel`)).json()) as Json).status,
      "cancelled",
    );
    let rest = "";
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      rest += new TextDecoder().decode(chunk.value);
    }
    const last = sseEvents(first + rest).at(-1)!;
    assert.deepEqual([last.event, last.data.response.status], ["response.failed", "cancelled"]);
    await eventually(() => engine.aborted.length === 2, "the second abort");
  });

  test("a background response that fails, or that a forced stop aborts, ends failed with its error", async () => {
    const failing = server({}, [], new FailingEngine({ reply: () => words(5) }));
    const broken = (await (await failing.post({ input: "Go.", background: true })).json()) as Json;
    const getFrom = async (call: typeof failing.call, id: string) =>
      (await (await call("GET", `/v1/responses/${id}`)).json()) as Json;
    await eventually(async () => (await getFrom(failing.call, broken.id)).status === "failed", "the failure");
    const failed = await getFrom(failing.call, broken.id);
    assert.equal(failed.error.code, "server_error");
    assert.match(failed.error.message, /device lost/);
    assert.equal(failed.completed_at, null);
    const refused = await failing.call("POST", `/v1/responses/${broken.id}/cancel`);
    assert.equal(refused.status, 400);
    assert.equal(((await refused.json()) as Json).error.message, "Cannot cancel a failed response.");
    await eventually(() => failing.api.inflight.size === 0, "the failed run to end");

    const { post, call, engine, api } = server({ reply: () => words(300), delayMs: 10 });
    const running = (await (await post({ input: "Go.", background: true })).json()) as Json;
    await eventually(async () => (await getFrom(call, running.id)).status === "in_progress", "the start");
    api.inflight.abortAll("server shutting down");
    await eventually(async () => (await getFrom(call, running.id)).status === "failed", "the stop");
    const stopped = await getFrom(call, running.id);
    assert.equal(stopped.error.code, "server_error");
    assert.match(stopped.error.message, /server shutting down/);
    await eventually(() => engine.aborted.length === 1, "the engine request's abort");
  });

  test("a graceful close waits for a running background response to finish", async () => {
    await withServer({ reply: () => words(10), delayMs: 20 }, {}, async (t) => {
      const created = await t.post("/v1/responses", { input: "Go.", background: true });
      assert.equal(((await created.json()) as Json).status, "queued");
      await t.server.close({ drainTimeoutMs: 5_000 });
      assert.deepEqual(t.engine.finished, [t.engine.requests[0]!.requestId]);
      assert.deepEqual(t.engine.aborted, []);
    });
  });

  test("an item_reference stands for the kept item it names (an earlier output's call), per tenant", async () => {
    const { post, call, engine } = server({ reply: () => CALL }, ["key-a", "key-b"]);
    const asA = { Authorization: "Bearer key-a" };
    const first = (await (
      await post({ input: "List the files.", tools: [RUN_SHELL], store: true }, asA)
    ).json()) as Json;
    const fc = first.output.find((item: Json) => item.type === "function_call");
    const next = {
      input: [
        { type: "message", role: "user", content: "List the files." },
        { type: "item_reference", id: fc.id },
        { type: "function_call_output", call_id: fc.call_id, output: "a.txt" },
      ],
      tools: [RUN_SHELL],
      store: true,
    };
    const second = await post(next, asA);
    assert.equal(second.status, 200);
    // the call is in the prompt as the assistant's turn, its output after it
    assert.match(engine.requests[1]!.prompt, /run_shell[\s\S]*"command": ?"ls"[\s\S]*a\.txt/);
    const listed = (await (
      await call("GET", `/v1/responses/${((await second.json()) as Json).id}/input_items?order=asc`, asA)
    ).json()) as Json;
    assert.deepEqual(
      listed.data.map((item: Json) => [item.type, item.id === fc.id]),
      [
        ["message", false],
        ["function_call", true],
        ["function_call_output", false],
      ],
    );
    const elsewhere = await post(next, { Authorization: "Bearer key-b" });
    assert.equal(elsewhere.status, 400);
    assert.equal(((await elsewhere.json()) as Json).error.param, "input[1].id");
  });

  test("refusals: background without store, cancels of what is not a live background response, streams and deletes", async () => {
    const { post, call, engine } = server({ reply: () => words(300), delayMs: 10 });
    const noStore = await post({ input: "x", background: true, store: false });
    assert.equal(noStore.status, 400);
    const error = ((await noStore.json()) as Json).error;
    assert.deepEqual(
      [error.type, error.code, error.param],
      ["invalid_request_error", "unsupported_parameter", "background"],
    );
    assert.equal(engine.requests.length, 0);

    const unknown = await call("POST", "/v1/responses/resp_unknown/cancel");
    assert.equal(unknown.status, 404);
    assert.equal(((await unknown.json()) as Json).error.code, "not_found");

    const quick = server({ reply: () => "Done." });
    const stored = (await (await quick.post({ input: "x", store: true })).json()) as Json;
    const synchronous = await quick.call("POST", `/v1/responses/${stored.id}/cancel`);
    assert.equal(synchronous.status, 400);
    assert.equal(((await synchronous.json()) as Json).error.message, "Cannot cancel a synchronous response.");
    const notBackground = await quick.call("GET", `/v1/responses/${stored.id}?stream=true`);
    assert.equal(notBackground.status, 400);
    assert.equal(((await notBackground.json()) as Json).error.param, "stream");
    const done = (await (await quick.post({ input: "x", background: true })).json()) as Json;
    await eventually(
      async () =>
        ((await (await quick.call("GET", `/v1/responses/${done.id}`)).json()) as Json).status === "completed",
      "the background response to complete",
    );
    const completed = await quick.call("POST", `/v1/responses/${done.id}/cancel`);
    assert.equal(completed.status, 400);
    assert.equal(((await completed.json()) as Json).error.message, "Cannot cancel a completed response.");
    const notStreamed = await quick.call("GET", `/v1/responses/${done.id}?stream=true`);
    assert.equal(notStreamed.status, 400);
    assert.match(((await notStreamed.json()) as Json).error.message, /stream=true/);

    const running = (await (await post({ input: "x", background: true })).json()) as Json;
    const badCursor = await call("GET", `/v1/responses/${running.id}?stream=true&starting_after=-1`);
    assert.equal(badCursor.status, 400);
    const continued = await post({ previous_response_id: running.id, input: "y" });
    assert.equal(continued.status, 400);
    assert.equal(((await continued.json()) as Json).error.param, "previous_response_id");
    const deleted = await call("DELETE", `/v1/responses/${running.id}`);
    assert.equal(deleted.status, 400);
    assert.match(((await deleted.json()) as Json).error.message, /in-flight/);
    await call("POST", `/v1/responses/${running.id}/cancel`);
    assert.equal((await call("DELETE", `/v1/responses/${running.id}`)).status, 200);
    assert.equal((await call("GET", `/v1/responses/${running.id}`)).status, 404);
  });
});
