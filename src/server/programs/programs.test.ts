/** Program ids and hints from bodies and headers, returning turns, ending and draining programs. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { chat } from "../test-support/openai-requests.js";
import { withServer } from "../test-support/test-server.js";

describe("program fields", () => {
  test("from the body (job_id string or number, program_id, this_func_call) and headers", async () => {
    await withServer({}, {}, async (t) => {
      const send = async (extra: Record<string, unknown>, headers: Record<string, string> = {}) => {
        const response = await t.post("/v1/chat/completions", chat(extra), headers);
        assert.equal(response.status, 200, await response.clone().text());
        await response.json();
        return t.engine.requests.at(-1)!;
      };
      let r = await send({ job_id: "django-123", is_last_step: false, this_func_call: "pytest" });
      assert.deepEqual([r.programId, r.isLastStep, r.toolHint], ["django-123", false, "pytest"]);
      r = await send({ job_id: 17, is_last_step: true });
      assert.deepEqual([r.programId, r.isLastStep, r.toolHint], ["17", true, null]);
      r = await send({ job_id: null, is_last_step: null, this_func_call: null }); // crashed the fork
      // a chat request that names no program runs in one the server finds for it (turn-programs.ts)
      assert.match(r.programId ?? "", /^implicit-[0-9a-f]{16}$/);
      assert.equal(r.isLastStep, false);
      r = await send({ program_id: "p-9" });
      assert.equal(r.programId, "p-9");
      r = await send({}, { "X-Program-Id": "hdr-1", "X-Last-Step": "true" });
      assert.deepEqual([r.programId, r.isLastStep], ["hdr-1", true]);
      r = await send({ session_id: "s-1" });
      assert.equal(r.programId, "s-1");
      r = await send({ session_params: { session_id: 42 } });
      assert.equal(r.programId, "42");
      r = await send({}, { "X-Session-ID": "router-7" });
      assert.equal(r.programId, "router-7");
      r = await send({ job_id: "same" }, { "X-Program-Id": "same", "X-Session-ID": "same" });
      assert.equal(r.programId, "same", "sources that agree are one program");
      r = await send({});
      assert.match(r.programId ?? "", /^implicit-[0-9a-f]{16}$/);
      assert.deepEqual([r.isLastStep, r.toolHint], [false, null]);
    });
  });
  test("a subagent's parent: parent_program_id, X-Parent-Program-Id, OpenCode's X-Parent-Session-Id", async () => {
    await withServer({}, {}, async (t) => {
      const send = async (extra: Record<string, unknown>, headers: Record<string, string> = {}) => {
        const response = await t.post("/v1/chat/completions", chat(extra), headers);
        assert.equal(response.status, 200, await response.clone().text());
        await response.json();
        return t.engine.requests.at(-1)!;
      };
      let r = await send({ program_id: "child", parent_program_id: "root" });
      assert.deepEqual([r.programId, r.parentProgramId], ["child", "root"]);
      r = await send({ program_id: "child-2" }, { "X-Parent-Program-Id": "root" });
      assert.equal(r.parentProgramId, "root");
      r = await send({}, { "X-Session-ID": "oc-sub", "X-Parent-Session-Id": "oc-main" });
      assert.deepEqual([r.programId, r.parentProgramId], ["oc-sub", "oc-main"]);
      r = await send({ program_id: "alone" });
      assert.equal(r.parentProgramId, null);
    });
  });
});

test("a chat whose history holds the model's earlier answers is a returning turn, its earlier turns counted (its program went on elsewhere)", async () => {
  await withServer({}, {}, async (t) => {
    const send = async (messages: unknown[]) => {
      const response = await t.post("/v1/chat/completions", { messages, job_id: "moved" });
      assert.equal(response.status, 200);
      await response.json();
      return t.engine.requests.at(-1)!.priorTurns;
    };
    assert.equal(await send([{ role: "user", content: "Fix it." }]), 0);
    const call = { id: "c1", type: "function", function: { name: "ls", arguments: "{}" } };
    const history = [
      { role: "user", content: "Fix it." },
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: "c1", content: "a.py" },
    ];
    assert.equal(await send(history), 1);
    const twice = [...history, { role: "assistant", content: null, tool_calls: [call] }, history[2]];
    assert.equal(await send(twice), 2);
    const completion = await t.post("/v1/completions", { prompt: "Fix it.", job_id: "moved" });
    await completion.json();
    assert.equal(t.engine.requests.at(-1)!.priorTurns, undefined, "a bare prompt says nothing");
  });
});

test("retention hints: cache_control (top level or nvext) and an expected tool duration reach the engine", async () => {
  await withServer({}, {}, async (t) => {
    const send = async (extra: Record<string, unknown>) => {
      const response = await t.post("/v1/chat/completions", chat({ job_id: "j", ...extra }));
      assert.equal(response.status, 200, await response.clone().text());
      await response.json();
      return t.engine.requests.at(-1)?.retentionHints;
    };
    assert.deepEqual(await send({ cache_control: { type: "ephemeral", ttl: "30s" } }), {
      ttlS: 30,
      expectedToolS: null,
    });
    assert.deepEqual(await send({ nvext: { cache_control: { type: "ephemeral", ttl: "5m" } } }), {
      ttlS: 300,
      expectedToolS: null,
    });
    assert.deepEqual(await send({ cache_control: { type: "ephemeral" }, expected_tool_duration_s: 12 }), {
      ttlS: null,
      expectedToolS: 12,
    });
    assert.deepEqual(await send({}), { ttlS: null, expectedToolS: null });
    const bad = await t.post(
      "/v1/chat/completions",
      chat({ cache_control: { type: "ephemeral", ttl: "soon" } }),
    );
    assert.equal(bad.status, 400);
    await bad.json();
  });
});

test("DELETE /v1/programs/{id} ends a live program (a router's finish-session); unknown ids are 404", async () => {
  await withServer({}, {}, async (t) => {
    await (await t.post("/v1/chat/completions", chat({ job_id: "agent-1" }))).json();
    const ended = await fetch(`${t.url}/v1/programs/agent-1`, { method: "DELETE" });
    assert.equal(ended.status, 200);
    assert.deepEqual(await ended.json(), { id: "agent-1", object: "program", deleted: true });
    assert.deepEqual(t.engine.endedPrograms, ["agent-1"]);
    const again = await fetch(`${t.url}/v1/programs/agent-1`, { method: "DELETE" });
    assert.equal(again.status, 404);
    assert.equal(((await again.json()) as { error: { code: string } }).error.code, "not_found");
  });
});

test("drain: requests in flight finish and turns of programs already here are served, new programs go elsewhere, health says draining", async () => {
  await withServer({ delayMs: 300 }, {}, async (t) => {
    await (await t.post("/v1/chat/completions", chat({ job_id: "here" }))).json();
    const inFlight = t.post("/v1/chat/completions", chat({ job_id: "here" }));
    await t.engine.waitForRequests(2);
    let idle = false;
    const drained = t.server.drain(5_000).then((ok) => {
      idle = ok;
      return ok;
    });
    const health = await fetch(`${t.url}/health`);
    assert.equal(health.status, 503);
    assert.deepEqual(await health.json(), { status: "draining" });
    assert.equal(idle, false, "the drain waits for the request in flight");
    const returning = await t.post("/v1/chat/completions", chat({ job_id: "here" }));
    assert.equal(returning.status, 200, "a returning turn is served");
    for (const fresh of [chat({ job_id: "new" }), chat()]) {
      const refused = await t.post("/v1/chat/completions", fresh);
      assert.equal(refused.status, 503);
      assert.ok(refused.headers.get("retry-after"));
      assert.equal(((await refused.json()) as { error: { code: string } }).error.code, "draining");
    }
    assert.equal((await inFlight).status, 200);
    await (await inFlight).json();
    await returning.json();
    assert.equal(await drained, true, "the drain ends once no request is in flight, its program still here");
  });
});

test("two sources naming different programs are a 400 that names both", async () => {
  await withServer({}, {}, async (t) => {
    for (const [extra, headers, names] of [
      [{ job_id: "body" }, { "X-Program-Id": "hdr" }, /job_id .* X-Program-Id/],
      [{ session_id: "a" }, { "X-Session-ID": "b" }, /session_id .* X-Session-ID/],
      [
        { program_id: "p", session_params: { session_id: "q" } },
        {},
        /program_id .* session_params\.session_id/,
      ],
    ] as const) {
      const response = await t.post("/v1/chat/completions", chat(extra), headers);
      assert.equal(response.status, 400);
      const body = (await response.json()) as { error: { message: string; param: string } };
      assert.match(body.error.message, names);
      assert.equal(body.error.param, "program_id");
    }
  });
});
