import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "../../core/test-support/fast-check.js";
import type { AgentCall, AgentNode, AgentSpawn, AgentStep, AgentTrace } from "./agent-trace.js";
import { ownCalls, treeNodes } from "./agent-trace.js";
import { type ReplaySend, TreeReplay } from "./tree-replay.js";

const call = (t: number, thinkTimeS = 0, input = 100): AgentCall => ({
  kind: "call",
  t,
  input,
  output: 10,
  hashIds: [],
  apiTimeS: 1,
  thinkTimeS,
  stop: "tool_use",
  model: null,
  streaming: false,
  extra: {},
});

const node = (id: string, t: number, steps: AgentStep[]): AgentNode => ({
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

const spawn = (agent: AgentNode, recordedEndS: number, background = false): AgentSpawn => ({
  kind: "subagent",
  agent,
  background,
  recordedEndS,
  recorded: {},
});

const trace = (root: AgentNode): AgentTrace => ({
  id: root.id,
  format: "weka",
  blockSize: 64,
  hashScope: "local",
  root,
  extra: {},
});

/** Drives a replay: each call takes `latency(send)` seconds; returns every send with its times. */
function drive(replay: TreeReplay, latency: (send: ReplaySend) => number, limitS = 1e6) {
  const log: { send: ReplaySend; sentS: number; endS: number }[] = [];
  const inFlight: { send: ReplaySend; endS: number }[] = [];
  let nowS = replay.startS;
  for (let guard = 0; guard < 10_000; guard++) {
    for (const send of replay.due(nowS)) {
      const endS = nowS + latency(send);
      inFlight.push({ send, endS });
      log.push({ send, sentS: nowS, endS });
    }
    const nextEnd = Math.min(...inFlight.map((f) => f.endS));
    const nextDue = replay.nextDueS() ?? Number.POSITIVE_INFINITY;
    const next = Math.min(nextEnd, nextDue);
    if (!Number.isFinite(next) || next > limitS) break;
    nowS = Math.max(nowS, next);
    for (const f of inFlight.filter((x) => x.endS <= nowS)) {
      replay.finished(f.send, f.endS);
      inFlight.splice(inFlight.indexOf(f), 1);
    }
  }
  return log;
}

const NO_CAP = { idleGapCapS: Number.POSITIVE_INFINITY };

describe("TreeReplay", () => {
  it("sends an agent's calls one after another, each its think time after the previous one ended", () => {
    const replay = new TreeReplay(trace(node("s", 0, [call(0), call(10, 3), call(20, 0.5)])), 0, NO_CAP);
    const log = drive(replay, () => 2);
    assert.deepEqual(
      log.map((l) => [l.send.callIndex, l.sentS]),
      [
        [0, 0],
        [1, 5],
        [2, 7.5],
      ],
    );
    assert.ok(replay.drained);
  });

  it("caps every recorded gap at the idle-gap cap", () => {
    const replay = new TreeReplay(trace(node("s", 0, [call(0), call(500, 400)])), 0, { idleGapCapS: 10 });
    const log = drive(replay, () => 1);
    assert.equal(log[1]?.sentS, 11);
  });

  it("starts a subagent at its offset from the parent call before it, in parallel with the parent, and joins it", () => {
    const child = node("s/a", 4, [call(4), call(8, 1)]);
    // parent: call at 3 (the Task call), subagent spawned 1 s after it, a call at 6 (before the child's
    // recorded end at 12: not gated), a call at 14 (after it: gated, then 2 s after the child's end)
    const root = node("s", 0, [call(3), spawn(child, 12), call(6, 1), call(14, 1)]);
    const replay = new TreeReplay(trace(root), 0, NO_CAP);
    const log = drive(replay, (send) => (send.node.id === "s/a" ? 5 : 1));
    const at = (id: string, index: number) =>
      log.find((l) => l.send.node.id === id && l.send.callIndex === index);
    // the root's first call is due 3 s in (its recorded t from the node's start)
    assert.equal(at("s", 0)?.sentS, 3);
    assert.equal(at("s/a", 0)?.sentS, 4, "spawned 1 s after the parent's call was sent");
    assert.equal(at("s", 1)?.sentS, 5, "the parent goes on while the child runs");
    assert.equal(at("s/a", 1)?.sentS, 10);
    assert.equal(at("s/a", 1)?.endS, 15);
    assert.equal(at("s", 2)?.sentS, 17, "the join: the child's end plus the 2 s recorded after it");
    assert.ok(replay.drained);
  });

  it("gates nothing on a background subagent, yet drains only once it is done", () => {
    const child = node("s/bg", 1, [call(1), call(2)]);
    const root = node("s", 0, [call(0), spawn(child, 3, true), call(5)]);
    const replay = new TreeReplay(trace(root), 0, NO_CAP);
    const log = drive(replay, (send) => (send.node.id === "s/bg" ? 50 : 1));
    const last = log.find((l) => l.send.node.id === "s" && l.send.callIndex === 1);
    assert.equal(last?.sentS, 1, "not held by the background subagent");
    assert.ok(replay.drained);
    assert.equal(Math.max(...log.map((l) => l.endS)), 101);
  });

  it("releases a join on a subagent with no calls at once", () => {
    const root = node("s", 0, [call(0), spawn(node("s/e", 1, []), 1), call(2, 1)]);
    const replay = new TreeReplay(trace(root), 0, NO_CAP);
    const log = drive(replay, () => 1);
    assert.equal(log.length, 2);
    assert.equal(
      log[1]?.sentS,
      2,
      "the parent call joins the empty subagent (its end + the 1 s recorded after)",
    );
    assert.ok(replay.drained);
  });

  it("warm-starts at t*: the call before t* first, earlier subagents skipped, the rest held until released", () => {
    const early = node("s/early", 1, [call(1)]);
    const root = node("s", 0, [call(0), spawn(early, 2), call(3), call(6, 1), call(9, 1)]);
    const replay = new TreeReplay(trace(root), 0, { ...NO_CAP, warmStartAtS: 7 });
    replay.holdUntil(Number.POSITIVE_INFINITY);
    const first = replay.due(0);
    assert.deepEqual(
      first.map((s) => [s.callIndex, s.warmup]),
      [[2, true]],
    );
    replay.finished(first[0] as ReplaySend, 4);
    assert.ok(replay.warmedUp);
    assert.deepEqual(replay.due(100), [], "held until the closed loop releases it");
    replay.holdUntil(100);
    const next = replay.due(100);
    assert.deepEqual(
      next.map((s) => [s.callIndex, s.warmup]),
      [[3, false]],
    );
    replay.finished(next[0] as ReplaySend, 101);
    assert.deepEqual(replay.due(101), [], "the early subagent never runs");
    assert.ok(replay.drained);
  });

  it("sends every call once, an agent's calls never overlapping, joins after their subagents (property)", () => {
    const leaf = (id: string, t: number, n: number) =>
      node(
        id,
        t,
        Array.from({ length: n }, (_, i) => call(t + i * 2, 0.5)),
      );
    const treeArb = fc
      .record({
        rootCalls: fc.integer({ min: 1, max: 6 }),
        children: fc.array(
          fc.record({
            after: fc.nat({ max: 5 }),
            calls: fc.integer({ min: 0, max: 4 }),
            background: fc.boolean(),
            grandchild: fc.boolean(),
          }),
          { maxLength: 4 },
        ),
        latencies: fc.array(fc.double({ min: 0.1, max: 20, noNaN: true }), { minLength: 1, maxLength: 20 }),
        cap: fc.constantFrom(5, Number.POSITIVE_INFINITY),
      })
      .map(({ rootCalls, children, latencies, cap }) => {
        const steps: AgentStep[] = Array.from({ length: rootCalls }, (_, i) => call(i * 10, 1) as AgentStep);
        children.forEach((c, i) => {
          const at = Math.min(c.after, rootCalls - 1) * 10 + 1;
          const kid = leaf(`s/c${i}`, at, c.calls);
          const withGrand = c.grandchild
            ? node(kid.id, kid.t, [...kid.steps, spawn(leaf(`${kid.id}/g`, at + 1, 1), at + 3)])
            : kid;
          const index = steps.findIndex((s) => s.kind === "call" && s.t > at);
          steps.splice(
            index < 0 ? steps.length : index,
            0,
            spawn(withGrand, at + c.calls * 2 + 1, c.background),
          );
        });
        return { root: node("s", 0, steps), latencies, cap };
      });
    fc.assert(
      fc.property(treeArb, ({ root, latencies, cap }) => {
        const replay = new TreeReplay(trace(root), 0, { idleGapCapS: cap });
        let k = 0;
        const log = drive(replay, () => latencies[k++ % latencies.length] as number);
        const expected = treeNodes(root).reduce((n, x) => n + ownCalls(x).length, 0);
        assert.equal(log.length, expected);
        assert.ok(replay.drained);
        for (const agent of treeNodes(root)) {
          const mine = log.filter((l) => l.send.node === agent);
          assert.deepEqual(
            mine.map((l) => l.send.callIndex),
            mine.map((_, i) => i),
          );
          for (let i = 1; i < mine.length; i++) assert.ok(mine[i]!.sentS >= mine[i - 1]!.endS);
          // a call joins each earlier non-background subagent recorded as ended by its time
          const steps = agent.steps;
          steps.forEach((step, si) => {
            if (step.kind !== "subagent" || step.background) return;
            const subtree = log.filter((l) => treeNodes(step.agent).includes(l.send.node));
            const joiner = steps.slice(si + 1).find((s) => s.kind === "call" && s.t >= step.recordedEndS);
            if (!joiner || subtree.length === 0) return;
            const sent = mine.find((l) => l.send.call === joiner);
            assert.ok(sent && sent.sentS >= Math.max(...subtree.map((l) => l.endS)));
          });
        }
      }),
      { seed: 55, numRuns: 300 },
    );
  });
});
