/** A request's life: client disconnects, overload refusals, and the server's close(). */
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { describe, test } from "node:test";
import { EngineRejection } from "../engine/engine-api.js";
import { chat, expectError } from "./test-support/openai-requests.js";
import { type Json, withServer } from "./test-support/test-server.js";

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
