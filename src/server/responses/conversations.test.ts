/**
 * OpenAI's Conversations API over the fake engine: a conversation's items are what a response on it sees
 * before its input, its turns are one agent program, and it grows by each finished response's input and
 * output (not by a cancelled one); creating, updating, listing, adding and deleting items and conversations
 * as OpenAI does, per tenant.
 */
import assert from "node:assert/strict";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { describe, test } from "node:test";
import { createApp } from "../app.js";
import { CONVERSATION_ID_HEADER } from "../programs/program-identity.js";
import { FakeEngine, type FakeEngineOptions } from "../test-support/fake-engine.js";
import { type Json, withServer } from "../test-support/test-server.js";
import { ConversationStore, itemsBytes } from "./conversation-store.js";
import { MAX_CONVERSATION_BYTES } from "./conversations.js";

function server(engineOptions: FakeEngineOptions = {}, apiKeys: string[] = []) {
  const engine = new FakeEngine(engineOptions);
  const { app } = createApp({ engine, apiKeys, logError: () => {}, dashboard: false });
  const request = async (
    method: "GET" | "POST" | "DELETE",
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) =>
    app.request(path, {
      method,
      headers: { "Content-Type": "application/json", ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
  const json = async (
    method: "GET" | "POST" | "DELETE",
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ) => {
    const response = await request(method, path, body, headers);
    assert.equal(response.status, 200, `${method} ${path}: ${await response.clone().text()}`);
    return (await response.json()) as Json;
  };
  return { engine, request, json };
}

const user = (text: string) => ({ type: "message", role: "user", content: text });

describe("Conversations API (fake engine)", () => {
  test("responses on a conversation see its items, add their input and output, and are one program", async () => {
    let turn = 0;
    const { engine, request, json } = server({ reply: () => (++turn === 1 ? "Hello Ada." : "You are Ada.") });
    const created = await request("POST", "/v1/conversations", {
      items: [{ type: "message", role: "developer", content: "Be brief." }],
      metadata: { topic: "names" },
    });
    const conversation = (await created.json()) as Json;
    assert.match(conversation.id, /^conv_[0-9a-f]{48}$/);
    assert.equal(created.headers.get(CONVERSATION_ID_HEADER), conversation.id);
    assert.deepEqual(
      { ...conversation, created_at: 0 },
      { id: conversation.id, object: "conversation", created_at: 0, metadata: { topic: "names" } },
    );

    const first = await request("POST", "/v1/responses", {
      input: "I am Ada.",
      conversation: conversation.id,
    });
    assert.equal(first.headers.get(CONVERSATION_ID_HEADER), conversation.id);
    const firstResponse = (await first.json()) as Json;
    assert.deepEqual(firstResponse.conversation, { id: conversation.id });
    const second = await json("POST", "/v1/responses", {
      input: "Who am I?",
      conversation: { id: conversation.id },
      store: false,
    });
    assert.equal(second.output[0].content[0].text, "You are Ada.");

    const prompts = engine.requests.map((r) => r.prompt);
    assert.ok(/Be brief\.[\s\S]*I am Ada\./.test(prompts[0]!), prompts[0]);
    assert.ok(/Be brief\.[\s\S]*I am Ada\.[\s\S]*Hello Ada\.[\s\S]*Who am I\?/.test(prompts[1]!), prompts[1]);
    assert.deepEqual(
      engine.requests.map((r) => r.programId),
      [conversation.id, conversation.id],
    );

    // the conversation now holds both turns: each input, then its output, with the output items' own ids
    const items = (await json("GET", `/v1/conversations/${conversation.id}/items?order=asc`)).data as Json[];
    assert.deepEqual(
      items.map((item) => [item.role, item.content[0].text]),
      [
        ["developer", "Be brief."],
        ["user", "I am Ada."],
        ["assistant", "Hello Ada."],
        ["user", "Who am I?"],
        ["assistant", "You are Ada."],
      ],
    );
    assert.equal(items[2]!.id, firstResponse.output[0].id);
    assert.equal(items[4]!.id, second.output[0].id);

    // a response names one history: a previous response or a conversation, not both
    const both = await request("POST", "/v1/responses", {
      input: "x",
      conversation: conversation.id,
      previous_response_id: firstResponse.id,
    });
    assert.equal(both.status, 400);
    assert.equal(((await both.json()) as Json).error.param, "conversation");
  });

  test("streamed and background responses add their turn; a cancelled one adds nothing", async () => {
    const { request, json } = server({ reply: () => ["Hello", " there."], delayMs: 20 });
    // a POST without a body, as curl -X POST sends it
    const { id } = await json("POST", "/v1/conversations");
    const itemTexts = async () =>
      ((await json("GET", `/v1/conversations/${id}/items?order=asc`)).data as Json[]).map(
        (item) => item.content[0].text,
      );
    await (await request("POST", "/v1/responses", { input: "One.", conversation: id, stream: true })).text();
    assert.deepEqual(await itemTexts(), ["One.", "Hello there."]);

    const background = await json("POST", "/v1/responses", {
      input: "Two.",
      conversation: id,
      background: true,
    });
    while ((await json("GET", `/v1/responses/${background.id}`)).status !== "completed") {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.deepEqual(await itemTexts(), ["One.", "Hello there.", "Two.", "Hello there."]);

    const cancelled = await json("POST", "/v1/responses", {
      input: "Three.",
      conversation: id,
      background: true,
    });
    assert.equal((await json("POST", `/v1/responses/${cancelled.id}/cancel`)).status, "cancelled");
    await new Promise((r) => setTimeout(r, 80));
    assert.deepEqual(await itemTexts(), ["One.", "Hello there.", "Two.", "Hello there."]);
  });

  test("items are added (at most 20, each checked), listed in pages, retrieved and deleted", async () => {
    const { engine, request, json } = server({ reply: () => "Noted." });
    const { id } = await json("POST", "/v1/conversations", { items: [user("a")] });
    const added = await json("POST", `/v1/conversations/${id}/items`, {
      items: [user("b"), { type: "message", role: "assistant", content: "c" }, user("d")],
    });
    assert.deepEqual(
      added.data.map((item: Json) => item.content[0].text),
      ["b", "c", "d"],
    );
    assert.deepEqual(
      [added.first_id, added.last_id, added.has_more],
      [added.data[0].id, added.data[2].id, false],
    );

    const newest = await json("GET", `/v1/conversations/${id}/items?limit=2`);
    assert.deepEqual(
      [newest.data.map((item: Json) => item.content[0].text), newest.has_more],
      [["d", "c"], true],
    );
    const older = await json("GET", `/v1/conversations/${id}/items?limit=2&after=${newest.last_id}`);
    assert.deepEqual(
      [older.data.map((item: Json) => item.content[0].text), older.has_more],
      [["b", "a"], false],
    );
    const c = added.data[1];
    assert.deepEqual(await json("GET", `/v1/conversations/${id}/items/${c.id}`), c);

    // deleting an item takes it out of what the next response sees
    const afterDelete = await json("DELETE", `/v1/conversations/${id}/items/${c.id}`);
    assert.deepEqual([afterDelete.id, afterDelete.object], [id, "conversation"]);
    assert.equal((await request("GET", `/v1/conversations/${id}/items/${c.id}`)).status, 404);
    await json("POST", "/v1/responses", { input: "e", conversation: id });
    const prompt = engine.requests[0]!.prompt;
    assert.ok(/a[\s\S]*b[\s\S]*d[\s\S]*e/.test(prompt) && !prompt.includes("c"), prompt);

    const tooMany = await request("POST", `/v1/conversations/${id}/items`, {
      items: Array.from({ length: 21 }, (_, i) => user(String(i))),
    });
    assert.equal(tooMany.status, 400);
    const unknownType = await request("POST", `/v1/conversations/${id}/items`, {
      items: [user("ok"), { type: "web_search_call", id: "ws_1" }],
    });
    assert.equal(unknownType.status, 400);
    assert.equal(((await unknownType.json()) as Json).error.param, "items[1].type");
    const none = await request("POST", `/v1/conversations/${id}/items`, { items: [] });
    assert.equal(none.status, 400);
  });

  test("a conversation is its tenant's: retrieved, updated, deleted (ending its program), then gone", async () => {
    const { engine, request, json } = server({ reply: () => "Hi." }, ["key-a", "key-b"]);
    const asA = { Authorization: "Bearer key-a" };
    const asB = { Authorization: "Bearer key-b" };
    const created = await json("POST", "/v1/conversations", { metadata: { a: "1" } }, asA);
    const path = `/v1/conversations/${created.id}`;
    assert.deepEqual(await json("GET", path, undefined, asA), created);
    assert.equal((await request("GET", path, undefined, asB)).status, 404);
    assert.equal(
      (await request("POST", "/v1/responses", { input: "x", conversation: created.id }, asB)).status,
      404,
    );

    const updated = await json("POST", path, { metadata: { a: "2", b: "3" } }, asA);
    assert.deepEqual(updated.metadata, { a: "2", b: "3" });
    const tooMuch = await request(
      "POST",
      path,
      { metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) },
      asA,
    );
    assert.equal(tooMuch.status, 400);

    await json("POST", "/v1/responses", { input: "Hello.", conversation: created.id }, asA);
    const live = engine.requests[0]!.programId as string;
    assert.ok(live.endsWith(created.id), live);
    assert.deepEqual(await json("DELETE", path, undefined, asA), {
      id: created.id,
      object: "conversation.deleted",
      deleted: true,
    });
    assert.deepEqual(engine.endedPrograms, [live], "its pinned KV is released with it");
    assert.equal((await request("GET", path, undefined, asA)).status, 404);
    assert.equal((await request("DELETE", path, undefined, asA)).status, 404);
  });

  test("the store keeps the most recently used conversations within its count and bytes", () => {
    const store = new ConversationStore(2, 10_000, 100_000);
    const conversation = (id: string, text = "x") => {
      const items = [
        { id: `msg_${id}`, type: "message", role: "user", content: [{ type: "input_text", text }] },
      ];
      return { id, created_at: 0, metadata: {}, items, itemBytes: itemsBytes(items) };
    };
    store.set(null, "a", conversation("a"));
    store.set(null, "b", conversation("b"));
    assert.ok(store.get(null, "a"));
    store.set(null, "c", conversation("c"));
    assert.deepEqual(
      ["a", "b", "c"].map((id) => store.get(null, id) !== undefined),
      [true, false, true],
    );
    store.set(null, "d", conversation("d", "y".repeat(20_000)));
    assert.ok(store.get(null, "d"), "the one just stored stays, even alone over the bytes");
    assert.equal(store.get(null, "a"), undefined);
    assert.equal(store.get("tenant", "d"), undefined);
  });

  test("a conversation's size is what its items and metadata measure as JSON, kept as items are added and removed", () => {
    const store = new ConversationStore(8, 1_000_000, 1_000_000);
    const item = (id: string, text: string) => ({
      id,
      type: "message",
      role: "user",
      content: [{ type: "input_text", text }],
    });
    const stored = { id: "c", created_at: 0, metadata: { a: "b" }, items: [], itemBytes: 0 };
    const added = [item("m1", "one"), item("m2", "two two"), item("m3", "three")];
    store.add(null, stored, added, itemsBytes(added));
    store.removeItem(null, stored, 1);
    const measured = JSON.stringify(stored.items).length - 2 - (stored.items.length - 1);
    assert.equal(store.storedBytes, measured + JSON.stringify(stored.metadata).length);
  });

  test("items that would take a conversation past its size are a 400 naming them, before anything is added", async () => {
    const { json, request } = server();
    const big = (n: number) => ({ type: "message", role: "user", content: "x".repeat(n) });
    const created = await json("POST", "/v1/conversations", {});
    // a body holds at most 32 MiB: the conversation grows in steps, to one step under its size
    const step = 8 * 2 ** 20;
    for (let held = step; held < MAX_CONVERSATION_BYTES; held += step) {
      await json("POST", `/v1/conversations/${created.id}/items`, { items: [big(step)] });
    }
    const over = await request("POST", `/v1/conversations/${created.id}/items`, { items: [big(step)] });
    assert.equal(over.status, 400);
    const error = ((await over.json()) as Json).error;
    assert.equal(error.param, "items");
    assert.match(error.message, /64 MiB one conversation may hold: start another conversation/);
    const viaResponse = await request("POST", "/v1/responses", {
      input: [big(step)],
      conversation: created.id,
    });
    assert.equal(viaResponse.status, 400);
    assert.equal(((await viaResponse.json()) as Json).error.param, "input");
    const listed = await json("GET", `/v1/conversations/${created.id}/items?limit=100`);
    assert.equal(listed.data.length, MAX_CONVERSATION_BYTES / step - 1, "nothing was added");
  });
});

describe("Conversations under big writes (fake engine, HTTP)", () => {
  test("appending to a 48 MiB conversation costs what it adds: with 8 writers the event loop blocks no longer than beside an empty one, and /health answers", async () => {
    await withServer({}, {}, async (t) => {
      const item = (bytes: number) => ({ type: "message", role: "user", content: "x".repeat(bytes) });
      const create = async () =>
        ((await (await t.post("/v1/conversations", {})).json()) as Json).id as string;
      const add = async (id: string, items: unknown[]) => {
        const response = await t.post(`/v1/conversations/${id}/items`, { items });
        assert.equal(response.status, 200, await response.clone().text());
        await response.arrayBuffer();
      };
      /** The longest the event loop was blocked, and /health's slowest answer, while 8 clients append to `id`. */
      const underWriters = async (id: string) => {
        const delay = monitorEventLoopDelay({ resolution: 5 });
        delay.enable();
        let writing = true;
        let slowestHealthMs = 0;
        const probe = (async () => {
          while (writing) {
            const started = performance.now();
            assert.equal((await fetch(`${t.url}/health`)).status, 200);
            slowestHealthMs = Math.max(slowestHealthMs, performance.now() - started);
          }
        })();
        await Promise.all(
          Array.from({ length: 8 }, async () => {
            for (let n = 0; n < 6; n++) await add(id, [item(64 * 1024)]);
          }),
        );
        writing = false;
        await probe;
        delay.disable();
        return { blockedMs: delay.max / 1e6, slowestHealthMs };
      };
      await underWriters(await create()); // warms the server's code up
      const baseline = await underWriters(await create());
      const large = await create();
      for (let held = 0; held < 48 * 2 ** 20; held += 16 * 2 ** 20) await add(large, [item(16 * 2 ** 20)]);
      const loaded = await underWriters(large);
      const seen = `beside an empty conversation ${JSON.stringify(baseline)}, a 48 MiB one ${JSON.stringify(loaded)}`;
      assert.ok(loaded.blockedMs <= 4 * baseline.blockedMs + 25, seen);
      assert.ok(loaded.slowestHealthMs <= 4 * baseline.slowestHealthMs + 25, seen);
    });
  });
});
