import assert from "node:assert/strict";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { loadTrace, parseTraceJsonl, serializeTraceJsonl, type TraceProgram } from "../../workload/trace.js";
import type { TraceStats } from "../../workload/trace-stats.js";
import { runContinuum } from "../test-support/run-cli.js";

const SAMPLES = fileURLToPath(new URL("../../../../shared/samples/", import.meta.url));
const SWE_AGENT = "swe-agent-sympy-23950.traj";
const MINI = "mini-swe-agent-django__django-16255.traj.json";
const skipSamples =
  existsSync(join(SAMPLES, SWE_AGENT)) && existsSync(join(SAMPLES, MINI))
    ? false
    : `shared samples absent: ${SAMPLES}`;

const SESSION_FIXTURES = fileURLToPath(new URL("../../workload/test-support/", import.meta.url));

const tmp = () => mkdtempSync(join(tmpdir(), "continuum-trace-"));

const turn = (input: number, cached: number, output: number, tool: string | null, toolS: number | null) => ({
  input,
  cached,
  output,
  tool,
  toolS,
});

/** Append-only conversations: each prompt is the previous prompt and output plus a tool result. */
const SMALL_TRACE: TraceProgram[] = [
  {
    id: "a",
    turns: [turn(400, 0, 30, "grep", 0.5), turn(500, 430, 40, "pytest", 2), turn(600, 540, 20, null, null)],
  },
  { id: "b", turns: [turn(300, 0, 25, "ls", 0.25), turn(350, 325, 15, null, null)] },
  {
    id: "c",
    turns: [
      turn(800, 0, 60, "cat", 0.1),
      turn(900, 860, 10, "python", 1.5),
      turn(950, 910, 30, "ls", 0.2),
      turn(1000, 980, 50, null, null),
    ],
  },
];

/**
 * An agent that edits its history: its second prompt keeps only 208 of the first turn's 352 tokens
 * (prompt + output), its third appends to the second's. Multiples of the simulator's 16-token blocks.
 */
const EDITING: TraceProgram = {
  id: "d",
  turns: [turn(320, 0, 32, "edit", 0.5), turn(400, 208, 48, "ls", 1), turn(480, 448, 16, null, null)],
};

describe("continuum trace from-record", () => {
  it("turns a simulated run's record back into the programs that ran, which simulate again", async () => {
    const dir = tmp();
    const tracePath = join(dir, "small.jsonl");
    const originals = [...SMALL_TRACE, EDITING];
    writeFileSync(tracePath, serializeTraceJsonl(originals));
    const sim = ["--policies", "vllm", "--threads", "1", "--no-report", "--json"];
    const run = await runContinuum([
      "simulate",
      "--trace",
      tracePath,
      "--programs",
      "4",
      "--batch",
      "--record",
      join(dir, "record"),
      ...sim,
    ]);
    assert.equal(run.code, 0, run.stderr);
    const [log] = readdirSync(join(dir, "record"));
    const back = join(dir, "back.jsonl");
    const convert = await runContinuum(["trace", "from-record", join(dir, "record", log!), "-o", back]);
    assert.equal(convert.code, 0, convert.stderr);
    assert.equal(convert.stdout, "");
    assert.match(convert.stderr, /converted 4 programs, 12 turns, 7000 prompt \+ 376 output tokens/);

    const programs = await loadTrace(back);
    // The simulator names a program `<index>:<trace id>`.
    const byId = new Map(programs.map((p) => [p.id.slice(p.id.indexOf(":") + 1), p]));
    assert.deepEqual([...byId.keys()].sort(), ["a", "b", "c", "d"]);
    // The edited history is measured, not assumed append-only (which would credit 352 tokens).
    assert.deepEqual(
      byId.get("d")!.turns.map((t) => t.cached),
      [0, 208, 448],
    );
    for (const original of originals) {
      const turns = byId.get(original.id)!.turns;
      // Input and output come back as they were, and so do the tools (each departure names the tool the
      // scheduler read); cached as the scheduler measured it, in whole 16-token blocks (the simulator
      // reuses whole blocks only, so it replays the same)
      assert.deepEqual(
        turns.map((t) => [t.input, t.cached, t.output, t.tool]),
        original.turns.map((t) => [t.input, Math.floor(t.cached / 16) * 16, t.output, t.tool]),
      );
      turns.forEach((t, i) => {
        const toolS = original.turns[i]!.toolS;
        if (toolS === null) {
          assert.deepEqual([t.tool, t.toolS], [null, null]);
        } else {
          // A turn arrives when its tool is done, or at the end of the engine step then running.
          assert.ok(
            t.toolS! >= toolS && t.toolS! < toolS + 0.25,
            `turn ${i}: tool_s ${t.toolS} for ${toolS}`,
          );
        }
      });
    }

    const again = await runContinuum(["simulate", "--trace", back, "--programs", "4", "--batch", ...sim]);
    assert.equal(again.code, 0, again.stderr);
    const { results } = JSON.parse(again.stdout) as { results: { completed: number }[] };
    assert.equal(results[0]!.completed, 4);
  });

  it("names a missing file, a file that is no record and a record without programs", async () => {
    const dir = tmp();
    const missing = await runContinuum(["trace", "from-record", join(dir, "nope.jsonl")]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /nope\.jsonl: no such file/);
    const tracePath = join(dir, "trace.jsonl");
    writeFileSync(tracePath, serializeTraceJsonl(SMALL_TRACE));
    const notRecord = await runContinuum(["trace", "from-record", tracePath]);
    assert.equal(notRecord.code, 1);
    assert.match(notRecord.stderr, /trace\.jsonl: not a scheduler event log/);
    const empty = join(dir, "empty.jsonl");
    writeFileSync(empty, "");
    const none = await runContinuum(["trace", "from-record", empty]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /empty\.jsonl: no program converted/);
  });
});

describe("continuum trace import", () => {
  it("imports a directory's trajectories, reporting and skipping a bad file", {
    skip: skipSamples,
  }, async () => {
    const dir = tmp();
    const runs = join(dir, "runs");
    mkdirSync(join(runs, "mini"), { recursive: true });
    copyFileSync(join(SAMPLES, SWE_AGENT), join(runs, SWE_AGENT));
    copyFileSync(join(SAMPLES, MINI), join(runs, "mini", MINI));
    writeFileSync(join(runs, "broken.traj"), '{"trajectory": [');
    writeFileSync(join(runs, "preds.json"), JSON.stringify({ "django__django-16255": { model_patch: "" } }));
    writeFileSync(join(runs, "notes.txt"), "not looked at");
    const out = join(dir, "mine.jsonl");
    const run = await runContinuum(["trace", "import", runs, "-o", out]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, "");
    assert.match(run.stderr, /skipped .*broken\.traj: /);
    assert.match(
      run.stderr,
      /imported 2 programs, 24 turns, \d+ prompt \+ \d+ output tokens from 2 of 4 files; 1 skipped; 1 other file ignored/,
    );
    const programs = await loadTrace(out);
    assert.deepEqual(
      programs.map((p) => [p.id, p.turns.length]),
      [
        ["django__django-16255", 17],
        ["sympy__sympy-23950", 7],
      ],
    );
  });

  it("imports Claude Code and Codex session logs beside trajectories, found by content", async () => {
    const dir = tmp();
    const home = join(dir, "home");
    const project = join(home, ".claude", "projects", "-tmp-demo");
    const subagents = join(project, "11111111-2222-4333-8444-555555555555", "subagents");
    const day = join(home, ".codex", "sessions", "2025", "02", "01");
    for (const d of [subagents, day]) mkdirSync(d, { recursive: true });
    copyFileSync(join(SESSION_FIXTURES, "claude-code-session.jsonl"), join(project, "11111111.jsonl"));
    copyFileSync(join(SESSION_FIXTURES, "claude-code-agent.jsonl"), join(subagents, "agent-a1b2c3.jsonl"));
    copyFileSync(join(SESSION_FIXTURES, "codex-rollout.jsonl"), join(day, "rollout-2025-02-01.jsonl"));
    // a session that never got an answer, and JSON Lines of another kind
    writeFileSync(
      join(project, "empty.jsonl"),
      `${JSON.stringify({ type: "user", sessionId: "e", message: { role: "user", content: "hi" } })}\n`,
    );
    writeFileSync(join(home, "record.jsonl"), `${JSON.stringify({ event: "arrival", t: 0 })}\n`);
    const withSweAgent = skipSamples === false;
    if (withSweAgent) copyFileSync(join(SAMPLES, SWE_AGENT), join(home, SWE_AGENT));
    const out = join(dir, "mine.jsonl");
    const run = await runContinuum(["trace", "import", home, "-o", out]);
    assert.equal(run.code, 0, run.stderr);
    const files = withSweAgent ? "4 of 6 files" : "3 of 5 files";
    assert.match(
      run.stderr,
      new RegExp(
        `imported ${withSweAgent ? 5 : 4} programs, .* from ${files}; 1 other file ignored; ` +
          "1 session without a response with usage left out; 2 responses without usage left out",
      ),
    );
    const programs = await loadTrace(out);
    const session = "11111111-2222-4333-8444-555555555555";
    assert.deepEqual(
      programs.map((p) => [p.id, p.source, p.turns.length]),
      [
        [`${session}/agent-a1b2c3`, "claude-code 9.9.9", 2],
        [session, "claude-code 9.9.9", 5],
        [`${session}/sidechain-1`, "claude-code 9.9.9", 2],
        ["22222222-3333-4444-8555-666666666666", "codex 8.8.8", 4],
        ...(withSweAgent ? [["sympy__sympy-23950", "swe-agent 1.0.1", 7]] : []),
      ],
    );
    const sim = await runContinuum([
      "simulate",
      "--trace",
      out,
      "--programs",
      "4",
      "--batch",
      "--policies",
      "vllm",
      "--threads",
      "1",
      "--no-report",
      "--json",
    ]);
    assert.equal(sim.code, 0, sim.stderr);
  });

  it("writes named files to stdout, with --source", { skip: skipSamples }, async () => {
    const run = await runContinuum(["trace", "import", join(SAMPLES, SWE_AGENT), "--source", "my-run"]);
    assert.equal(run.code, 0, run.stderr);
    const [program] = parseTraceJsonl(run.stdout);
    assert.equal(program!.id, "sympy__sympy-23950");
    assert.equal(program!.source, "my-run");
  });

  it("fails when nothing converts, and names a path that does not exist", async () => {
    const dir = tmp();
    const bad = join(dir, "bad.json");
    writeFileSync(bad, JSON.stringify({ rows: [] }));
    const none = await runContinuum(["trace", "import", bad]);
    assert.equal(none.code, 1);
    assert.match(
      none.stderr,
      /skipped .*bad\.json: not a SWE-agent or mini-swe-agent trajectory, nor a Claude Code, Codex or Qwen Code session log or an opencode export/,
    );
    assert.match(none.stderr, /no trajectory converted \(1 file; 1 skipped\)/);
    const missing = await runContinuum(["trace", "import", join(dir, "absent")]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /absent: no such file or directory/);
  });
});

describe("continuum trace stats", () => {
  it("prints the shape of a trace, as a table and as JSON", async () => {
    const dir = tmp();
    const tracePath = join(dir, "small.jsonl");
    writeFileSync(tracePath, serializeTraceJsonl(SMALL_TRACE));
    const json = await runContinuum(["trace", "stats", tracePath, "--json"]);
    assert.equal(json.code, 0, json.stderr);
    const s = JSON.parse(json.stdout) as TraceStats;
    assert.equal(s.programs, 3);
    assert.deepEqual(s.turns, { total: 9, mean: 3, std: Math.sqrt(2 / 3), median: 3, max: 4 });
    assert.equal(s.finalContextTokens.max, 1050);
    assert.equal(s.reusableFraction, 4045 / 5800);
    assert.deepEqual(
      s.tools.map((t) => [t.tool, t.calls]),
      [
        ["ls", 2],
        ["grep", 1],
        ["pytest", 1],
        ["cat", 1],
        ["python", 1],
      ],
    );
    const table = await runContinuum(["trace", "stats", tracePath, "--top", "2"]);
    assert.equal(table.code, 0, table.stderr);
    assert.match(table.stdout, /turns per program +3\.0 ± 0\.8 \(median 3, max 4; 9 in all\)/);
    assert.match(table.stdout, /reusable share +69\.7% of prompt tokens/);
    assert.match(table.stdout, /^ls +2 +33\.3% +0\.23 +0\.02 +0\.23 +0\.25$/m);
    assert.match(table.stdout, /\(3 more tools: 50\.0% of calls\)/);
    const empty = join(dir, "empty.jsonl");
    writeFileSync(empty, "");
    const none = await runContinuum(["trace", "stats", empty]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /empty\.jsonl: no program in the trace/);
  });
});

describe("continuum trace import and stats on session traces with block ids", () => {
  const weka = (id: string, extra: object = {}) => ({
    id,
    models: ["m"],
    block_size: 64,
    hash_id_scope: "local",
    requests: [
      {
        t: 0,
        type: "n",
        model: "m",
        in: 128,
        out: 8,
        hash_ids: [1, 2],
        stop: "tool_use",
        api_time: 1,
        think_time: 0,
      },
      {
        t: 0.5,
        type: "subagent",
        agent_id: "a",
        subagent_type: "Explore",
        status: "completed",
        models: ["m"],
        requests: [{ t: 0.5, type: "n", in: 64, out: 4, hash_ids: [1], api_time: 1, think_time: 0 }],
      },
      {
        t: 3,
        type: "n",
        model: "m",
        in: 192,
        out: 8,
        hash_ids: [1, 2, 3],
        stop: "end_turn",
        api_time: 1,
        think_time: 1,
      },
    ],
    ...extra,
  });

  it("imports a directory of Weka traces and a Mooncake file, naming a bad session and keeping the rest", async () => {
    const dir = tmp();
    const traces = join(dir, "weka");
    mkdirSync(traces);
    writeFileSync(join(traces, "a.json"), JSON.stringify(weka("s1", { capture: "v2" })));
    writeFileSync(join(traces, "b.json"), JSON.stringify({ ...weka("s2"), block_size: -1 }));
    const out = join(dir, "weka.jsonl");
    const run = await runContinuum(["trace", "import", traces, "-o", out]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /skipped .*b\.json: trace s2: block_size: /);
    assert.match(
      run.stderr,
      /imported 1 session, 3 calls \(2 turns, 1 in 1 subagent\), 384 input \+ 20 output tokens, 6 block ids from 2 files; 1 session skipped; unknown fields kept: capture \(1\)/,
    );
    const stats = await runContinuum(["trace", "stats", out]);
    assert.equal(stats.code, 0, stats.stderr);
    assert.match(stats.stdout, /sessions +1 \(1 with subagents, 100\.0%\)/);
    // 128 [1,2] -> 0; 64 [1] -> 64; 192 [1,2,3] -> 128
    assert.match(stats.stdout, /theoretical prefix hit +50\.0% of input tokens/);
    const mooncake = join(dir, "mc.jsonl");
    writeFileSync(
      mooncake,
      '{"timestamp": 0, "input_length": 1024, "output_length": 4, "hash_ids": [7, 8]}\n{"timestamp": 5, "input_length": 700, "output_length": 2, "hash_ids": [7, 9]}\n',
    );
    const mc = await runContinuum(["trace", "import", mooncake]);
    assert.equal(mc.code, 0, mc.stderr);
    assert.match(mc.stderr, /imported 2 sessions, 2 calls/);
    assert.match(mc.stdout, /"hash_id_scope":"global"/);
    const all = await runContinuum(["trace", "import", join(traces, "b.json")]);
    assert.equal(all.code, 1);
    assert.match(all.stderr, /no session imported/);
  });
});
