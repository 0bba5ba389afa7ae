import assert from "node:assert/strict";
import { hostname } from "node:os";
import { describe, test } from "node:test";
import { encode } from "@msgpack/msgpack";
import { decodeMessage, KvEventSubscriber, requestReplay } from "../test-support/kv-event-subscriber.js";
import { KvEventPublisher } from "./kv-event-publisher.js";
import {
  ALL_BLOCKS_CLEARED,
  bindsEndpoint,
  blockRemoved,
  blockStored,
  defaultKvEventsTopic,
  encodeEventBatch,
  kvEventsPodProblem,
  sequenceFrame,
} from "./kv-event-wire.js";

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

  // vLLM from PR #42892 (0.26): msgspec structs without array_like, so each event is a map of its fields in
  // their declared order, the tag first under "type"; BlockStored's fields that have a default (extra_keys,
  // group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window) are left out at that default (omit_defaults),
  // lora_id, medium and lora_name have none and are always written
  test("the map layout is msgspec's encoding of vLLM's tagged structs, byte for byte", () => {
    const payload = encodeEventBatch(
      1.5,
      [
        blockStored({ hashes: [1, 2 ** 40], parentHash: null, tokenIds: [7, 8], blockSizeTokens: 1 }),
        blockRemoved([3]),
        ALL_BLOCKS_CLEARED,
      ],
      2,
      "map",
    );
    const expected = [
      "93", // the batch stays [ts, events, rank]
      "cb3ff8000000000000", // 1.5 as float64
      "93", // three events
      "88", // BlockStored: a map of 8 entries
      `a4${ascii("type")}ab${ascii("BlockStored")}`,
      `ac${ascii("block_hashes")}9201cf0000010000000000`,
      `b1${ascii("parent_block_hash")}c0`,
      `a9${ascii("token_ids")}920708`,
      `aa${ascii("block_size")}01`,
      `a7${ascii("lora_id")}c0`,
      `a6${ascii("medium")}a3${ascii("GPU")}`,
      `a9${ascii("lora_name")}c0`,
      "83", // BlockRemoved: 3 entries
      `a4${ascii("type")}ac${ascii("BlockRemoved")}`,
      `ac${ascii("block_hashes")}9103`,
      `a6${ascii("medium")}a3${ascii("GPU")}`,
      `81a4${ascii("type")}b0${ascii("AllBlocksCleared")}`,
      "02", // data_parallel_rank 2
    ].join("");
    assert.equal(Buffer.from(payload).toString("hex"), expected);
    const decoded = decodeMessage([Buffer.from("kv@p@m"), sequenceFrame(0), Buffer.from(payload)]);
    assert.deepEqual(
      decoded.events.map((e) => e.type),
      ["BlockStored", "BlockRemoved", "AllBlocksCleared"],
    );
    assert.equal(decoded.dataParallelRank, 2);
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

  test("the default topic is llm-d's kv@<pod>@<model>, the pod given, else $POD_IP, else the host name", () => {
    assert.equal(defaultKvEventsTopic("llama-3.1-8b", { POD_IP: "10.0.0.7" }), "kv@10.0.0.7@llama-3.1-8b");
    assert.equal(defaultKvEventsTopic("m", {}), `kv@${hostname()}@m`);
    assert.equal(defaultKvEventsTopic("m", { POD_IP: "10.0.0.7" }, "gpu-host-r2"), "kv@gpu-host-r2@m");
    assert.equal(kvEventsPodProblem("gpu-host-r2"), null);
    assert.match(kvEventsPodProblem("a@b") ?? "", /@/);
    assert.match(kvEventsPodProblem("") ?? "", /empty/);
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
    const unknown = Buffer.from(encode([1.5, [["Unknown"]], 0]));
    assert.throws(
      () => decodeMessage([Buffer.from("kv@p@m"), sequenceFrame(0), unknown]),
      /unknown vLLM event tag/,
    );
  });

  test("a replay socket resends the kept batches from a sequence on, with the topic, then -1 (vLLM's framing)", async () => {
    const publisher = await KvEventPublisher.open({
      endpoint: "tcp://127.0.0.1:*",
      topic: "kv@pod-b@m",
      replayEndpoint: "tcp://127.0.0.1:*",
      bufferSteps: 3,
      dataParallelRank: 1,
      format: "map",
    });
    try {
      assert.ok(publisher.replayEndpoint?.startsWith("tcp://127.0.0.1:"));
      for (let i = 0; i < 5; i++) {
        publisher.blocksStored({ hashes: [100 + i], parentHash: null, tokenIds: [i, i], blockSizeTokens: 2 });
        await new Promise((resolve) => setTimeout(resolve, 0));
      }
      // no subscriber saw these five batches: a late one asks for them
      const all = await requestReplay(publisher.replayEndpoint ?? "", 0n);
      assert.deepEqual(
        all.map((b) => b.sequence),
        [2n, 3n, 4n],
        "the last 3 (buffer steps) of 5",
      );
      for (const batch of all) {
        assert.deepEqual([batch.topic, batch.podId, batch.dataParallelRank], ["kv@pod-b@m", "pod-b", 1]);
      }
      assert.deepEqual(
        all.flatMap((b) => b.events.map((e) => (e.type === "BlockStored" ? e.blockHashes[0] : null))),
        [102n, 103n, 104n],
      );
      const tail = await requestReplay(publisher.replayEndpoint ?? "", 4n);
      assert.deepEqual(
        tail.map((b) => b.sequence),
        [4n],
      );
      assert.deepEqual(await requestReplay(publisher.replayEndpoint ?? "", 5n), [], "nothing past the last");
    } finally {
      await publisher.close();
    }
  });

  test("a replay endpoint that cannot be bound names its flag, and the PUB socket is closed again", async () => {
    await assert.rejects(
      KvEventPublisher.open({
        endpoint: "tcp://127.0.0.1:*",
        topic: "t",
        replayEndpoint: "tcp://*:not-a-port",
      }),
      /--kv-events-replay-endpoint tcp:\/\/\*:not-a-port/,
    );
  });
});
