import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { BlockHashContent } from "../../core/kv/token-content.js";
import type { PolicyContext } from "../../core/policy.js";
import { Program } from "../../core/program.js";
import { Request } from "../../core/request.js";
import { MORI_PAPER, MoriScheduler } from "./mori.js";

/** The context MORI reads: the GPU pool and the RAM tier, in tokens. */
function context(gpuTokens: number, cpuTokens: number): PolicyContext {
  return {
    nowS: 0,
    kvCapacityTokens: gpuTokens,
    offloadCapacityTokens: cpuTokens,
  } as unknown as PolicyContext;
}

let sequence = 0;

/** A turn of `program` with a prompt of `tokens`, arriving at `atS`. */
function turn(program: Program, tokens: number, atS: number): Request {
  return new Request(
    {
      requestId: `${program.id}#${sequence}`,
      programId: program.id,
      promptTokens: tokens,
      maxOutputTokens: 1,
      isLastStep: false,
      content: new BlockHashContent([]),
    },
    program,
    atS,
    sequence++,
  );
}

/**
 * Runs `cycles` turns of a program through MORI: each turn arrives, runs `reasoningS` on the engine and
 * ends in a tool call of `actingS` (the last one left in progress). Returns the time after the last turn
 * ended, and the last pin TTL MORI gave (null: its KV went to CPU memory).
 */
function cycle(
  mori: MoriScheduler,
  ctx: PolicyContext,
  program: Program,
  startS: number,
  cycles: readonly { reasoningS: number; actingS: number }[],
  tokens = 100,
): { endS: number; ttlS: number | null } {
  let nowS = startS;
  let ttlS: number | null = null;
  cycles.forEach((c, i) => {
    const request = turn(program, tokens, nowS);
    mori.arrived(request, program, nowS, ctx);
    request.admittedS = nowS;
    program.numRunning = 1;
    nowS += c.reasoningS;
    request.finishS = nowS;
    program.numRunning = 0;
    ttlS = mori.turnEnded(request, program, nowS, ctx);
    if (i < cycles.length - 1) nowS += c.actingS;
  });
  return { endS: nowS, ttlS };
}

describe("MoriScheduler", () => {
  it("scores idleness as tool time over the last k cycles, the one in progress included", () => {
    const mori = new MoriScheduler(MORI_PAPER);
    const ctx = context(10_000, 0);
    const p = new Program("p", 0);
    // four old cycles of 1 s reasoning + 9 s tools, then five of 1 s + 1 s: the old ones leave the window
    const busy = Array.from({ length: 5 }, () => ({ reasoningS: 1, actingS: 1 }));
    const { endS } = cycle(mori, ctx, p, 0, [
      ...Array.from({ length: 4 }, () => ({ reasoningS: 1, actingS: 9 })),
      ...busy,
    ]);
    // window: four completed (1 + 1) cycles and the current one (1 s reasoning, 0 s so far of its tool)
    assert.equal(mori.idleness(p, endS), 4 / 9);
    // the tool call in progress raises it as it runs: 16 s more -> (4 + 16) / (5 + 4 + 16)
    assert.equal(mori.idleness(p, endS + 16), 20 / 25);
    assert.equal(mori.idleness(new Program("fresh", 0), 0), 0, "no history: about to reason");
  });

  it("places the busiest in GPU memory, the next in CPU memory, and demotes the rest to the waiting queue", () => {
    const mori = new MoriScheduler(MORI_PAPER);
    // The RAM tier is inclusive (written through): it holds the GPU program's KV too, so 1000 + 1700
    // tokens of tiers hold 1700 of programs: two of 600, one in GPU memory.
    const ctx = context(1000, 1700);
    // each 600 tokens; a turn of (1 - a) x 10 s ending 10 a s before t = 100: iota a
    const placed = [
      ["busy", 0.1],
      ["mid", 0.5],
      ["idle", 0.9],
    ].map(([id, a]) => {
      const program = new Program(id as string, 0);
      cycle(mori, ctx, program, 90, [{ reasoningS: (1 - (a as number)) * 10, actingS: 0 }], 600);
      return program;
    });
    assert.ok(Math.abs(mori.idleness(placed[1] as Program, 100) - 0.5) < 1e-12);
    mori.advance(110, ctx);
    assert.deepEqual(
      placed.map((q) => [q.id, mori.tierOf(q)]),
      [
        ["busy", "gpu"],
        ["mid", "cpu"],
        ["idle", "waiting"],
      ],
    );
    assert.ok(!mori.mayStart(placed[2] as Program), "a waiting program's turn is held");
    assert.ok(mori.mayStart(placed[1] as Program));
  });

  it("promotes from the waiting queue as room frees: returned tool calls first, then returning, then new; smallest first", () => {
    const mori = new MoriScheduler(MORI_PAPER);
    const ctx = context(1000, 0);
    const hog = new Program("hog", 0);
    const big = turn(hog, 900, 0);
    mori.arrived(big, hog, 0, ctx);
    hog.numRunning = 1;
    mori.advance(1, ctx);
    assert.equal(mori.tierOf(hog), "gpu");
    const newcomer = new Program("new", 1);
    mori.arrived(turn(newcomer, 200, 1), newcomer, 1, ctx);
    const small = new Program("small", 1);
    mori.arrived(turn(small, 150, 1), small, 1, ctx);
    assert.equal(mori.tierOf(newcomer), "waiting", "900 + 200 > 1000");
    assert.equal(mori.tierOf(small), "waiting", "new programs wait for room too");
    hog.ended = true;
    mori.ended(hog);
    mori.advance(2, ctx);
    assert.equal(mori.tierOf(small), "gpu", "smallest first");
    assert.equal(mori.tierOf(newcomer), "gpu", "then the next, while it fits");
  });

  it("pins a GPU program until its idleness, rising with its tool call, would pass the GPU boundary", () => {
    const mori = new MoriScheduler(MORI_PAPER);
    const ctx = context(1000, 1700);
    // an idle program in CPU memory: 2 s reasoning, then 8 s of tool so far -> iota 0.8 at t = 10
    const idle = new Program("idle", 0);
    cycle(mori, ctx, idle, 0, [{ reasoningS: 2, actingS: 0 }], 600);
    // a busy one: 4 s reasoning at t = 6..10, its turn ends at 10 and is ranked
    const busy = new Program("busy", 0);
    const request = turn(busy, 600, 6);
    mori.arrived(request, busy, 6, ctx);
    request.admittedS = 6;
    request.finishS = 10;
    const ttlS = mori.turnEnded(request, busy, 10, ctx);
    assert.equal(mori.tierOf(busy), "gpu");
    assert.equal(mori.tierOf(idle), "cpu");
    // busy's iota = x / (4 + x) reaches idle's 0.8 after x = 16 s
    assert.ok(ttlS !== null && Math.abs(ttlS - 16) < 1e-9, String(ttlS));
  });
});
