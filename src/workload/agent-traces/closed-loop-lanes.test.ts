import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AgentCall, AgentTrace } from "./agent-trace.js";
import { ClosedLoopLanes, type LaneSend } from "./closed-loop-lanes.js";

const call = (t: number): AgentCall => ({
  kind: "call",
  t,
  input: 64,
  output: 4,
  hashIds: [1],
  apiTimeS: 1,
  thinkTimeS: 0,
  stop: "tool_use",
  model: null,
  streaming: false,
  extra: {},
});

const session = (id: string, calls: number, hashScope: "local" | "global" = "local"): AgentTrace => ({
  id,
  format: "weka",
  blockSize: 64,
  hashScope,
  root: {
    id,
    agentId: null,
    subagentType: null,
    status: null,
    t: 0,
    models: [],
    toolTokens: 0,
    systemTokens: 0,
    steps: Array.from({ length: calls }, (_, i) => call(i * 10)),
    extra: {},
  },
  extra: {},
});

/** Runs the lanes until `untilS`, every call taking `latencyS`; returns the sends in order. */
function run(lanes: ClosedLoopLanes, untilS: number, latencyS: (send: LaneSend) => number) {
  const sent: { send: LaneSend; atS: number }[] = [];
  const inFlight: { send: LaneSend; endS: number }[] = [];
  let nowS = 0;
  while (nowS <= untilS) {
    for (const send of lanes.due(nowS)) {
      sent.push({ send, atS: nowS });
      inFlight.push({ send, endS: nowS + latencyS(send) });
    }
    const next = Math.min(...inFlight.map((f) => f.endS), lanes.nextDueS() ?? Number.POSITIVE_INFINITY);
    if (!Number.isFinite(next)) break;
    nowS = next;
    for (const f of inFlight.filter((x) => x.endS <= nowS)) {
      lanes.finished(f.send, f.endS);
      inFlight.splice(inFlight.indexOf(f), 1);
    }
  }
  return sent;
}

describe("ClosedLoopLanes", () => {
  it("keeps N trees in flight, a lane drawing the next when its tree drains, every trace once per pass", () => {
    const traces = ["a", "b", "c"].map((id) => session(id, 2));
    const lanes = new ClosedLoopLanes(traces, { lanes: 2, seed: 7, warmStart: false, idleGapCapS: 10 });
    const sent = run(lanes, 30, () => 1);
    const busy = (atS: number) => new Set(sent.filter((s) => s.atS <= atS).map((s) => s.send.lane)).size;
    assert.equal(busy(0), 2);
    // every tree: 2 calls back to back (1 s each, no think time), so a lane draws a tree every 2 s
    const firstPass = lanes.runs
      .slice(0, 3)
      .map((r) => r.trace.id)
      .sort();
    assert.deepEqual(firstPass, ["a", "b", "c"]);
    const treeIds = new Set(sent.map((s) => s.send.treeId));
    assert.ok(treeIds.size >= 20);
    assert.equal(
      new Set(sent.map((s) => s.send.programId)).size,
      treeIds.size,
      "one program per tree replay",
    );
    assert.equal(lanes.measurementStartS, 0);
  });

  it("gives each replay of a local-scope trace its own cache scope, and global traces one per pass", () => {
    const local = new ClosedLoopLanes([session("a", 1)], {
      lanes: 1,
      seed: 1,
      warmStart: false,
      idleGapCapS: 10,
    });
    const localScopes = run(local, 5, () => 1).map((s) => s.send.scopeKey);
    assert.equal(new Set(localScopes).size, localScopes.length);
    const global = new ClosedLoopLanes([session("x", 1, "global"), session("y", 1, "global")], {
      lanes: 2,
      seed: 1,
      warmStart: false,
      idleGapCapS: 10,
    });
    const sends = run(global, 3, () => 1);
    const byDraw = sends.map((s) => s.send.scopeKey);
    assert.deepEqual(byDraw.slice(0, 2), ["pass-0", "pass-0"], "the first pass's sessions share ids");
    assert.deepEqual(byDraw.slice(2, 4), ["pass-1", "pass-1"]);
  });

  it("with a warm start, sends one warm-up call per lane and measures from when the last one finished", () => {
    const traces = [session("a", 6), session("b", 6)];
    const lanes = new ClosedLoopLanes(traces, { lanes: 2, seed: 3, warmStart: true, idleGapCapS: 10 });
    const sent = run(lanes, 40, (send) => (send.lane === 0 ? 2 : 5));
    const warmups = sent.filter((s) => s.send.warmup);
    assert.equal(warmups.length, 2);
    assert.ok(warmups.every((w) => w.atS === 0));
    assert.equal(lanes.measurementStartS, 5);
    const measured = sent.filter((s) => !s.send.warmup);
    assert.ok(measured.length > 0);
    assert.ok(
      measured.every((s) => s.atS >= 5),
      "nothing but warm-up calls before measurement starts",
    );
  });

  it("refuses an empty corpus and a concurrency that is no positive integer", () => {
    assert.throws(
      () => new ClosedLoopLanes([], { lanes: 1, seed: 1, warmStart: false, idleGapCapS: 1 }),
      /at least one/,
    );
    assert.throws(
      () => new ClosedLoopLanes([session("a", 1)], { lanes: 0, seed: 1, warmStart: false, idleGapCapS: 1 }),
      /positive integer/,
    );
  });
});
