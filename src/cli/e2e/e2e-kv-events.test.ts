/**
 * `serve --kv-events-endpoint`: a ZMQ subscriber decoding the batches the way llm-d's kvevents package does
 * rebuilds exactly the block set the scheduler's pool has registered, after agent programs ran several turns
 * at once in a pool small enough to evict; every stored block's hash chains from its parent's over its tokens.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type OpenAI from "openai";
import { hashTokenBlock, ROOT_HASH } from "../../core/kv/prefix-hash.js";
import { defaultKvEventsTopic } from "../../engine/kv/kv-event-wire.js";
import { type DecodedStored, KvEventSubscriber } from "../../engine/test-support/kv-event-subscriber.js";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { startLlamaServer } from "../test-support/llama-server.js";

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;

const PROGRAMS = 6;
const TURNS = 4;

function words(topic: string, n: number): string {
  return Array.from({ length: n }, (_, i) => `${topic}${i % 11} step ${i}`).join(" ");
}

const sortedHashes = (set: Iterable<bigint>) => [...set].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

describe("KV events in vLLM's format (real engine, tiny model)", { skip: llamaSkip }, () => {
  test("the block set rebuilt from the events is the pool's registered set; hashes chain through parents", async () => {
    const { subscriber, endpoint } = await KvEventSubscriber.bind();
    const s = await startLlamaServer([
      "--scheduling-policy",
      "cachettl",
      "--kv-cache-tokens",
      "2048",
      "--max-num-seqs",
      "4",
      "--kv-events-endpoint",
      endpoint,
    ]).catch(async (error: unknown) => {
      await subscriber.close();
      throw error;
    });
    try {
      await subscriber.joined();
      const pool = s.engine.scheduler.kv.pool;
      const registered = () => {
        const hashes = new Set<bigint>();
        for (let b = 0; b < pool.numBlocks; b++) if (pool.hashOf(b) !== 0) hashes.add(BigInt(pool.hashOf(b)));
        return hashes;
      };

      await Promise.all(
        Array.from({ length: PROGRAMS }, async (_, p) => {
          const messages: Message[] = [
            { role: "system", content: `You are agent ${p}. ${words(`sys${p}x`, 60)}` },
            { role: "user", content: words(`task${p}y`, 40) },
          ];
          for (let turn = 0; turn < TURNS; turn++) {
            const response = await s.openai.chat.completions.create(
              { model: s.model, messages, max_tokens: 24, temperature: 0 },
              { headers: { "x-program-id": `agent-${p}`, "x-last-step": String(turn === TURNS - 1) } },
            );
            messages.push({ role: "assistant", content: response.choices[0]!.message.content ?? "" });
            messages.push({ role: "user", content: `Observation ${turn}: ${words(`obs${p}z${turn}`, 12)}` });
          }
        }),
      );

      const same = () => {
        const expected = registered();
        return (
          expected.size === subscriber.blocks.size && [...expected].every((h) => subscriber.blocks.has(h))
        );
      };
      await subscriber.until(same);
      const expected = registered();
      assert.ok(expected.size > 0);
      assert.deepEqual(sortedHashes(subscriber.blocks), sortedHashes(expected));

      const batches = subscriber.batches;
      assert.deepEqual(
        batches.map((b) => b.sequence),
        batches.map((_, i) => BigInt(i)),
        "sequence numbers from 0, none missing",
      );
      const topic = defaultKvEventsTopic(s.model);
      for (const batch of batches) {
        assert.equal(batch.topic, topic);
        assert.equal(batch.modelName, s.model);
        assert.equal(batch.dataParallelRank, 0);
      }
      const events = batches.flatMap((b) => b.events);
      assert.ok(
        events.some((e) => e.type === "BlockRemoved"),
        "the pool evicted cached blocks during the run",
      );

      // Each stored run chains: block k's hash is its tokens hashed after block k-1's (the parent for the first).
      const everStored = new Set<bigint>();
      for (const event of events.filter((e): e is DecodedStored => e.type === "BlockStored")) {
        assert.equal(event.blockSize, 16);
        assert.equal(event.deviceTier, "gpu");
        assert.equal(event.tokenIds.length, event.blockHashes.length * 16);
        if (event.parentHash !== 0n)
          assert.ok(everStored.has(event.parentHash), "the parent was stored before");
        let parent = event.parentHash === 0n ? ROOT_HASH : Number(event.parentHash);
        event.blockHashes.forEach((hash, k) => {
          const computed = hashTokenBlock(parent, event.tokenIds, k * 16, (k + 1) * 16);
          assert.equal(BigInt(computed), hash, "block hash = hash(parent hash, block tokens)");
          parent = computed;
          everStored.add(hash);
        });
      }
    } finally {
      await s.close();
      await subscriber.until(() => subscriber.batches.at(-1)?.events.at(-1)?.type === "AllBlocksCleared");
      await subscriber.close();
    }
    assert.equal(subscriber.blocks.size, 0, "AllBlocksCleared when the server stops");
  });
});
