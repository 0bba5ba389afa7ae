import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { copyFile, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { parseTraceJsonl, serializeTraceJsonl, type TraceTurn } from "../trace.js";
import { isOpencodeExport } from "./import-opencode.js";
import { importSessionLog } from "./import-trajectory.js";
import type { SessionImport } from "./session-log.js";
import { findTrajectoryFiles, importFoundTrajectory } from "./trajectory-files.js";

const FIXTURES = fileURLToPath(new URL("../test-support/", import.meta.url));
const read = (name: string) => readFileSync(join(FIXTURES, name), "utf8");
const turn = (input: number, cached: number, output: number, tool: string | null, toolS: number | null) =>
  ({ input, cached, output, tool, toolS }) satisfies TraceTurn;
const last = (input: number, cached: number, output: number) => turn(input, cached, output, null, null);

/** Imports from text, requiring a session log. */
function imported(name: string, text: string): SessionImport {
  const result = importSessionLog(name, text, true);
  assert.ok(result !== null);
  // every program is a valid trace line
  assert.deepEqual(parseTraceJsonl(serializeTraceJsonl(result.programs)), result.programs);
  return result;
}

const OPENCODE_EXPORT = join(FIXTURES, "opencode-export.json");
const SESSION = "11111111-2222-4333-8444-555555555555";

describe("Claude Code session import", () => {
  it("makes one turn per API response, the subagent sidechain a program of its own", () => {
    const result = imported("claude-code-session.jsonl", read("claude-code-session.jsonl"));
    assert.equal(result.responsesWithoutUsage, 1);
    assert.equal(result.sessionsWithoutResponse, 0);
    assert.deepEqual(result.programs, [
      {
        id: SESSION,
        source: "claude-code 9.9.9",
        turns: [
          // three lines share msg_A: one response, its largest output count; first turn: nothing cached
          turn(3010, 0, 50, "Bash", 2.5),
          // parallel Read and Grep: the first names the tool; the request waits for the last result
          turn(3115, 3010, 40, "Read", 1.5),
          // the response without usage is left out: its time falls into the Task call's
          turn(3320, 3115, 20, "Task", 7),
          // no tool call, then the user typed (the <synthetic> message is no response)
          turn(3605, 3300, 25, "user", 60),
          last(3648, 3600, 5),
        ],
      },
      {
        id: `${SESSION}/sidechain-1`,
        source: "claude-code 9.9.9",
        turns: [turn(500, 0, 10, "Glob", 0.3), last(530, 510, 15)],
      },
    ]);
  });

  it("names a subagent file's program by its agentId", () => {
    const result = imported("agent.jsonl", read("claude-code-agent.jsonl"));
    assert.deepEqual(
      result.programs.map((p) => [p.id, p.turns]),
      [[`${SESSION}/agent-a1b2c3`, [turn(400, 0, 12, "Bash", 2), last(442, 412, 9)]]],
    );
  });

  it("starts a request at its api-request line where the log has one", () => {
    const base = { sessionId: "s", version: "2", isSidechain: false };
    const usage = {
      input_tokens: 100,
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
      output_tokens: 10,
    };
    const lines = [
      {
        ...base,
        type: "user",
        uuid: "a",
        message: { role: "user", content: "hi" },
        timestamp: "2025-01-01T00:00:00Z",
      },
      {
        ...base,
        type: "assistant",
        uuid: "b",
        requestRef: "r1",
        timestamp: "2025-01-01T00:00:05Z",
        message: { id: "m1", role: "assistant", content: [{ type: "text", text: "x" }], usage },
      },
      {
        ...base,
        type: "user",
        uuid: "c",
        message: { role: "user", content: "more" },
        timestamp: "2025-01-01T00:00:07Z",
      },
      { type: "api-request", id: "r2", timestamp: "2025-01-01T00:00:07.250Z" },
      {
        ...base,
        type: "assistant",
        uuid: "d",
        requestRef: "r2",
        timestamp: "2025-01-01T00:00:09Z",
        message: {
          id: "m2",
          role: "assistant",
          content: [{ type: "text", text: "y" }],
          usage: { ...usage, cache_read_input_tokens: 100 },
        },
      },
    ];
    const result = imported("s.jsonl", lines.map((l) => JSON.stringify(l)).join("\n"));
    assert.deepEqual(result.programs[0]!.turns, [turn(100, 0, 10, "user", 2.25), last(200, 100, 10)]);
  });

  it("counts a session without a response with usage, and refuses a broken line", () => {
    const line = { type: "user", sessionId: "s", message: { role: "user", content: "hi" } };
    const result = imported("s.jsonl", JSON.stringify(line));
    assert.deepEqual(result, { programs: [], responsesWithoutUsage: 0, sessionsWithoutResponse: 1 });
    assert.throws(
      () => importSessionLog("s.jsonl", `${JSON.stringify(line)}\n{oops\n${JSON.stringify(line)}\n`, true),
      /s\.jsonl: line 2: not a JSON object/,
    );
  });
});

describe("Codex rollout import", () => {
  it("makes one turn per token count that moved, with the response's tool calls", () => {
    const result = imported("codex-rollout.jsonl", read("codex-rollout.jsonl"));
    assert.equal(result.responsesWithoutUsage, 1);
    assert.deepEqual(result.programs, [
      {
        id: "22222222-3333-4444-8555-666666666666",
        source: "codex 8.8.8",
        turns: [
          // output_tokens already count reasoning; the repeated count is one response
          turn(1000, 0, 60, "shell", 1.2),
          // parallel calls: the first names the tool; the request waits for the last output; the
          // response without usage is left out, its time in this tool time; a tool of a namespace (an MCP
          // server's) is named as the model saw it
          turn(1100, 1024, 40, "mcp__fs__read_file", 6.5),
          // reasoning apart from output (total = input + output + reasoning) is added; cached bounded
          // by the previous prompt + output; no tool call, then the user typed
          turn(1300, 1140, 40, "user", 44.5),
          last(1350, 1300, 5),
        ],
      },
    ]);
  });
});

describe("Qwen Code session import", () => {
  it("makes one turn per assistant line with usage, timed by the api_response telemetry that matches it", () => {
    const result = imported("qwen-code-session.jsonl", read("qwen-code-session.jsonl"));
    assert.deepEqual(result, {
      programs: [
        {
          id: "qwen-session-1",
          source: "qwen-code 9.9.9",
          turns: [
            // thinking counts as output; the request started 3.5 s before its telemetry's end, and the
            // tool ran until the next matched request started (11.0 - 1.5 s)
            turn(12000, 0, 100, "run_shell_command", 5.5),
            // the memory subagent's request (3000 tokens) answers no assistant line: left out; without
            // telemetry the next request starts at the tool's functionResponse
            turn(12200, 12096, 60, "edit", 0.5),
            last(12300, 12256, 5),
          ],
        },
      ],
      responsesWithoutUsage: 0,
      sessionsWithoutResponse: 0,
    });
  });

  it("tells a Qwen Code log (Gemini parts) from a Claude Code one (Anthropic content)", () => {
    const qwen = { type: "user", sessionId: "s", message: { role: "user", parts: [{ text: "hi" }] } };
    const claude = { type: "user", sessionId: "s", message: { role: "user", content: "hi" } };
    const answer = {
      type: "assistant",
      sessionId: "s",
      message: { role: "model", parts: [{ text: "ok" }] },
      usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 2 },
    };
    const asQwen = imported("q.jsonl", [qwen, answer].map((l) => JSON.stringify(l)).join("\n"));
    assert.equal(asQwen.programs[0]?.source, "qwen-code");
    const asClaude = imported("c.jsonl", JSON.stringify(claude));
    assert.deepEqual(asClaude.programs, []);
    assert.equal(asClaude.sessionsWithoutResponse, 1);
  });
});

describe("session log detection", () => {
  it("leaves other JSON Lines found in a directory alone, and names a file given by name", () => {
    const chatLog = JSON.stringify({ role: "user", content: "hi", sessionId: "s" });
    const record = JSON.stringify({ event: "arrival", program: "p", request: "r", t: 0 });
    for (const text of [chatLog, record]) {
      assert.equal(importSessionLog("x.jsonl", text, false), null);
      assert.throws(() => importSessionLog("x.jsonl", text, true), /x\.jsonl: not a SWE-agent/);
    }
  });

  const HARNESS = fileURLToPath(new URL("../../../.cache/harness-check/", import.meta.url));
  const logsUnder = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory()
        ? logsUnder(join(dir, e.name))
        : e.name.endsWith(".jsonl") &&
            /\/(\.claude\/projects|\.codex\/sessions|\.qwen\/projects\/[^/]+\/chats)\//.test(
              join(dir, e.name),
            )
          ? [join(dir, e.name)]
          : [],
    );
  const real = existsSync(HARNESS) ? logsUnder(HARNESS) : [];
  it("converts the harness check's real Claude Code, Codex and Qwen Code logs", {
    skip:
      real.length === 0 ? `no harness-check session logs under ${HARNESS} (local only, not in CI)` : false,
  }, () => {
    // A run whose harness got no answer leaves a session without a response: counted, not an error.
    let programs = 0;
    for (const path of real) {
      const result = imported(path, readFileSync(path, "utf8"));
      assert.ok(result.programs.length + result.sessionsWithoutResponse > 0, path);
      for (const program of result.programs) assert.match(program.source!, /^(claude-code|codex|qwen-code) /);
      programs += result.programs.length;
    }
    assert.ok(programs > 0, "no real session converted");
  });
});

describe("opencode export import (`opencode export <session-id>`)", () => {
  it("makes one turn per step of an assistant message, with its tokens and tool times", async () => {
    const result = await importFoundTrajectory({ path: OPENCODE_EXPORT, named: true });
    assert.ok(result !== null);
    assert.deepEqual(parseTraceJsonl(serializeTraceJsonl(result.programs)), result.programs);
    // the aborted last message's step has no tokens: left out
    assert.equal(result.responsesWithoutUsage, 1);
    assert.deepEqual(result.programs, [
      {
        id: "ses_0f1e2d3c4b5aTestSessionId",
        source: "opencode 9.9.9",
        turns: [
          // reasoning counts as output; parallel bash and read: the first names the tool, the next step's
          // request waits for the last to end (3.7 s) from when the first started running (1.3 s)
          turn(1000, 0, 60, "bash", 2.4),
          // the prompt is opencode's input and its cache read: 30 + 1060
          turn(1090, 1060, 20, "edit", 0.5),
          // no tool: the message ends (completed at 6.5 s) and the person writes the next one
          turn(1165, 1110, 15, "user", 23.6),
          turn(1240, 1180, 5, null, null),
        ],
      },
    ]);
  });

  it("is told from a mini-swe-agent trajectory, which also has messages", () => {
    const mini = { info: { exit_status: "Submitted" }, messages: [{ role: "user", content: "Fix it." }] };
    assert.equal(isOpencodeExport(mini), false);
    assert.equal(isOpencodeExport({ ...mini, info: { id: "ses_1" } }), false);
    assert.equal(isOpencodeExport({ info: { id: "ses_1" }, messages: [{ info: {}, parts: [] }] }), true);
  });

  it("is found in a directory beside other JSON", async () => {
    const dir = await mkdtemp(join(tmpdir(), "continuum-opencode-"));
    try {
      await copyFile(OPENCODE_EXPORT, join(dir, "session.json"));
      await writeFile(join(dir, "preds.json"), JSON.stringify({ instance: { model_patch: "" } }));
      const files = await findTrajectoryFiles([dir]);
      const imported = await Promise.all(files.map((file) => importFoundTrajectory(file)));
      const programs = imported.flatMap((i) => i?.programs ?? []);
      assert.deepEqual(
        programs.map((p) => p.source),
        ["opencode 9.9.9"],
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
