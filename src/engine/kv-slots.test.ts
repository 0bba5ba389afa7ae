import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { TokenIdContent } from "../core/kv/token-content.js";
import type { Request } from "../core/request.js";
import { CellLedger } from "./cell-ledger.js";
import { Engine } from "./engine.js";
import { FakeModelRunner } from "./fake-model-runner.js";
import { KvSlots } from "./kv-slots.js";
import { KvTierStore } from "./kv-tier-store.js";
import { type KvLayout, RunnerBatch } from "./model-runner.js";
import { PoolFollower } from "./pool-follower.js";
import { request as generateRequest, run } from "./test-support/engine-helpers.js";

describe("CellLedger", () => {
  test("shared cells are freed when their last holder lets go", () => {
    const ledger = new CellLedger(64);
    const a: number[] = [];
    const b: number[] = [];
    ledger.alloc(a, 40);
    ledger.sharePrefix(a, b, 32);
    ledger.alloc(b, 8);
    assert.equal(ledger.numUsed, 48);
    assert.equal(ledger.exclusive(a), 8);
    assert.equal(ledger.exclusive(b), 8);
    ledger.release(a, 0);
    assert.equal(ledger.numUsed, 40);
    assert.equal(ledger.exclusive(b), 40);
    ledger.release(b, 16);
    assert.equal(ledger.numUsed, 16);
    assert.throws(() => ledger.alloc([], 49), /49 cells wanted/);
  });
});

/** A stand-in for a scheduler Request: the slot table reads its id and content. */
function fakeRequest(id: string, tokens: number[], programId?: string): Request {
  return {
    id,
    programId,
    status: "running",
    content: new TokenIdContent(tokens, 16),
    program: { pin: null },
  } as unknown as Request;
}

/** The scheduler's word that a request stopped running without a pin: its slot becomes cache. */
function release(kv: KvSlots, request: Request): void {
  (request as { status: string }).status = "finished";
  kv.apply({
    pinned: [],
    released: [{ requestId: request.id, programId: "p", holder: "request", reason: "finished", tokens: 0 }],
  });
}

async function admit(kv: KvSlots, request: Request, needTokens: number) {
  return (await kv.admit(request, needTokens)).slot;
}

async function compute(runner: FakeModelRunner, kv: KvSlots, request: Request, upTo: number) {
  const slot = kv.slotOf(request);
  assert.ok(slot);
  const batch = new RunnerBatch();
  const content = request.content as TokenIdContent;
  for (let p = slot.length; p < upTo; p++) batch.add(content.tokenAt(p), p, slot.seqId, false);
  await kv.ensureFree(batch.length);
  await runner.execute(batch);
  kv.extend(slot, batch.length);
}

const seq = (n: number, from = 100) => Array.from({ length: n }, (_, i) => from + i);
const COMMON = seq(48, 7);

/** A computes 100 tokens and keeps running; B, sharing its first 70, is admitted with 64 of them known. */
async function runningThenCommonPrefix(kvLayout: KvLayout) {
  const runner = new FakeModelRunner({ kvCells: 512, maxSeqs: 4, kvLayout });
  const kv = new KvSlots(runner, null, 16);
  const a = fakeRequest("a", seq(100));
  await admit(kv, a, 0);
  await compute(runner, kv, a, 100);
  const b = fakeRequest("b", [...seq(70), ...seq(50, 5000)]);
  const slotB = await admit(kv, b, 64);
  return { runner, kv, b, slotB };
}

/** A's 148 tokens finish (with a tier), then B, sharing A's first 48, runs to 108 tokens. */
async function finishedThenCommonPrefix(runner: FakeModelRunner, spillFirst: boolean) {
  const tiers = new KvTierStore({ cpuBytes: 1 << 20, diskBytes: 0, diskDir: null, blockSizeTokens: 16 });
  const kv = new KvSlots(runner, tiers, 16);
  const a = fakeRequest("a", [...COMMON, ...seq(100, 300)]);
  await admit(kv, a, 0);
  await compute(runner, kv, a, 148);
  release(kv, a);
  if (spillFirst) await kv.spillCache();
  const b = fakeRequest("b", [...COMMON, ...seq(60, 600)]);
  await admit(kv, b, 48);
  await compute(runner, kv, b, 108);
  return { kv, b };
}

describe("KvSlots", () => {
  test("admission shares the longest common block prefix of a running sequence", async () => {
    const { runner, kv, b, slotB } = await runningThenCommonPrefix("unified");
    assert.equal(slotB.length, 64);
    assert.equal(kv.stats.sharedTokens, 64);
    assert.equal(kv.ledger.numUsed, 100);
    assert.equal(runner.usedCells, 100);
    await compute(runner, kv, b, 120);
    assert.equal(runner.usedCells, 156);
    assert.equal(kv.ledger.numUsed, runner.usedCells);
  });

  test("a finished sequence is taken over by the next turn; when the pool is short, cache goes first", async () => {
    const runner = new FakeModelRunner({ kvCells: 256, maxSeqs: 3 });
    const kv = new KvSlots(runner, null, 16);
    const turn1 = fakeRequest("t1", seq(90));
    const s1 = await admit(kv, turn1, 0);
    await compute(runner, kv, turn1, 90);
    release(kv, turn1);
    assert.equal(s1.owner, null);
    assert.equal(kv.numResident, 1);
    const turn2 = fakeRequest("t2", [...seq(90), ...seq(30, 9000)]);
    const s2 = await admit(kv, turn2, 80);
    assert.equal(s2, s1, "taken over: less than a block beyond the hit");
    assert.equal(s2.length, 90, "with the 10 positions past the hit, which hold turn 2's tokens too");
    assert.equal(kv.stats.takenOverTokens, 90);
    await compute(runner, kv, turn2, 120);
    release(kv, turn2);
    // an unrelated request needing most of the pool evicts the cached sequence
    const other = fakeRequest("o", seq(200, 20000));
    await admit(kv, other, 0);
    await compute(runner, kv, other, 200);
    assert.equal(kv.stats.evictions, 1);
    assert.equal(kv.ledger.numUsed, 200);
    assert.equal(runner.usedCells, 200);
  });

  test("an evicted sequence goes to the tier and is restored, sharing what is still resident", async () => {
    const runner = new FakeModelRunner({ kvCells: 256, maxSeqs: 3 });
    const { kv, b } = await finishedThenCommonPrefix(runner, false);
    // b keeps running; a's sequence is pushed out for cells
    assert.ok(await kv.ensureFree(140, [], true));
    assert.equal(kv.stats.savedToTier, 1);
    release(kv, b);
    const a2 = fakeRequest("a2", [...COMMON, ...seq(100, 300), ...seq(10, 50)]);
    const slot = await admit(kv, a2, 144);
    assert.equal(slot.length, 148, "the hit's 144, and the 4 saved positions past it that a2 goes on from");
    assert.equal(kv.stats.restoredTokens, 100);
    assert.equal(kv.ledger.numUsed, runner.usedCells);
    await compute(runner, kv, a2, 158);
    assert.equal(kv.ledger.numUsed, runner.usedCells);
  });
  /** A 90-token turn computed and finished without a pin, then a spill pass. */
  async function finishedTurnThenSpill(tiers: KvTierStore | null) {
    const runner = new FakeModelRunner({ kvCells: 256, maxSeqs: 3 });
    const kv = new KvSlots(runner, tiers, 16);
    const turn1 = fakeRequest("t1", seq(90));
    await admit(kv, turn1, 0);
    await compute(runner, kv, turn1, 90);
    release(kv, turn1);
    await kv.spillCache();
    return { runner, kv };
  }

  test("with a tier, finished unpinned sequences leave the pool and come back from the tier", async () => {
    const tiers = new KvTierStore({ cpuBytes: 1 << 20, diskBytes: 0, diskDir: null, blockSizeTokens: 16 });
    const { runner, kv } = await finishedTurnThenSpill(tiers);
    assert.equal(runner.usedCells, 0, "cache KV does not stay in the pool");
    assert.equal(kv.numResident, 0);
    assert.equal(tiers.usage.entries, 1);
    const turn2 = fakeRequest("t2", [...seq(90), ...seq(30, 9000)]);
    const slot = await admit(kv, turn2, 80);
    assert.equal(slot.length, 90, "the whole saved turn, which turn 2 goes on from");
    assert.equal(kv.stats.restoredTokens, 90);
    assert.equal(kv.stats.recomputedTokens, 0);
  });

  test("a program's next saved turn reuses the memory of the state it supersedes", async () => {
    const tiers = new KvTierStore({ cpuBytes: 1 << 20, diskBytes: 0, diskDir: null, blockSizeTokens: 16 });
    const { runner, kv } = await finishedTurnThenSpill(tiers);
    let context = seq(90);
    for (let turn = 2; turn <= 4; turn++) {
      context = [...context, ...seq(16, 9000 + 100 * turn)];
      const request = fakeRequest(`t${turn}`, context);
      await admit(kv, request, context.length - 16);
      await compute(runner, kv, request, context.length);
      release(kv, request);
      await kv.spillCache();
    }
    assert.equal(tiers.usage.entries, 1, "each turn's state superseded the one before");
    assert.equal(kv.stats.savedToTier, 4);
    assert.deepEqual(
      { allocated: tiers.buffers.allocated, reused: tiers.buffers.reused },
      { allocated: 2, reused: 2 },
    );
  });

  test("a program's saved turn supersedes its older state even where the two part", async () => {
    const tiers = new KvTierStore({ cpuBytes: 1 << 20, diskBytes: 0, diskDir: null, blockSizeTokens: 16 });
    const runner = new FakeModelRunner({ kvCells: 256, maxSeqs: 3 });
    const kv = new KvSlots(runner, tiers, 16);
    const finishTurn = async (request: Request, known: number) => {
      await admit(kv, request, known);
      await compute(runner, kv, request, (request.content as TokenIdContent).length);
      release(kv, request);
      await kv.spillCache();
    };
    await finishTurn(fakeRequest("p1", seq(90), "p"), 0);
    await finishTurn(fakeRequest("q1", seq(40, 3000), "q"), 0);
    // the client elided an old tool output: p's history parts from its saved state after 48 tokens
    const elided = [...seq(48), ...seq(50, 6000)];
    await finishTurn(fakeRequest("p2", elided, "p"), 48);
    assert.equal(kv.stats.restoredTokens, 48);
    assert.equal(tiers.usage.entries, 2, "p's older state went, q's stayed");
    assert.equal(tiers.buffers.reused, 1, "p's new state went into the memory of its old one");
    const p3 = fakeRequest("p3", [...elided, ...seq(20, 8000)], "p");
    assert.equal((await admit(kv, p3, 96)).length, 98, "p's next turn finds its whole history in the tier");
  });

  test("without a tier, cache KV stays resident as the prefix cache", async () => {
    const { runner } = await finishedTurnThenSpill(null);
    assert.equal(runner.usedCells, 90);
  });

  /** Program p's 90-token turn ends pinned, then another program's turn is admitted and computed. */
  async function pinnedTurnThenOther(runningOnly: boolean) {
    const runner = new FakeModelRunner({ kvCells: 256, maxSeqs: 3 });
    const tiers = new KvTierStore({ cpuBytes: 1 << 20, diskBytes: 0, diskDir: null, blockSizeTokens: 16 });
    const kv = new KvSlots(runner, tiers, 16, null, { runningOnly });
    const turn1 = fakeRequest("t1", seq(90));
    await admit(kv, turn1, 0);
    await compute(runner, kv, turn1, 90);
    (turn1 as { status: string }).status = "finished";
    kv.apply({ pinned: [{ requestId: "t1", programId: "p", tokens: 90, expiresS: 10 }], released: [] });
    const other = fakeRequest("o", seq(40, 5000));
    await admit(kv, other, 0);
    const usedBeside = runner.usedCells;
    await compute(runner, kv, other, 40);
    release(kv, other);
    return { runner, kv, usedBeside };
  }

  test("running-only: pinned KV waits in the RAM tier, the emptied pool starts afresh, the program's next turn restores it", async () => {
    const { runner, kv, usedBeside } = await pinnedTurnThenOther(true);
    assert.equal(usedBeside, 0, "the other program computes in a pool holding nothing else");
    assert.equal(
      runner.poolClears,
      2,
      "each admission into an emptied pool: the first turn's and the other's",
    );
    assert.equal(kv.stats.pinnedEvictions, 0, "the pinned KV was saved, not dropped");
    const turn2 = fakeRequest("t2", [...seq(90), ...seq(30, 9000)]);
    const slot = await admit(kv, turn2, 80);
    assert.equal(slot.length, 90);
    assert.equal(kv.stats.restoredTokens, 90);
    assert.equal(kv.stats.recomputedTokens, 0);
    assert.equal(runner.usedCells, 90, "the other program's finished turn left for the tier");
    assert.equal(kv.ledger.numUsed, runner.usedCells);
  });

  test("streams: admission copies the common prefix of a running sequence into its own stream", async () => {
    const { runner, kv, b, slotB } = await runningThenCommonPrefix("streams");
    assert.equal(slotB.length, 64);
    assert.equal(kv.stats.copiedTokens, 64);
    assert.equal(kv.stats.sharedTokens, 0);
    assert.equal(kv.stats.recomputedTokens, 0);
    assert.equal(runner.usedCells, 164, "the copy holds its own cells");
    await compute(runner, kv, b, 120);
    assert.equal(runner.seqLength(slotB.seqId), 120);
    assert.equal(kv.ledger.numUsed, runner.usedCells);
  });

  test("streams: a restore beside a resident slot holding part of the prefix keeps its whole copy", async () => {
    const runner = new FakeModelRunner({ kvCells: 4 * 256, maxSeqs: 4, kvLayout: "streams" });
    const { kv } = await finishedThenCommonPrefix(runner, true);
    const a2 = fakeRequest("a2", [...COMMON, ...seq(100, 300), ...seq(10, 50)]);
    const slot = await admit(kv, a2, 144);
    assert.equal(slot.length, 148);
    assert.equal(kv.stats.restoredTokens, 48 + 148, "b's prefix, then a2's whole saved sequence");
    assert.equal(kv.stats.sharedTokens, 0);
    assert.equal(kv.ledger.numUsed, runner.usedCells);
    await compute(runner, kv, a2, 158);
    assert.equal(kv.ledger.numUsed, runner.usedCells);
  });

  test("by default pinned KV stays resident beside the running sequences", async () => {
    const { runner, kv, usedBeside } = await pinnedTurnThenOther(false);
    assert.equal(usedBeside, 90);
    assert.equal(runner.poolClears, 0);
    assert.equal(kv.stats.savedToTier, 0);
  });
});

describe("KvSlots follows the scheduler's pool", () => {
  /** A 90-token turn finished (cache), and a 40-token turn of program q pinned. */
  async function cacheAndPin(tiers: KvTierStore | null) {
    const runner = new FakeModelRunner({ kvCells: 256, maxSeqs: 4 });
    const pool = new PoolFollower();
    const kv = new KvSlots(runner, tiers, 16, null, { runningOnly: false, pool });
    const cached = fakeRequest("c", seq(90));
    await admit(kv, cached, 0);
    await compute(runner, kv, cached, 90);
    release(kv, cached);
    const pinned = fakeRequest("p", seq(40, 4000), "q");
    await admit(kv, pinned, 0);
    await compute(runner, kv, pinned, 40);
    (pinned as { status: string }).status = "finished";
    kv.apply({ pinned: [{ requestId: "p", programId: "q", tokens: 40, expiresS: 10 }], released: [] });
    const hash = (r: Request, block: number) => (r.content as TokenIdContent).blockHash(block);
    return { runner, pool, kv, cached, pinned, hash };
  }

  test("a block the pool hands to new content is cut from the cache slots holding it, with every later one", async () => {
    const { runner, pool, kv, cached, pinned, hash } = await cacheAndPin(null);
    const slot = kv.slots.find((s) => s.requestId === "c");
    assert.ok(slot);
    pool.blocksRemoved([hash(cached, 3), hash(pinned, 0)]);
    assert.equal(slot.length, 90, "nothing changes before the engine's next step");
    await kv.followPool();
    assert.equal(slot.length, 48, "blocks 3.. and the partial tail are gone");
    assert.equal(
      kv.slots.find((s) => s.pinnedFor === "q")?.length,
      40,
      "a pin's KV goes only with its release",
    );
    assert.deepEqual([kv.stats.poolCuts, kv.stats.evictions], [1, 0]);
    // a turn sharing the first blocks still finds them, by hash
    const next = fakeRequest("n", [...seq(48), ...seq(20, 7000)]);
    assert.equal((await admit(kv, next, 48)).length, 48);
    release(kv, next);
    pool.blocksRemoved([hash(cached, 0)]);
    await kv.followPool();
    assert.equal(kv.numResident, 1, "the taken-over slot went with its first block; the pinned one stays");
    assert.deepEqual([kv.stats.poolCuts, kv.stats.evictions, kv.stats.fallbackEvictions], [2, 1, 0]);
    assert.equal(kv.ledger.numUsed, runner.usedCells);
    assert.equal(runner.usedCells, 40);
  });

  test("with a tier, a cut cache slot is saved whole first", async () => {
    const tiers = new KvTierStore({ cpuBytes: 1 << 20, diskBytes: 0, diskDir: null, blockSizeTokens: 16 });
    const { runner, pool, kv, cached, hash } = await cacheAndPin(tiers);
    pool.blocksRemoved([hash(cached, 4)]);
    await kv.followPool();
    assert.equal(kv.stats.savedToTier, 1);
    assert.equal(runner.usedCells, 40, "only the pinned KV is left in the pool");
    const next = fakeRequest("n", [...seq(90), ...seq(20, 7000)]);
    assert.equal((await admit(kv, next, 80)).length, 90);
    assert.equal(kv.stats.restoredTokens, 90);
  });

  test("the one exception: llama.cpp runs out of sequence slots or of cells where the pool freed nothing", async () => {
    // sequence slots: the pool knows none, so a third sequence in two slots takes the LRU resident one
    const twoSlots = new FakeModelRunner({ kvCells: 256, maxSeqs: 2 });
    const kv2 = new KvSlots(twoSlots, null, 16, null, { runningOnly: false, pool: new PoolFollower() });
    const first = fakeRequest("a", seq(40));
    await admit(kv2, first, 0);
    await compute(twoSlots, kv2, first, 40);
    release(kv2, first);
    await admit(kv2, fakeRequest("b", seq(20, 3000)), 0);
    assert.equal(kv2.stats.fallbackEvictions, 0);
    await admit(kv2, fakeRequest("c", seq(20, 6000)), 0);
    assert.equal(kv2.stats.fallbackEvictions, 1);
    assert.equal(kv2.numResident, 0);
    // cells: two requests computed the same prefix side by side; the pool caches it once, llama holds it twice
    const runner = new FakeModelRunner({ kvCells: 256, maxSeqs: 4 });
    const kv = new KvSlots(runner, null, 16, null, { runningOnly: false, pool: new PoolFollower() });
    const twins = [fakeRequest("t1", seq(96)), fakeRequest("t2", seq(96))];
    for (const twin of twins) await admit(kv, twin, 0);
    for (const twin of twins) await compute(runner, kv, twin, 96);
    for (const twin of twins) release(kv, twin);
    await kv.followPool();
    const other = fakeRequest("o", seq(160, 9000));
    await admit(kv, other, 0);
    await compute(runner, kv, other, 160);
    assert.equal(kv.stats.fallbackEvictions, 1, "the duplicate copy went without a word from the pool");
    assert.equal(kv.stats.poolCuts, 0);
    assert.equal(kv.ledger.numUsed, runner.usedCells);
  });
});

test("an engine's cached KV goes block by block as its scheduler's pool reuses the blocks, and what is left is still hit", async () => {
  const runner = new FakeModelRunner({ kvCells: 640, maxSeqs: 8 });
  const engine = new Engine({ runner, policy: "vllm", maxNumSeqs: 3 });
  const sampling = { maxTokens: 8, ignoreEos: true };
  try {
    const first = "a".repeat(300);
    await run(engine, generateRequest("r1", first, { sampling }));
    // 39 blocks in the pool: an unrelated 400-token prompt takes some of r1's cached blocks, its last first
    await run(engine, generateRequest("r2", "b".repeat(400), { sampling }));
    const kv = engine.kvStats();
    assert.ok(kv.poolCuts > 0, JSON.stringify(kv));
    assert.equal(kv.fallbackEvictions, 0);
    assert.equal(engine.kv.ledger.numUsed, runner.usedCells);
    const third = await run(engine, generateRequest("r3", `${first.slice(0, 100)}c`, { sampling }));
    assert.ok(third.done.usage.cachedTokens >= 96, `${third.done.usage.cachedTokens}`);
    assert.equal(engine.kvStats().recomputedTokens, 0);
  } finally {
    await engine.shutdown();
  }
});

test("the pool follower passes every event on and forgets a removal the pool caches again", () => {
  const heard: string[] = [];
  const follower = new PoolFollower({
    needsTokenIds: true,
    blocksStored: (s) => heard.push(`stored ${s.hashes.join(",")}`),
    blocksRemoved: (hashes) => heard.push(`removed ${hashes.join(",")}`),
  });
  follower.blocksRemoved([1, 2, 3]);
  follower.blocksStored({ hashes: [2], parentHash: 1, tokenIds: [], blockSizeTokens: 16 });
  assert.deepEqual(follower.take(), [1, 3]);
  assert.deepEqual(follower.take(), []);
  assert.deepEqual(heard, ["removed 1,2,3", "stored 2"]);
  assert.equal(follower.needsTokenIds, true, "it asks for tokens only for a publisher that needs them");
  assert.equal(new PoolFollower().needsTokenIds, false);
});

describe("KvSlots keeps what a taken-over slot holds of the next turn past the matched blocks", () => {
  test("up to the first token that differs, never the turn's last token, and nothing past a match of no blocks", async () => {
    const cases: [string, number[], number, number][] = [
      ["differs at 85", [...seq(85), 1, ...seq(30, 9000)], 80, 85],
      ["ends at 88", seq(88), 80, 87],
      ["no matched block", [...seq(90), ...seq(30, 9000)], 0, 0],
    ];
    for (const [name, tokens, hit, held] of cases) {
      const runner = new FakeModelRunner({ kvCells: 256, maxSeqs: 3 });
      const kv = new KvSlots(runner, null, 16);
      const turn1 = fakeRequest("t1", seq(90));
      await admit(kv, turn1, 0);
      await compute(runner, kv, turn1, 90);
      release(kv, turn1);
      const turn2 = fakeRequest("t2", tokens);
      const { slot, recomputedTokens } = await kv.admit(turn2, hit);
      assert.deepEqual([slot.length, recomputedTokens], [held, 0], name);
    }
  });
});

describe("KvSlots with a sliding-window model (llama.cpp keeps only each sequence's last window)", () => {
  test("a prefix is not taken from a longer slot, and a slot cut back at all empties", async () => {
    const runner = new FakeModelRunner({ kvCells: 512, maxSeqs: 4, slidingWindow: 8 });
    const kv = new KvSlots(runner, null, 16);
    const a = fakeRequest("a", seq(100));
    await admit(kv, a, 0);
    await compute(runner, kv, a, 100);
    const b = fakeRequest("b", [...seq(70), ...seq(50, 5000)]);
    const shared = await kv.admit(b, 64);
    assert.deepEqual([shared.slot.length, shared.recomputedTokens], [0, 64], "B computes its prefix again");
    assert.equal(kv.stats.sharedTokens, 0);
    assert.equal(shared.checkpointAt, 64, "kept once computed (below)");

    const slotA = kv.slotOf(a)!;
    kv.truncate(slotA, 100);
    assert.equal(slotA.length, 100, "no cut: its end has the window before it");
    // position 99 attends back to 92 (window 8); llama.cpp frees 92 once position 100 no longer attends to it
    kv.truncate(slotA, 99);
    assert.equal(slotA.length, 0, "one back: the window before it may be gone");
  });

  for (const kvLayout of ["unified", "streams"] as const)
    test(`a recomputed prefix is kept as a checkpoint (${kvLayout}): later requests copy it, none takes it over`, async () => {
      const runner = new FakeModelRunner({ kvCells: 1024, maxSeqs: 4, kvLayout, slidingWindow: 8 });
      const kv = new KvSlots(runner, null, 16);
      const a = fakeRequest("a", seq(100));
      await admit(kv, a, 0);
      await compute(runner, kv, a, 100);
      const b = fakeRequest("b", [...seq(70), ...seq(50, 5000)]);
      const second = await kv.admit(b, 64);
      assert.deepEqual([second.slot.length, second.recomputedTokens, second.checkpointAt], [0, 64, 64]);
      assert.equal(await kv.checkpoint(b, 64), false, "only once the slot ends there");
      await compute(runner, kv, b, 64);
      assert.equal(await kv.checkpoint(b, 64), true);
      assert.equal(await kv.checkpoint(b, 64), false, "one checkpoint per prefix");
      assert.equal(kv.stats.checkpointTokens, 64);
      await compute(runner, kv, b, 120);
      release(kv, b);

      for (const id of ["c", "d"]) {
        const next = fakeRequest(id, [...seq(64), ...seq(30, 9000)]);
        const { slot, recomputedTokens, checkpointAt } = await kv.admit(next, 64);
        assert.deepEqual([slot.length, recomputedTokens, checkpointAt], [64, 0, undefined], id);
        assert.ok(!slot.holdsPrefix, `${id} runs in a slot of its own`);
        await compute(runner, kv, next, 94);
        release(kv, next);
      }
      assert.equal(kv.stats.copiedTokens, 128);
    });
});
