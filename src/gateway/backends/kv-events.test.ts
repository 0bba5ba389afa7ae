import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { encode } from "@msgpack/msgpack";
import { BackendKvIndex } from "./backend-kv-index.js";
import { decodeBatch, type KvEventBatch } from "./kv-event-decode.js";

/** A message as vLLM's ZMQ publisher writes it: [topic, big-endian sequence, msgpack [ts, events, rank]]. */
function message(sequence: number, events: unknown[]): Uint8Array[] {
  const seq = Buffer.alloc(8);
  seq.writeBigUInt64BE(BigInt(sequence));
  return [Buffer.from("kv@pod@model"), seq, encode([1.5, events, 0])];
}

function stored(hashes: number[], parent: number | null): unknown[] {
  return ["BlockStored", hashes, parent, [], 16, null, "GPU", null];
}

function batch(sequence: number, events: unknown[]): KvEventBatch {
  return decodeBatch(message(sequence, events));
}

describe("vLLM KV events decoded", () => {
  it("reads array events (msgspec array_like) and tagged maps (vLLM PR #42892), hashes as integers or bytes", () => {
    const decoded = batch(7, [
      stored([1, 2], null),
      {
        type: "BlockStored",
        block_hashes: [Uint8Array.of(0xab, 0xcd)],
        parent_block_hash: 2,
        token_ids: [],
        block_size: 16,
      },
      ["BlockRemoved", [1], "GPU"],
      ["AllBlocksCleared"],
      ["SomethingNewer", 1, 2],
    ]);
    assert.equal(decoded.sequence, 7n);
    assert.deepEqual(
      decoded.events.map((e) => e.type),
      ["stored", "stored", "removed", "cleared"],
      "unknown events are skipped",
    );
    const second = decoded.events[1];
    assert.ok(second?.type === "stored");
    assert.deepEqual(second.hashes, ["abcd"]);
    assert.equal(second.parent, "2");
    assert.equal(second.medium, "GPU", "no medium: the GPU pool");
  });

  it("refuses a message that is not three frames", () => {
    assert.throws(() => decodeBatch([Buffer.from("kv")]), /3 frames/);
  });
});

describe("a backend's KV, followed from its events", () => {
  it("counts resident GPU blocks, ignores other mediums, and counts missed batches", () => {
    const index = new BackendKvIndex(16, 1000);
    index.apply(
      batch(0, [stored([1, 2, 3], null), ["BlockStored", [9], null, [], 16, null, "CPU", null]]),
      0,
    );
    assert.equal(index.residentBlocks, 3);
    index.apply(batch(3, [["BlockRemoved", [2], "GPU"]]), 1);
    assert.equal(index.residentBlocks, 2);
    assert.equal(index.stats.missedBatches, 2, "batches 1 and 2 never came");
    index.apply(batch(4, [["AllBlocksCleared"]]), 2);
    assert.equal(index.residentBlocks, 0);
  });

  it("finds a turn's chain: its last run as deep as its KV, through the program's previous chain where several are", () => {
    const index = new BackendKvIndex(16, 1000);
    // turn 1 of program P: 40 KV tokens, prefill run of 2 blocks, then one output block
    index.apply(batch(0, [stored([10, 11], null)]), 100);
    index.apply(batch(1, [stored([12], 11)]), 110);
    // another program's turn meanwhile, as deep
    index.apply(batch(2, [stored([20, 21, 22], null)]), 120);
    assert.equal(index.attribute("P", 90, 130, 3 * 16 + 5), false, "two chains of 3 blocks: undecided");
    assert.equal(index.attribute("Q", 115, 130, 3 * 16), true, "only Q's run started after 115");
    assert.equal(index.residentPrefixTokens("Q"), 48);
    // P's next turn extends its first turn's blocks: found through them, whoever else ran as deep
    index.apply(batch(3, [stored([10, 11], null)]), 200);
    assert.equal(index.attribute("P", 195, 205, 2 * 16), true);
    index.apply(batch(4, [stored([13, 14], 11), stored([30, 31, 32, 33], null)]), 300);
    assert.equal(
      index.attribute("P", 290, 310, 4 * 16 + 2),
      true,
      "through P's chain, not the other run as deep",
    );
    assert.equal(index.chainTokens("P"), 64);
    index.apply(batch(5, [["BlockRemoved", [13, 14], "GPU"]]), 400);
    assert.equal(index.residentPrefixTokens("P"), 32, "its first two blocks are still held");
  });
});
