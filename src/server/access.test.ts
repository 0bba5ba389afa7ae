/** Who may reach what: the dashboard, API keys as tenants, and CORS. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { EngineRejection } from "../engine/engine-api.js";
import { chat, expectError } from "./test-support/openai-requests.js";
import { type Json, withServer } from "./test-support/test-server.js";

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

test("dashboard state: the API's answers by outcome (what the fleet page shows as a replica's errors)", async () => {
  const overloaded = new EngineRejection("busy", "overloaded", 1);
  await withServer({ reject: (r) => (r.programId === "busy" ? overloaded : null) }, {}, async (t) => {
    const answers = async () =>
      ((await (await fetch(`${t.url}/dashboard/state`)).json()) as Json).answers as Json;
    assert.deepEqual(await answers(), { success: 0, clientError: 0, rateLimited: 0, serverError: 0 });
    await (await t.post("/v1/chat/completions", chat({ job_id: "p-1" }))).json();
    await (await t.post("/v1/chat/completions", chat({ job_id: "busy" }))).json();
    await (await t.post("/v1/chat/completions", { messages: "not a list" })).json();
    await (await fetch(`${t.url}/v1/programs/nobody`, { method: "DELETE" })).json();
    t.server.api.startDraining();
    await (await t.post("/v1/chat/completions", chat({ job_id: "p-2" }))).json();
    await (await fetch(`${t.url}/health`)).arrayBuffer();
    assert.deepEqual(await answers(), { success: 1, clientError: 2, rateLimited: 1, serverError: 1 });
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

describe("robustness", () => {
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
});
