import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { CHARS_PER_TOKEN } from "../tokens.js";
import type { TraceProgram } from "../trace.js";
import { importMiniSweAgentTraj } from "./import-mini-swe-agent.js";
import { importSweAgentTraj } from "./import-swe-agent.js";
import { detectTrajectoryFormat, importTrajectoryFile } from "./import-trajectory.js";

const SAMPLES = fileURLToPath(new URL("../../../../shared/samples/", import.meta.url));
const SWE_AGENT = join(SAMPLES, "swe-agent-sympy-23950.traj");
const MINI = join(SAMPLES, "mini-swe-agent-django__django-16255.traj.json");
const skipSamples = existsSync(SWE_AGENT) && existsSync(MINI) ? false : `shared samples absent: ${SAMPLES}`;

function assertPlausible(program: TraceProgram) {
  const last = program.turns.length - 1;
  program.turns.forEach((t, i) => {
    assert.ok(t.cached <= t.input, `turn ${i}: cached ${t.cached} > input ${t.input}`);
    assert.ok(t.output >= 1, `turn ${i}: no output`);
    if (i === last) assert.deepEqual([t.tool, t.toolS], [null, null]);
    else assert.ok(t.tool !== null && t.toolS !== null && t.toolS >= 0, `turn ${i}: no tool`);
  });
  assert.equal(program.turns[0]!.cached, 0);
}

const text = (n: number, ch = "x") => ch.repeat(n);

describe("SWE-agent .traj import", () => {
  it("turns the sample into one turn per model call with its recorded tool times", {
    skip: skipSamples,
  }, async () => {
    const raw = JSON.parse(readFileSync(SWE_AGENT, "utf8"));
    const program = await importTrajectoryFile(SWE_AGENT);
    assertPlausible(program);
    assert.equal(program.id, "sympy__sympy-23950");
    assert.equal(program.turns.length, raw.info.model_stats.api_calls);
    assert.deepEqual(
      program.turns.map((t) => t.tool),
      ["find", "str_replace_editor", "str_replace_editor", "python", "str_replace_editor", "python", null],
    );
    assert.equal(program.turns[3]!.toolS, 1.5485);
    // The first prompt is the system prompt plus the task.
    const [system, task] = raw.trajectory[0].messages;
    const firstChars = system.content.length + task.content.length;
    assert.ok(Math.abs(program.turns[0]!.input - firstChars / CHARS_PER_TOKEN) < 10);
    // Until SWE-agent starts eliding old observations, each prompt extends the previous one.
    for (let i = 1; i < 6; i++) {
      const prev = program.turns[i - 1]!;
      assert.ok(program.turns[i]!.cached >= prev.input + prev.output - 5, `turn ${i} lost its prefix`);
      assert.ok(program.turns[i]!.input > prev.input);
    }
    // The last call's prompt has the first observation elided: reuse stops right before it.
    const last = program.turns[6]!;
    assert.ok(last.cached < program.turns[0]!.input + program.turns[0]!.output + 10);
  });

  const message = (role: string, content: string) => ({ role, content });
  const sys = message("system", text(400));
  const task = message("user", text(400, "t"));
  const a = (i: number) => message("assistant", text(40, String(i)));
  const obs = (i: number) => message("user", text(800, String(i)));
  const elided = message("user", "Old environment output: (5 lines omitted)");

  it("sends each call the history as processed after the previous step", () => {
    const steps = [
      { action: "ls -la", execution_time: 0.5, messages: [sys, task, a(0), obs(0)] },
      { action: "cd /x && pytest -q", execution_time: 2, messages: [sys, task, a(0), obs(0), a(1), obs(1)] },
      {
        action: "submit",
        execution_time: 0.1,
        messages: [sys, task, a(0), elided, a(1), obs(1), a(2), obs(2)],
      },
    ];
    const program = importSweAgentTraj({ trajectory: steps }, { id: "t" });
    assert.deepEqual(
      program.turns.map((t) => [t.tool, t.toolS]),
      [
        ["ls", 0.5],
        ["pytest", 2],
        [null, null],
      ],
    );
    // Call 1 was sent step 0's list whole, call 2 step 1's (elision shows up only after step 2).
    const [t0, t1, t2] = program.turns;
    assert.ok(t1!.cached >= t0!.input + t0!.output - 2);
    assert.ok(t2!.cached >= t1!.input + t1!.output - 2);
  });

  it("loses reuse at an elided observation", () => {
    const steps = [
      { action: "ls", messages: [sys, task, a(0), obs(0)] },
      { action: "ls", messages: [sys, task, a(0), elided, a(1), obs(1)] },
      { action: "submit", messages: [sys, task, a(0), elided, a(1), obs(1), a(2), obs(2)] },
    ];
    const [t0, t1, t2] = importSweAgentTraj({ trajectory: steps }).turns;
    assert.ok(t1!.cached >= t0!.input + t0!.output - 2);
    assert.ok(t2!.cached < t0!.input + t0!.output + 10, "reuse must stop at the elided observation");
  });

  it("uses a recorded query as the prompt, and history when steps carry no messages", () => {
    const withQuery = importSweAgentTraj({
      trajectory: [
        { action: "grep x", response: "a", execution_time: 1, query: [sys, task] },
        { action: "submit", response: "b", query: [sys, task, message("assistant", "a"), obs(0)] },
      ],
    });
    assert.ok(Math.abs(withQuery.turns[0]!.input - 800 / CHARS_PER_TOKEN) <= 6);
    const fromHistory = importSweAgentTraj({
      history: [sys, { ...a(9), is_demo: true }, task, a(0), obs(0), a(1), obs(1)],
      trajectory: [{ action: "find ." }, { action: "submit" }],
    });
    assert.equal(fromHistory.turns.length, 2);
    assert.equal(fromHistory.turns[0]!.tool, "find");
    assert.ok(fromHistory.turns[1]!.input > fromHistory.turns[0]!.input);
  });

  it("rejects files that are not trajectories, naming the field", () => {
    assert.throws(() => importSweAgentTraj({ trajectory: [{ execution_time: "slow" }] }), /execution_time/);
    assert.throws(() => importSweAgentTraj({ history: [] }), /trajectory/);
  });
});

describe("mini-swe-agent .traj.json import", () => {
  it("turns the sample into one turn per assistant message", { skip: skipSamples }, async () => {
    const raw = JSON.parse(readFileSync(MINI, "utf8"));
    const program = await importTrajectoryFile(MINI);
    assertPlausible(program);
    assert.equal(program.id, "django__django-16255");
    assert.equal(program.turns.length, raw.info.model_stats.api_calls);
    // A linear conversation: every prompt extends the previous prompt and response.
    for (let i = 1; i < program.turns.length; i++) {
      const prev = program.turns[i - 1]!;
      assert.ok(program.turns[i]!.input > prev.input + prev.output);
      assert.ok(program.turns[i]!.cached >= prev.input + prev.output - 2, `turn ${i} lost its prefix`);
    }
    assert.deepEqual(
      program.turns.slice(0, 4).map((t) => t.tool),
      ["ls", "nl", "cat", "python3"],
    );
  });

  it("finds the slow tool call from the gaps between responses", { skip: skipSamples }, async () => {
    const program = await importTrajectoryFile(MINI);
    const times = program.turns.map((t) => t.toolS ?? 0);
    const slowest = times.indexOf(Math.max(...times));
    // Turn 14 runs Django's sitemaps test suite; the calls around it run in about a second.
    assert.equal(slowest, 14);
    assert.equal(program.turns[14]!.tool, "python3");
    assert.ok(times[14]! > 5);
  });

  const assistant = (content: string, created?: number) => ({
    role: "assistant",
    content,
    ...(created === undefined ? {} : { extra: { response: { created, usage: { completion_tokens: 60 } } } }),
  });

  it("uses the fallback tool time without timestamps and reads list content", () => {
    const program = importMiniSweAgentTraj({
      messages: [
        { role: "system", content: [{ type: "text", text: text(100) }] },
        { role: "user", content: text(100) },
        assistant("```bash\ngit status\n```"),
        { role: "user", content: "<output>ok</output>" },
        assistant("```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"),
      ],
    });
    assert.ok(Math.abs(program.turns[0]!.input - 200 / CHARS_PER_TOKEN) <= 6);
    assert.deepEqual(program.turns[0], { ...program.turns[0]!, tool: "git", toolS: 0.15 });
  });
});

describe("mini-swe-agent 2.x .traj.json import", () => {
  // 2.x calls tools: the command is in extra.actions, and responses and observations carry local timestamps.
  const call = (command: string, respondedS: number) => ({
    role: "assistant",
    content: "",
    tool_calls: [
      { id: "c", type: "function", function: { name: "bash", arguments: JSON.stringify({ command }) } },
    ],
    extra: { actions: [{ command }], response: { created: 1 }, timestamp: respondedS },
  });
  const observation = (finishedS: number) => ({
    role: "tool",
    content: "ok",
    extra: { timestamp: finishedS },
  });

  it("names the tool by the action's command and times it from the timestamps", () => {
    const program = importMiniSweAgentTraj({
      messages: [
        { role: "system", content: text(100) },
        { role: "user", content: text(100) },
        call("cd /testbed && pytest tests/", 100),
        observation(112.5),
        call("cat a.py", 115),
        observation(115.25),
        call("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", 118),
      ],
    });
    assert.deepEqual(
      program.turns.map((t) => [t.tool, t.toolS]),
      [
        ["pytest", 12.5],
        ["cat", 0.25],
        [null, null],
      ],
    );
  });

  it("falls back to the estimate when a turn's timestamps are missing", () => {
    const program = importMiniSweAgentTraj({
      messages: [
        { role: "user", content: text(100) },
        call("ls", 100),
        { role: "tool", content: "ok" },
        call("echo done", 103),
      ],
    });
    assert.deepEqual([program.turns[0]!.tool, program.turns[0]!.toolS], ["ls", 0.15]);
  });
});

describe("importTrajectoryFile", () => {
  it("detects the format from the file name, else from the content", () => {
    assert.equal(detectTrajectoryFormat("a.traj.json", {}), "mini-swe-agent");
    assert.equal(detectTrajectoryFormat("a.traj", {}), "swe-agent");
    assert.equal(detectTrajectoryFormat("a.json", { trajectory: [] }), "swe-agent");
    assert.equal(detectTrajectoryFormat("a.json", { messages: [] }), "mini-swe-agent");
    assert.equal(detectTrajectoryFormat("a.json", { rows: [] }), null);
  });

  it("names the file when it cannot import it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "traj-"));
    const path = join(dir, "x.json");
    writeFileSync(path, JSON.stringify({ rows: [] }));
    await assert.rejects(
      importTrajectoryFile(path),
      new RegExp(`${path}: not a SWE-agent or mini-swe-agent trajectory`),
    );
  });
});
