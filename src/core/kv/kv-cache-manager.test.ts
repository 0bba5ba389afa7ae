import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Program } from "../program.js";
import { Request } from "../request.js";
import { contentOf, tokenRange } from "../test-support/drive.js";
import { BlockPool } from "./block-pool.js";
import { KvCacheManager } from "./kv-cache-manager.js";
import { OffloadTiers } from "./offload-tiers.js";

const BS = 16;
let seq = 0;

function request(prompt: readonly number[], outputTokens = 1): Request {
  const sequence = [...prompt, ...tokenRange(outputTokens, 900_000 + seq * 100)];
  return new Request(
    {
      requestId: `r${seq}`,
      programId: "p",
      promptTokens: prompt.length,
      maxOutputTokens: outputTokens,
      isLastStep: false,
      content: contentOf(sequence, BS),
    },
    new Program("p", 0),
    0,
    seq++,
  );
}

/** Admits, computes the whole prompt, registers full blocks: what a finished prefill leaves behind. */
function prefill(kv: KvCacheManager, r: Request): void {
  const match = kv.findPrefix(r);
  kv.admit(r, match);
  assert.ok(kv.allocateSlots(r, r.numTokens - r.numComputedTokens));
  r.numComputedTokens = r.numTokens;
  kv.cacheFullBlocks(r);
}

/** 1 byte per token, so a tier of c*16 bytes holds c blocks. */
function manager(numBlocks: number, tierBlocks?: { cpu: number; disk?: number }): KvCacheManager {
  const pool = new BlockPool(numBlocks, BS);
  const tiers = tierBlocks
    ? new OffloadTiers(
        [
          { name: "cpu", capacityBytes: tierBlocks.cpu * BS, reloadBandwidthBps: 1e9 },
          ...(tierBlocks.disk
            ? [{ name: "disk" as const, capacityBytes: tierBlocks.disk * BS, reloadBandwidthBps: 1e8 }]
            : []),
        ],
        BS,
      )
    : null;
  return new KvCacheManager(pool, tiers, 1);
}

describe("KvCacheManager", () => {
  it("a returning turn hits the longest cached prefix of the previous turn", () => {
    const kv = manager(32);
    const turn1 = tokenRange(64, 1000);
    const first = request(turn1);
    prefill(kv, first);
    assert.equal(first.numCachedBlocks, 4);
    const held = first.blockIds.slice();
    kv.freeRequest(first);
    assert.equal(kv.pool.numFreeBlocks, 32);

    const returning = request([...turn1, ...tokenRange(40, 5000)]);
    const match = kv.findPrefix(returning);
    assert.equal(match.gpuTokens, 64);
    assert.deepEqual(match.gpuBlockIds, held);
    // All four hits are free blocks being revived, plus ceil(104/16) - 4 = 3 new ones.
    assert.equal(kv.admissionCostBlocks(match, 104), 4 + 3);

    // A turn that diverges inside block 2 only hits blocks 0 and 1.
    const diverging = request([...turn1.slice(0, 40), ...tokenRange(40, 7000)]);
    assert.equal(kv.findPrefix(diverging).gpuTokens, 32);
    kv.pool.checkInvariants();
  });

  it("never hits the last token: a fully cached prompt still computes its final block", () => {
    const kv = manager(16);
    const prompt = tokenRange(64, 1000);
    const a = request(prompt);
    prefill(kv, a);
    // Same 64-token prompt again: 4 full blocks are cached, but the last token must be computed.
    const b = request(prompt);
    const match = kv.findPrefix(b);
    assert.equal(match.gpuTokens, 48);
    assert.equal(match.gpuBlockIds.length, 3);
    // While `a` still holds its blocks, shared hits cost nothing: only the 4th block is new.
    assert.equal(kv.admissionCostBlocks(match, 64), 1);
    kv.admit(b, match);
    assert.equal(b.numComputedTokens, 48);
    assert.equal(kv.pool.refCount(a.blockIds[0] as number), 2);
    // A 1-token prompt can never hit.
    assert.equal(kv.findPrefix(request([1000])).gpuTokens, 0);
  });

  it("frees tail first: the request's last blocks are reused before its first ones", () => {
    const kv = manager(4);
    const a = request(tokenRange(64, 1000));
    prefill(kv, a);
    const [b0, b1, b2, b3] = a.blockIds;
    kv.freeRequest(a);
    assert.deepEqual(kv.pool.allocate(1), [b3]);
    assert.deepEqual(kv.pool.allocate(1), [b2]);
    // The prefix (blocks 0 and 1) is still cached.
    const again = request(tokenRange(64, 1000));
    assert.deepEqual(kv.findPrefix(again).gpuBlockIds, [b0, b1]);
  });

  it("writes freed blocks through to the CPU tier and reloads them after the GPU copy is gone", () => {
    const kv = manager(8, { cpu: 16 });
    const turn1 = tokenRange(64, 1000);
    const a = request(turn1);
    prefill(kv, a);
    kv.freeRequest(a);
    assert.deepEqual(kv.tiers?.occupancyBlocks(), { cpu: 4 });
    // Something else takes the whole pool: the GPU copies are overwritten.
    const other = kv.pool.allocate(8) as number[];
    kv.freeBlocks(other);

    const returning = request([...turn1, ...tokenRange(20, 5000)]);
    const match = kv.findPrefix(returning);
    assert.equal(match.gpuTokens, 0);
    assert.equal(match.tier, "cpu");
    assert.equal(match.tierTokens, 64);
    kv.admit(returning, match);
    assert.equal(returning.reloadTokens, 64);
    assert.equal(returning.hitTokens, 0);
    assert.equal(returning.numComputedTokens, 64, "reloaded tokens need no compute");
    assert.equal(returning.blockIds.length, 4, "reloaded KV gets fresh GPU blocks");
    assert.equal(returning.numCachedBlocks, 4);
    // Reloaded blocks are in the GPU prefix cache again.
    const third = request([...turn1, ...tokenRange(20, 8000)]);
    assert.equal(kv.findPrefix(third).gpuTokens, 64);
    kv.pool.checkInvariants();
  });

  it("mixes a GPU prefix with a tier continuation", () => {
    const kv = manager(4, { cpu: 16 });
    const turn1 = tokenRange(64, 1000);
    const a = request(turn1);
    prefill(kv, a);
    kv.freeRequest(a);
    kv.freeBlocks(kv.pool.allocate(2) as number[]); // evicts GPU blocks 3 and 2 (tail first)
    const returning = request([...turn1, 1, 2, 3]);
    const match = kv.findPrefix(returning);
    assert.equal(match.gpuTokens, 32);
    assert.equal(match.tier, "cpu");
    assert.equal(match.tierTokens, 32);
  });

  it("LRU eviction cascades CPU -> disk, and a disk hit reloads from disk", () => {
    const kv = manager(4, { cpu: 4, disk: 8 });
    const turnA = tokenRange(64, 1000);
    const turnB = tokenRange(64, 2000);
    const a = request(turnA);
    prefill(kv, a);
    kv.freeRequest(a);
    kv.freeBlocks(kv.pool.allocate(4) as number[]);
    const b = request(turnB);
    prefill(kv, b);
    kv.freeRequest(b);
    // CPU holds 4 blocks: B's; A's four fell to disk.
    assert.deepEqual(kv.tiers?.occupancyBlocks(), { cpu: 4, disk: 4 });
    kv.freeBlocks(kv.pool.allocate(4) as number[]);
    const matchA = kv.findPrefix(request([...turnA, 1]));
    assert.equal(matchA.tier, "disk");
    assert.equal(matchA.tierTokens, 64);
    const matchB = kv.findPrefix(request([...turnB, 1]));
    assert.equal(matchB.tier, "cpu");
    assert.equal(matchB.tierTokens, 64);
    assert.equal(kv.tiers?.reloadBandwidthBps("disk"), 1e8);
  });

  it("a tier reload refreshes LRU order, so the reloaded prefix survives the next eviction", () => {
    const kv = manager(8, { cpu: 8 });
    const turnA = tokenRange(64, 1000);
    const turnB = tokenRange(64, 2000);
    for (const t of [turnA, turnB]) {
      const r = request(t);
      prefill(kv, r);
      kv.freeRequest(r);
    }
    kv.freeBlocks(kv.pool.allocate(8) as number[]);
    // Reload A (older): its hashes move to the MRU end of the CPU tier.
    const reA = request([...turnA, 5]);
    kv.admit(reA, kv.findPrefix(reA));
    kv.freeRequest(reA);
    kv.freeBlocks(kv.pool.allocate(8) as number[]);
    // New content evicts 4 CPU entries: B's (now least recently used), not A's.
    const c = request(tokenRange(64, 3000));
    prefill(kv, c);
    kv.freeRequest(c);
    kv.freeBlocks(kv.pool.allocate(8) as number[]);
    assert.equal(kv.findPrefix(request([...turnA, 1])).tierTokens, 64);
    assert.equal(kv.findPrefix(request([...turnB, 1])).tierTokens, 0);
  });
});

describe("OffloadTiers", () => {
  it("rejects tiers without capacity or bandwidth", () => {
    assert.throws(
      () => new OffloadTiers([{ name: "cpu", capacityBytes: 0, reloadBandwidthBps: 1 }], 16),
      /capacity/,
    );
    assert.throws(
      () => new OffloadTiers([{ name: "cpu", capacityBytes: 16, reloadBandwidthBps: 0 }], 16),
      /bandwidth/,
    );
    const tiers = new OffloadTiers([{ name: "cpu", capacityBytes: 16, reloadBandwidthBps: 1 }], 16);
    assert.throws(() => tiers.reloadBandwidthBps("disk"), /no disk tier/);
  });

  it("finds the longest run held by a single tier, starting with the fastest holding the first block", () => {
    const tiers = new OffloadTiers(
      [
        { name: "cpu", capacityBytes: 2, reloadBandwidthBps: 1 },
        { name: "disk", capacityBytes: 10, reloadBandwidthBps: 1 },
      ],
      1,
    );
    tiers.store([11, 12, 13, 14]); // cpu keeps 13, 14; disk gets 11, 12
    const hashes = [11, 12, 13, 14];
    assert.deepEqual(
      tiers.findPrefix((i) => hashes[i] as number, 0, 4),
      { numBlocks: 2, tier: "disk" },
    );
    assert.deepEqual(
      tiers.findPrefix((i) => hashes[i] as number, 2, 4),
      { numBlocks: 2, tier: "cpu" },
    );
    assert.deepEqual(
      tiers.findPrefix((i) => hashes[i] as number, 4, 4),
      { numBlocks: 0, tier: null },
    );
    tiers.store([15, 16, 17, 18, 19, 20, 21, 22, 23, 24]);
    // Disk overflowed (10 blocks): the oldest (11, 12) are gone for good.
    assert.deepEqual(
      tiers.findPrefix((i) => hashes[i] as number, 0, 4),
      { numBlocks: 0, tier: null },
    );
    assert.deepEqual(tiers.occupancyBlocks(), { cpu: 2, disk: 10 });
  });
});
