import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { HARNESSES } from "./harnesses.js";
import type { Exchange } from "./recording-proxy.js";
import {
  conversationKey,
  formatTable,
  type InvocationResult,
  parseResponse,
  recordedRequests,
  requestRows,
  summarize,
} from "./results.js";

const sse = (events: { event?: string; data: unknown }[]) =>
  events
    .map(
      (e) =>
        `${e.event ? `event: ${e.event}\n` : ""}data: ${typeof e.data === "string" ? e.data : JSON.stringify(e.data)}\n\n`,
    )
    .join("");

function exchange(fields: Partial<Exchange> & Pick<Exchange, "seq" | "path">): Exchange {
  return {
    startMs: fields.seq * 1000,
    durationMs: 10,
    method: "POST",
    requestId: `r-${fields.seq}`,
    requestHeaders: {},
    requestBody: JSON.stringify({ tools: [{ name: "Bash" }] }),
    status: 200,
    responseContentType: "text/event-stream",
    responseBody: "",
    error: null,
    ...fields,
  };
}

const invocation = (
  startMs: number,
  endMs: number,
  fields: Partial<InvocationResult> = {},
): InvocationResult => ({
  argv: [],
  exitCode: 0,
  signal: null,
  timedOut: false,
  durationS: (endMs - startMs) / 1000,
  startMs,
  endMs,
  clientErrors: [],
  notes: [],
  sessionId: null,
  exitFromOutputCap: false,
  ...fields,
});

describe("harness-check results", () => {
  test("usage from each API's stream: Messages (cache reads added back), Responses, chat chunks", () => {
    const messages = parseResponse({
      responseContentType: "text/event-stream; charset=utf-8",
      responseBody: sse([
        { event: "message_start", data: { type: "message_start", message: { usage: { input_tokens: 0 } } } },
        {
          event: "message_delta",
          data: {
            type: "message_delta",
            delta: { stop_reason: "end_turn" },
            usage: { input_tokens: 81, output_tokens: 128, cache_read_input_tokens: 16048 },
          },
        },
        { event: "message_stop", data: { type: "message_stop" } },
      ]),
    });
    assert.deepEqual(messages, {
      usage: { promptTokens: 16129, cachedTokens: 16048, outputTokens: 128, stop: "end_turn" },
      error: null,
    });
    const responses = parseResponse({
      responseContentType: "text/event-stream",
      responseBody: sse([
        {
          event: "response.created",
          data: { type: "response.created", response: { object: "response", status: "in_progress" } },
        },
        {
          event: "response.completed",
          data: {
            type: "response.completed",
            response: {
              object: "response",
              status: "completed",
              usage: { input_tokens: 8645, input_tokens_details: { cached_tokens: 8000 }, output_tokens: 12 },
            },
          },
        },
      ]),
    });
    assert.deepEqual(responses.usage, {
      promptTokens: 8645,
      cachedTokens: 8000,
      outputTokens: 12,
      stop: "completed",
    });
    const chat = parseResponse({
      responseContentType: "text/event-stream",
      responseBody: `${sse([
        { data: { choices: [{ delta: { content: "x" }, finish_reason: "length" }] } },
        {
          data: {
            choices: [],
            usage: {
              prompt_tokens: 19046,
              completion_tokens: 128,
              prompt_tokens_details: { cached_tokens: 17920 },
            },
          },
        },
      ])}data: [DONE]\n\n`,
    });
    assert.deepEqual(chat.usage, {
      promptTokens: 19046,
      cachedTokens: 17920,
      outputTokens: 128,
      stop: "length",
    });
  });

  test("an error event inside a 200 stream and unparseable data are protocol errors", () => {
    const r = parseResponse({
      responseContentType: "text/event-stream",
      responseBody: sse([
        { event: "error", data: { type: "error", error: { type: "overloaded_error" } } },
        { data: "{oops" },
      ]),
    });
    assert.match(r.error ?? "", /stream error event/);
    assert.match(
      parseResponse({ responseContentType: "text/event-stream", responseBody: sse([{ data: "{oops" }]) })
        .error ?? "",
      /unparseable SSE data/,
    );
  });

  test("rows join the recorder by request id; turns on one program pass, a 400 and anonymous turns fail", () => {
    const record = [
      { t: 1, program: "sess-1", request: "r-1", event: "arrival" },
      {
        t: 1,
        program: "sess-1",
        request: "r-1",
        event: "waiting_to_running",
        prompt_length: 100,
        hit_length: 0,
      },
      { t: 2, program: "sess-1", request: "r-1", event: "departure", output_length: 5 },
      {
        t: 3,
        program: "sess-1",
        request: "r-2",
        event: "waiting_to_running",
        prompt_length: 130,
        hit_length: 96,
      },
      {
        t: 3,
        program: "anonymous:r-3",
        request: "r-3",
        event: "waiting_to_running",
        prompt_length: 20,
        hit_length: 0,
      },
    ]
      .map((e) => JSON.stringify(e))
      .join("\n");
    const exchanges = [
      exchange({ seq: 1, path: "/v1/messages?beta=true" }),
      exchange({ seq: 2, path: "/v1/messages?beta=true" }),
      exchange({ seq: 3, path: "/v1/messages", requestBody: JSON.stringify({ max_tokens: 1 }) }),
      exchange({
        seq: 4,
        path: "/v1/models",
        method: "GET",
        responseContentType: "application/json",
        responseBody: "{}",
      }),
    ];
    const invocations = [invocation(500, 1500), invocation(1600, 4500)];
    const rows = requestRows(exchanges, recordedRequests(record), invocations);
    assert.deepEqual(
      rows.map((r) => [r.endpoint, r.kind, r.invocation, r.program, r.promptTokens, r.cachedTokens]),
      [
        ["/v1/messages", "turn", 0, "sess-1", 100, 0],
        ["/v1/messages", "turn", 1, "sess-1", 130, 96],
        ["/v1/messages", "side", 1, "anonymous:r-3", 20, 0],
        ["/v1/models", "other", 1, null, null, null],
      ],
    );
    const identity = {
      name: "claude-code",
      pkg: "p",
      version: "1",
      api: "Anthropic Messages",
      outputCap: "256",
    };
    const pass = summarize({
      ...identity,
      invocations,
      rows,
      dashboardPrograms: [{ id: "sess-1", turns: 3 }],
    });
    assert.equal(pass.verdict, "pass");
    assert.deepEqual(pass.turnPrograms, [{ program: "sess-1", turns: 2, dashboardTurns: 3 }]);
    assert.match(formatTable([pass]), /\| sess-1 \(2; dashboard 3\) \+ side: anonymous:r-3 \(1\) \|/);
    assert.deepEqual(pass.laterTurns, [{ prompt: 130, cached: 96, previous: 105 }]);
    assert.match(formatTable([pass]), /on 1 of 1 turns$/m);
    assert.deepEqual(pass.requests, { "POST /v1/messages 200": 3, "GET /v1/models 200": 1 });

    const failed = requestRows(
      [
        exchange({ seq: 1, path: "/v1/messages", status: 400, responseBody: '{"type":"error"}' }),
        exchanges[1]!,
      ],
      recordedRequests(record),
      invocations,
    );
    const fail = summarize({
      ...identity,
      invocations: [invocation(500, 1500, { exitCode: 1 }), invocations[1]!],
      rows: failed,
    });
    assert.equal(fail.verdict, "fail");
    assert.deepEqual(fail.reasons, ["run 1 exited 1", "1 protocol error(s)"]);
    assert.match(fail.protocolErrors[0] ?? "", /^#1 POST \/v1\/messages: HTTP 400/);

    const anonymous = requestRows(
      [
        exchange({ seq: 3, path: "/v1/chat/completions" }),
        exchange({ seq: 5, path: "/v1/chat/completions", requestId: "r-3" }),
      ],
      recordedRequests(record),
      invocations,
    );
    assert.deepEqual(summarize({ ...identity, invocations, rows: anonymous }).reasons, [
      "turns landed on no program",
    ]);
  });

  test("a subagent's calls (tools, but a system prompt of their own) are side requests, not turns", () => {
    const chat = (system: string, tools: number) =>
      JSON.stringify({
        messages: [
          { role: "system", content: system },
          { role: "user", content: [{ type: "text", text: "hi" }] },
        ],
        tools: Array.from({ length: tools }, (_, i) => ({ type: "function", function: { name: `t${i}` } })),
      });
    const rows = requestRows(
      [
        exchange({ seq: 1, path: "/v1/chat/completions", requestBody: chat("You are Qwen Code", 10) }),
        exchange({ seq: 2, path: "/v1/chat/completions", requestBody: chat("You are Qwen Code", 10) }),
        exchange({
          seq: 3,
          path: "/v1/chat/completions",
          requestBody: chat("You are the memory extraction subagent", 6),
        }),
      ],
      new Map(),
      [],
    );
    assert.deepEqual(
      rows.map((r) => r.kind),
      ["turn", "turn", "side"],
    );
    assert.equal(
      conversationKey({ input: [{ role: "developer", content: [{ type: "input_text", text: "Codex" }] }] }),
      "Codex",
    );
    assert.equal(
      conversationKey({
        system: [
          { type: "text", text: "a" },
          { type: "text", text: "b" },
        ],
      }),
      "a\nb",
    );
  });

  test("a run the harness gave up at the output cap fails, and the table and reasons say why", () => {
    const rows = requestRows(
      [exchange({ seq: 1, path: "/v1/messages" }), exchange({ seq: 2, path: "/v1/messages" })],
      recordedRequests(
        [1, 2].map((n) => JSON.stringify({ program: "s", request: `r-${n}`, event: "arrival" })).join("\n"),
      ),
      [],
    );
    const capped = invocation(0, 5000, {
      exitCode: 1,
      exitFromOutputCap: true,
      notes: ["reply cut at the output cap"],
    });
    const r = summarize({
      name: "claude-code",
      pkg: "p",
      version: "1",
      api: "a",
      outputCap: "256",
      invocations: [capped],
      rows,
    });
    assert.equal(r.verdict, "fail");
    assert.match(r.reasons.join("; "), /run 1 exited 1 \(a reply cut at the output cap/);
    const table = formatTable([r]);
    assert.ok(
      table.includes("| claude-code | 1 | fail | 1 (cap) | 2x /v1/messages 200 | 0 | s (2) | ? |"),
      table,
    );
    assert.match(table, /claude-code: run 1: reply cut at the output cap/);
  });

  test("each harness reads its own output: Claude Code's result, Codex's events, opencode's error events", () => {
    const byName = Object.fromEntries(HARNESSES.map((h) => [h.name, h]));
    const claude = byName["claude-code"]!;
    const capped = claude.findings(
      JSON.stringify({
        type: "result",
        is_error: true,
        api_error: "max_output_tokens",
        api_error_status: null,
        session_id: "c459",
        result: "API Error: Claude's response exceeded the 128 output token maximum.",
      }),
      "",
    );
    assert.deepEqual([capped.errors, capped.exitFromOutputCap, capped.sessionId], [[], true, "c459"]);
    const refused = claude.findings(
      JSON.stringify({
        type: "result",
        is_error: true,
        api_error_status: 400,
        result: "API Error: 400 messages[1].role",
      }),
      "",
    );
    assert.deepEqual(refused.errors, ["400: API Error: 400 messages[1].role"]);

    const codex = byName["codex"]!;
    const ok = codex.findings(
      [
        { type: "thread.started", thread_id: "t1" },
        { type: "turn.completed", usage: {} },
      ]
        .map((e) => JSON.stringify(e))
        .join("\n"),
      "Reading additional input from stdin...\n",
    );
    assert.deepEqual([ok.errors, ok.sessionId], [[], "t1"]);
    const failed = codex.findings(
      JSON.stringify({ type: "turn.failed", error: { message: "unexpected status 404 Not Found" } }),
      "",
    );
    assert.deepEqual(failed.errors, ["turn.failed: unexpected status 404 Not Found"]);

    const qwen = byName["qwen-code"]!;
    const [session] = qwen.invocations({} as never);
    assert.equal(session?.stdin?.trim().split("\n").length, 2);
    const twoTurns = qwen.findings(
      [
        { type: "system", subtype: "init", session_id: "q1" },
        { type: "system", subtype: "retry", session_id: "q1", data: { reason: "retry" } },
        { type: "result", subtype: "success", is_error: false, session_id: "q1" },
        { type: "result", subtype: "error", is_error: true, session_id: "q1", error: { message: "400 bad" } },
      ]
        .map((e) => JSON.stringify(e))
        .join("\n"),
      "",
    );
    assert.deepEqual(
      [twoTurns.errors, twoTurns.notes, twoTurns.sessionId],
      [["is_error: 400 bad"], ["retried a request (retry)"], "q1"],
    );

    const opencode = byName["opencode"]!;
    const err = opencode.findings(
      JSON.stringify({
        type: "error",
        sessionID: "ses_1",
        error: { name: "APIError", data: { message: "Bad Request" } },
      }),
      "",
    );
    assert.deepEqual([err.errors, err.sessionId], [["error event: Bad Request"], "ses_1"]);
  });
});
