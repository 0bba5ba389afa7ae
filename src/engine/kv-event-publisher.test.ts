import assert from "node:assert/strict";
import { hostname } from "node:os";
import { describe, test } from "node:test";
import { KvEventPublisher } from "./kv-event-publisher.js";
import {
  ALL_BLOCKS_CLEARED,
  bindsEndpoint,
  blockRemoved,
  blockStored,
  defaultKvEventsTopic,
  encodeEventBatch,
  sequenceFrame,
} from "./kv-event-wire.js";
import { decodeMessage, KvEventSubscriber } from "./test-support/kv-event-subscriber.js";

const ascii = (text: string) => Buffer.from(text, "ascii").toString("hex");

describe("vLLM's KV event wire format", () => {
  // the expected bytes are what msgspec (0.22) encodes for vLLM's array_like structs with these values
  test("a batch is msgspec's array_like encoding of [ts, events, data_parallel_rank], byte for byte", () => {
    const payload = encodeEventBatch(
      1.5,
      [
        blockStored({ hashes: [1, 2 ** 40], parentHash: null, tokenIds: [7, 8], blockSizeTokens: 1 }),
        blockRemoved([3]),
        ALL_BLOCKS_CLEARED,
      ],
      0,
    );
    const expected = [
      "93", // [ts, events, rank]
      "cb3ff8000000000000", // 1.5 as float64
      "93", // three events
      `98ab${ascii("BlockStored")}`, // BlockStored, 8 fields with its tag
      "9201cf0000010000000000", // block_hashes [1, 2^40] (uint64 past 32 bits, as msgspec writes it)
      "c0", // parent_block_hash None
      "920708", // token_ids
      "01", // block_size
      "c0", // lora_id None
      `a3${ascii("GPU")}`, // medium
      "c0", // lora_name None
      `93ac${ascii("BlockRemoved")}9103a3${ascii("GPU")}`, // BlockRemoved [3] GPU
      `91b0${ascii("AllBlocksCleared")}`,
      "00", // data_parallel_rank 0
    ].join("");
    assert.equal(Buffer.from(payload).toString("hex"), expected);
  });

  test("ts is a float64 even when it is a whole number of seconds; prefix hashes (52 bits) are uint64", () => {
    const payload = Buffer.from(encodeEventBatch(1_700_000_000, [blockRemoved([2 ** 52 - 1])]));
    assert.equal(payload.subarray(1, 10).toString("hex"), "cb41d954fc40000000");
    assert.ok(payload.toString("hex").includes("cf000fffffffffffff"));
  });

  test("the sequence frame is 8 bytes big-endian", () => {
    assert.equal(sequenceFrame(0).toString("hex"), "0000000000000000");
    assert.equal(sequenceFrame(258).toString("hex"), "0000000000000102");
  });

  test("endpoints with a wildcard or a local transport are bound, others connected to (vLLM's rule)", () => {
    assert.equal(bindsEndpoint("tcp://*:5557"), true);
    assert.equal(bindsEndpoint("tcp://[::]:5557"), true);
    assert.equal(bindsEndpoint("ipc:///tmp/kv"), true);
    assert.equal(bindsEndpoint("tcp://epp.default.svc:5557"), false);
    assert.equal(bindsEndpoint("tcp://127.0.0.1:5557"), false);
  });

  test("the default topic is llm-d's kv@<pod>@<model>, the pod $POD_IP or else the host name", () => {
    assert.equal(defaultKvEventsTopic("llama-3.1-8b", { POD_IP: "10.0.0.7" }), "kv@10.0.0.7@llama-3.1-8b");
    assert.equal(defaultKvEventsTopic("m", {}), `kv@${hostname()}@m`);
  });
});

describe("KvEventPublisher", () => {
  test("publishes one batch per loop turn, numbered from 0, and AllBlocksCleared when it closes", async () => {
    const publisher = await KvEventPublisher.open({ endpoint: "tcp://127.0.0.1:*", topic: "kv@pod-a@m" });
    const subscriber = KvEventSubscriber.connect(publisher.endpoint);
    try {
      await subscriber.joined();
      publisher.blocksStored({
        hashes: [11, 12],
        parentHash: null,
        tokenIds: [1, 2, 3, 4],
        blockSizeTokens: 2,
      });
      publisher.blocksStored({ hashes: [13], parentHash: 12, tokenIds: [5, 6], blockSizeTokens: 2 });
      await new Promise((resolve) => setTimeout(resolve, 0));
      publisher.blocksRemoved([12, 13]);
      assert.ok(await subscriber.until(() => subscriber.batches.length === 2));
      assert.deepEqual([...subscriber.blocks], [11n]);
      const [first, second] = subscriber.batches;
      assert.deepEqual(
        [first?.sequence, first?.podId, first?.modelName, first?.dataParallelRank],
        [0n, "pod-a", "m", 0],
      );
      assert.ok(Math.abs((first?.ts ?? 0) - Date.now() / 1000) < 60);
      assert.deepEqual(first?.events, [
        {
          type: "BlockStored",
          blockHashes: [11n, 12n],
          parentHash: 0n,
          tokenIds: [1, 2, 3, 4],
          blockSize: 2,
          loraId: null,
          deviceTier: "gpu",
        },
        {
          type: "BlockStored",
          blockHashes: [13n],
          parentHash: 12n,
          tokenIds: [5, 6],
          blockSize: 2,
          loraId: null,
          deviceTier: "gpu",
        },
      ]);
      assert.equal(second?.sequence, 1n);
      assert.deepEqual(second?.events, [
        { type: "BlockRemoved", blockHashes: [12n, 13n], deviceTier: "gpu" },
      ]);

      await publisher.close();
      assert.ok(await subscriber.until(() => subscriber.batches.length === 3));
      assert.deepEqual(subscriber.batches[2]?.events, [{ type: "AllBlocksCleared" }]);
      assert.equal(subscriber.blocks.size, 0);
    } finally {
      await publisher.close();
      await subscriber.close();
    }
  });

  test("a bind that fails names the flag", async () => {
    await assert.rejects(
      KvEventPublisher.open({ endpoint: "tcp://*:not-a-port", topic: "t" }),
      /--kv-events-endpoint tcp:\/\/\*:not-a-port/,
    );
  });

  test("the subscriber rejects what llm-d rejects: not three frames, a short sequence, an unknown tag", () => {
    const payload = Buffer.from(encodeEventBatch(1, [ALL_BLOCKS_CLEARED]));
    assert.throws(() => decodeMessage([Buffer.from("kv@p@m"), payload]));
    assert.throws(() => decodeMessage([Buffer.from("kv@p@m"), Buffer.alloc(4), payload]));
    const unknown = Buffer.from(encodeEventBatch(1, [["Unknown"] as unknown as typeof ALL_BLOCKS_CLEARED]));
    assert.throws(
      () => decodeMessage([Buffer.from("kv@p@m"), sequenceFrame(0), unknown]),
      /unknown vLLM event tag/,
    );
  });
});
