import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AgentCall, AgentNode, AgentStep, AgentTrace } from "../../workload/agent-traces/agent-trace.js";
import { getProfile } from "../hardware/profiles.js";
import { DEFAULT_ENGINE_OPTIONS } from "../simulate.js";
import { type ClosedLoopSpec, simulateClosedLoop } from "./closed-loop.js";

/** Call i of an agent: a prompt of (i + 1) x 1024 tokens whose ids extend the previous call's. */
function calls(first: number, n: number, startT: number): AgentCall[] {
  return Array.from({ length: n }, (_, i) => ({
    kind: "call" as const,
    t: startT + i * 5,
    input: (i + 1) * 1024,
    output: 30,
    hashIds: Array.from({ length: (i + 1) * 16 }, (_, k) => first + k),
    apiTimeS: 1,
    thinkTimeS: 2,
    stop: "tool_use",
    model: null,
    streaming: false,
    extra: {},
  }));
}

const agent = (id: string, t: number, steps: AgentStep[]): AgentNode => ({
  id,
  agentId: id,
  subagentType: null,
  status: null,
  t,
  models: [],
  toolTokens: 0,
  systemTokens: 0,
  steps,
  extra: {},
});

/** A session of 6 calls that spawns a subagent (sharing the session's first ids) after its second. */
function session(id: string): AgentTrace {
  const own = calls(1, 6, 0);
  const child = agent(`${id}/a`, 6, calls(1, 3, 6));
  const steps: AgentStep[] = [
    own[0]!,
    own[1]!,
    { kind: "subagent", agent: child, background: false, recordedEndS: 18, recorded: {} },
    ...own.slice(2),
  ];
  return { id, format: "weka", blockSize: 64, hashScope: "local", root: agent(id, 0, steps), extra: {} };
}

const profile = getProfile("h100", "llama-3.1-8b");

function spec(change: Partial<ClosedLoopSpec> = {}): ClosedLoopSpec {
  return {
    policy: "vllm",
    traces: [session("s1"), session("s2")],
    profile,
    engine: { ...DEFAULT_ENGINE_OPTIONS, kvCapacityTokens: 65536 },
    concurrency: 2,
    durationS: 300,
    warmStart: false,
    idleGapCapS: 10,
    interactivityFloor: 50,
    seed: 3,
    maxContextTokens: 65536,
    ...change,
  };
}

describe("simulateClosedLoop", () => {
  it("is deterministic for a seed and reports AgentX's metrics consistently", () => {
    const a = simulateClosedLoop(spec());
    assert.deepEqual(simulateClosedLoop(spec()), a);
    assert.ok(a.requests.completed > 20);
    assert.equal(a.tpgs, a.total_tokens / a.duration_s / a.devices);
    assert.ok(a.interactivity.p90 <= a.interactivity.p50);
    assert.ok(a.ttft_s.p50 <= a.ttft_s.p90 && a.ttft_s.p90 <= a.ttft_s.p99);
    assert.ok(a.itl_s.p50 > 0 && a.itl_s.p50 <= a.itl_s.p99);
    assert.equal(a.meets_floor, a.interactivity.p90 >= 50);
    assert.ok(a.session_jct_s.sessions > 0, "sessions finished within the run");
  });

  it("reuses the prefix within a session and with its subagent, never across replays, up to the theoretical hit", () => {
    const r = simulateClosedLoop(spec({ engine: { ...DEFAULT_ENGINE_OPTIONS, kvCapacityTokens: 200_000 } }));
    assert.ok(r.theoretical_prefix_hit > 0.5);
    assert.ok(r.prefix_hit <= r.theoretical_prefix_hit, `${r.prefix_hit} > ${r.theoretical_prefix_hit}`);
    // a pool holding both lanes' trees: all but a partial block per call and the generated tokens is hit
    assert.ok(
      r.prefix_hit > r.theoretical_prefix_hit - 0.05,
      `${r.prefix_hit} vs ${r.theoretical_prefix_hit}`,
    );
  });

  it("counts calls past the model's context as overflow, per call and per session, and goes on with the tree", () => {
    const r = simulateClosedLoop(spec({ maxContextTokens: 4 * 1024 + 29 }));
    // calls of 4096 + 30 tokens and more overflow: 3 of each session's 6 calls, none of the subagent's 3
    assert.ok(r.context_overflow.requests > 0);
    assert.equal(r.context_overflow.invalid, true);
    assert.ok(r.context_overflow.request_rate > 0.2 && r.context_overflow.request_rate < 0.45);
    assert.equal(r.context_overflow.session_rate, 1);
    assert.ok(r.session_jct_s.sessions > 0, "trees drain past their overflowing calls");
  });

  it("measures from the end of the warm-up calls with a warm start", () => {
    const r = simulateClosedLoop(spec({ warmStart: true }));
    assert.ok(r.measurement_start_s > 0);
    assert.ok(r.requests.completed > 0);
  });
});
