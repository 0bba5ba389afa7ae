import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { ownCalls, ownSpawns, treeNodes } from "./agent-trace.js";
import {
  detectAgentTraceText,
  isAgentTraceSource,
  loadAgentTraces,
  serializeAgentTracesJsonl,
} from "./agent-trace-files.js";
import { agentTraceStats } from "./agent-trace-stats.js";
import { parseMooncakeJsonl } from "./mooncake-trace.js";
import { parseWekaTrace, wekaTraceJson } from "./weka-trace.js";

const WEKA_DIR = fileURLToPath(new URL("../../../../shared/traces/weka-synthetic/", import.meta.url));
const skipWeka = existsSync(WEKA_DIR) ? false : `shared traces absent: ${WEKA_DIR}`;

const tmp = () => mkdtempSync(join(tmpdir(), "continuum-agent-trace-"));

const call = (t: number, input: number, hashIds: number[], extra: object = {}) => ({
  t,
  type: "n",
  model: "claude-sonnet",
  in: input,
  out: 10,
  hash_ids: hashIds,
  input_types: ["text"],
  output_types: ["text", "tool_use"],
  stop: "tool_use",
  api_time: 2,
  think_time: 0.5,
  ...extra,
});

/** Every field of the format: a streaming call, a subagent with calls, one without, one in the background. */
const FULL = {
  id: "s1",
  models: ["claude-sonnet", "claude-haiku"],
  block_size: 64,
  hash_id_scope: "local",
  tool_tokens: 100,
  system_tokens: 200,
  totals: { requests: 5 },
  requests: [
    call(0, 128, [1, 2], { think_time: 0 }),
    { ...call(3, 192, [1, 2, 3]), type: "s", ttft: 0.4 },
    {
      t: 4,
      type: "subagent",
      agent_id: "agent_a",
      subagent_type: "Explore",
      status: "completed",
      duration_ms: 6000,
      total_tokens: 300,
      tool_use_count: 2,
      models: ["claude-haiku"],
      tool_tokens: 10,
      system_tokens: 20,
      requests: [call(4, 128, [1, 2], { model: "claude-haiku", think_time: 0 }), call(7, 192, [1, 2, 9])],
    },
    {
      t: 4.5,
      type: "subagent",
      agent_id: "agent_empty",
      subagent_type: "Plan",
      status: "completed",
      models: [],
      requests: [],
    },
    {
      t: 5,
      type: "subagent",
      agent_id: "agent_bg",
      subagent_type: "general-purpose",
      status: "async_launched",
      models: ["claude-haiku"],
      requests: [call(5, 64, [7], { think_time: 0 })],
    },
    call(11, 256, [1, 2, 3, 4], { stop: "end_turn", cache_hint: "x" }),
  ],
};

describe("parseWekaTrace", () => {
  it("reads every field: calls, a streaming call, subagents with and without calls, one in the background", () => {
    const parsed = parseWekaTrace(FULL);
    assert.ok(parsed.ok);
    const trace = parsed.trace;
    assert.equal(trace.blockSize, 64);
    assert.equal(trace.hashScope, "local");
    const root = trace.root;
    assert.equal(root.toolTokens, 100);
    assert.equal(root.systemTokens, 200);
    const calls = ownCalls(root);
    assert.equal(calls.length, 3);
    assert.deepEqual(calls[0]!.hashIds, [1, 2]);
    assert.equal(calls[1]!.streaming, true);
    assert.equal(calls[1]!.extra.ttft, 0.4);
    assert.equal(calls[1]!.thinkTimeS, 0.5);
    assert.equal(calls[1]!.apiTimeS, 2);
    const [a, empty, background] = ownSpawns(root);
    assert.equal(a!.agent.id, "s1/agent_a");
    assert.equal(a!.agent.subagentType, "Explore");
    assert.equal(a!.recordedEndS, 10, "duration_ms decides the recorded end");
    assert.equal(a!.background, false);
    assert.equal(ownCalls(a!.agent).length, 2);
    assert.equal(empty!.recordedEndS, 4.5, "a subagent with no calls ends where it starts");
    assert.equal(ownCalls(empty!.agent).length, 0);
    assert.equal(background!.background, true);
    assert.equal(background!.recordedEndS, 7, "without duration_ms: its calls' last end");
    assert.equal(treeNodes(root).length, 4);
  });

  it("keeps unknown fields, names them in the stats, and writes them back", () => {
    const withUnknown = { ...FULL, capture_version: 3 };
    const parsed = parseWekaTrace(withUnknown);
    assert.ok(parsed.ok);
    const written = wekaTraceJson(parsed.trace);
    assert.equal(written.capture_version, 3);
    assert.equal((written.requests as Record<string, unknown>[])[5]!.cache_hint, "x");
    const again = parseWekaTrace(written);
    assert.ok(again.ok);
    assert.deepEqual(again.trace, parsed.trace);
    assert.deepEqual(agentTraceStats([parsed.trace]).unknownFields, { capture_version: 1, cache_hint: 1 });
  });

  it("names the trace, the field path and the problem of a malformed trace", () => {
    const bad = structuredClone(FULL) as typeof FULL & { requests: Record<string, unknown>[] };
    (bad.requests[2]!.requests as Record<string, unknown>[])[1]!.in = -5;
    const parsed = parseWekaTrace(bad);
    assert.ok(!parsed.ok);
    assert.equal(parsed.id, "s1");
    assert.match(parsed.problem, /requests\[2\]\.requests\[1\]\.in: .*>=0/);
    const noScope = parseWekaTrace({ ...FULL, hash_id_scope: "session" });
    assert.ok(!noScope.ok);
    assert.match(noScope.problem, /hash_id_scope/);
    const badType = parseWekaTrace({ ...FULL, requests: [{ t: 0, type: "x" }] });
    assert.ok(!badType.ok);
    assert.match(badType.problem, /requests\[0\]\.type/);
  });

  it("refuses a trace without requests", () => {
    const parsed = parseWekaTrace({ ...FULL, requests: [] });
    assert.ok(!parsed.ok);
    assert.match(parsed.problem, /requests: empty/);
  });
});

describe("parseMooncakeJsonl", () => {
  const lines = [
    { timestamp: 1000, input_length: 1024, output_length: 20, hash_ids: [1, 2], session_id: "a" },
    { timestamp: 500, input_length: 600, output_length: 5, hash_ids: [1, 5] },
    {
      delay: 2500,
      input_length: 1600,
      output_length: 30,
      hash_ids: [1, 2, 3, 4],
      session_id: "a",
      tenant: "t",
    },
  ];
  const text = `${lines.map((l) => JSON.stringify(l)).join("\n")}\n`;

  it("groups lines by session_id, makes each other line a session, and keeps global ids", () => {
    const { traces, problems } = parseMooncakeJsonl(text, "m.jsonl", 512);
    assert.deepEqual(problems, []);
    assert.deepEqual(
      traces.map((t) => [t.id, ownCalls(t.root).length]),
      [
        ["a", 2],
        ["line-2", 1],
      ],
    );
    const a = traces[0]!;
    assert.equal(a.hashScope, "global");
    assert.equal(a.blockSize, 512);
    const [first, second] = ownCalls(a.root);
    assert.equal(first!.t, 0);
    assert.equal(second!.thinkTimeS, 2.5, "delay is the gap before the turn");
    assert.equal(second!.extra.tenant, "t");
  });

  it("leaves out the session of a bad line, naming the line and the field", () => {
    const bad = `${text}{"input_length": -3, "output_length": 1, "session_id": "a"}\nnot json\n`;
    const { traces, problems } = parseMooncakeJsonl(bad, "m.jsonl", 512);
    assert.deepEqual(
      traces.map((t) => t.id),
      ["line-2"],
    );
    assert.equal(problems.length, 2);
    assert.match(problems[0]!, /m\.jsonl:4: input_length: .* \(session a left out\)/);
    assert.match(problems[1]!, /m\.jsonl:5: invalid JSON/);
  });

  it("shares block ids between sessions: the theoretical hit spans the corpus", () => {
    const { traces } = parseMooncakeJsonl(text, "m.jsonl", 512);
    // a: 1024 tokens, none seen; 1600 tokens: ids 1,2 seen (1024 tokens) -> line-2 (600, later in the file):
    // id 1 seen -> 512 tokens. Order: sessions in file order, calls in time order within each.
    const stats = agentTraceStats(traces);
    assert.equal(stats.theoreticalPrefixHit, (1024 + 512) / (1024 + 1600 + 600));
  });
});

describe("agent trace files", () => {
  it("tells Weka files, Weka JSON Lines and Mooncake JSONL by content, and reads a directory", () => {
    const dir = tmp();
    writeFileSync(join(dir, "one.json"), JSON.stringify(FULL, null, 2));
    writeFileSync(
      join(dir, "many.jsonl"),
      `${JSON.stringify({ ...FULL, id: "s2" })}\n${JSON.stringify({ ...FULL, id: "s3" })}\n`,
    );
    writeFileSync(
      join(dir, "mc.data"),
      `${JSON.stringify({ timestamp: 0, input_length: 5, output_length: 1 })}\n`,
    );
    writeFileSync(join(dir, "notes.json"), JSON.stringify({ hello: 1 }));
    assert.equal(detectAgentTraceText(readFileSync(join(dir, "one.json"), "utf8")), "weka");
    assert.equal(detectAgentTraceText(readFileSync(join(dir, "many.jsonl"), "utf8")), "weka-jsonl");
    assert.equal(detectAgentTraceText(readFileSync(join(dir, "mc.data"), "utf8")), "mooncake");
    assert.equal(detectAgentTraceText('{"id":"p","turns":[]}\n'), null);
    const load = loadAgentTraces([dir, join(dir, "mc.data")]);
    assert.deepEqual(
      load.traces.map((t) => t.id),
      ["s2", "s3", "s1", "line-1"],
    );
    assert.deepEqual(load.ignored, [join(dir, "notes.json")]);
    assert.ok(isAgentTraceSource(dir));
  });

  it("names the file, the line and the field of a bad session and loads the rest", () => {
    const dir = tmp();
    const bad = { ...FULL, id: "broken", block_size: 0 };
    writeFileSync(join(dir, "t.jsonl"), `${JSON.stringify(FULL)}\n${JSON.stringify(bad)}\n`);
    const load = loadAgentTraces([dir]);
    assert.deepEqual(
      load.traces.map((t) => t.id),
      ["s1"],
    );
    assert.equal(load.problems.length, 1);
    assert.match(load.problems[0]!, /t\.jsonl:2: trace broken: block_size: /);
  });

  it("exports to Weka JSON Lines that read back to equal traces", () => {
    const dir = tmp();
    const parsed = parseWekaTrace(FULL);
    assert.ok(parsed.ok);
    const mooncake = parseMooncakeJsonl(
      '{"input_length": 700, "output_length": 3, "hash_ids": [4, 5]}\n',
      "m",
      512,
    );
    const path = join(dir, "out.jsonl");
    const traces = [parsed.trace, ...mooncake.traces];
    writeFileSync(path, serializeAgentTracesJsonl(traces));
    const back = loadAgentTraces([path]).traces;
    assert.deepEqual(
      back.map((t) => wekaTraceJson(t)),
      traces.map((t) => wekaTraceJson(t)),
    );
    assert.equal(back[1]!.hashScope, "global");
    assert.equal(back[1]!.blockSize, 512);
  });
});

describe("theoretical prefix hit", () => {
  it("counts leading ids an earlier call of the tree sent, in recorded time order, subagents included", () => {
    const parsed = parseWekaTrace(FULL);
    assert.ok(parsed.ok);
    // Time order: root 128 [1,2] (0), root 192 [1,2,3] (128), agent_a 128 [1,2] (128), bg 64 [7] (0),
    // agent_a 192 [1,2,9] (128), root 256 [1,2,3,4] (192).
    const stats = agentTraceStats([parsed.trace]);
    const hit = 0 + 128 + 128 + 0 + 128 + 192;
    const input = 128 + 192 + 128 + 64 + 192 + 256;
    assert.equal(stats.theoreticalPrefixHit, hit / input);
    assert.equal(stats.calls, 6);
    assert.equal(stats.subagents.total, 3);
    assert.equal(stats.subagents.background, 1);
    assert.equal(stats.subagents.withoutCalls, 1);
  });
});

/** Counts of the raw JSON, walked independently of the importer. */
function rawCounts(json: { requests: Record<string, unknown>[] }) {
  const counts = { calls: 0, subagents: 0, blockIds: 0, input: 0 };
  const walk = (requests: Record<string, unknown>[]) => {
    for (const r of requests) {
      if (r.type === "subagent") {
        counts.subagents++;
        walk(r.requests as Record<string, unknown>[]);
      } else {
        counts.calls++;
        counts.blockIds += (r.hash_ids as number[]).length;
        counts.input += r.in as number;
      }
    }
  };
  walk(json.requests);
  return counts;
}

describe("the 16 synthetic Weka traces", { skip: skipWeka }, () => {
  it("import accounts for every call, subagent and block id, and round-trips through Weka JSON Lines", () => {
    const files = readdirSync(WEKA_DIR).filter((f) => f.endsWith(".json"));
    assert.equal(files.length, 16);
    const expected = { calls: 0, subagents: 0, blockIds: 0, input: 0 };
    for (const file of files) {
      const counts = rawCounts(JSON.parse(readFileSync(join(WEKA_DIR, file), "utf8")));
      for (const key of Object.keys(expected) as (keyof typeof expected)[]) expected[key] += counts[key];
    }
    const load = loadAgentTraces([WEKA_DIR]);
    assert.deepEqual(load.problems, []);
    const stats = agentTraceStats(load.traces);
    assert.equal(stats.sessions, 16);
    assert.equal(stats.calls, expected.calls);
    assert.equal(stats.subagents.total, expected.subagents);
    assert.equal(stats.blockIds, expected.blockIds);
    assert.equal(stats.inputTokensPerCall.total, expected.input);
    assert.deepEqual(stats.unknownFields, {});
    const path = join(tmp(), "weka.jsonl");
    writeFileSync(path, serializeAgentTracesJsonl(load.traces));
    const back = loadAgentTraces([path]);
    assert.deepEqual(agentTraceStats(back.traces), stats);
    for (const [i, file] of files.entries()) {
      assert.deepEqual(
        wekaTraceJson(back.traces[i]!),
        JSON.parse(readFileSync(join(WEKA_DIR, file), "utf8")),
      );
    }
  });
});
