/** SSE streaming of chat and text completions. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EngineRejection } from "../../engine/engine-api.js";
import { chat, expectError } from "../test-support/openai-requests.js";
import { type Json, sseEvents, withServer } from "../test-support/test-server.js";

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

describe("robustness", () => {
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
});
