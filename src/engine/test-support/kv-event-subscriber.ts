/**
 * A KV event subscriber that reads the wire the way llm-d-kv-cache's kvevents package does (its vLLM adapter):
 * three frames [topic, sequence, payload]; the topic split on "@" into `kv`, pod and model; the sequence 8
 * bytes big-endian; the payload a msgpack array [ts, events, data_parallel_rank?], each event an array whose
 * first element is its tag, fields by position, or (vLLM from PR #42892) a map with the tag under "type",
 * fields by name; hashes read as unsigned 64-bit integers. It rebuilds the set of blocks the publisher holds
 * as those events apply them in order. `requestReplay` asks a replay socket for past batches as llm-d-router's
 * replay client does.
 */
import assert from "node:assert/strict";
import { decode } from "@msgpack/msgpack";
import { Dealer, Subscriber } from "zeromq";

export interface DecodedStored {
  readonly type: "BlockStored";
  readonly blockHashes: readonly bigint[];
  /** 0n when the event had none (llm-d's reading of a nil parent) */
  readonly parentHash: bigint;
  readonly tokenIds: readonly number[];
  readonly blockSize: number;
  readonly loraId: number | null;
  /** lower-cased, "gpu" when absent (llm-d's device tier) */
  readonly deviceTier: string;
}
export interface DecodedRemoved {
  readonly type: "BlockRemoved";
  readonly blockHashes: readonly bigint[];
  readonly deviceTier: string;
}
export type DecodedEvent = DecodedStored | DecodedRemoved | { readonly type: "AllBlocksCleared" };

export interface DecodedBatch {
  readonly topic: string;
  readonly podId: string;
  readonly modelName: string;
  readonly sequence: bigint;
  readonly ts: number;
  readonly dataParallelRank: number | null;
  readonly events: readonly DecodedEvent[];
}

function hashOf(raw: unknown): bigint {
  if (typeof raw === "bigint") return BigInt.asUintN(64, raw);
  if (typeof raw === "number" && Number.isInteger(raw)) return BigInt.asUintN(64, BigInt(raw));
  if (raw instanceof Uint8Array && raw.length > 0) {
    const last8 = new Uint8Array(8);
    last8.set(raw.subarray(Math.max(0, raw.length - 8)), Math.max(0, 8 - raw.length));
    return Buffer.from(last8).readBigUInt64BE();
  }
  throw new Error(`unsupported hash: ${String(raw)}`);
}

function tierOf(raw: unknown): string {
  if (raw === null || raw === undefined) return "gpu";
  assert.equal(typeof raw, "string", "medium is a string");
  return (raw as string).toLowerCase();
}

function intOrNull(raw: unknown): number | null {
  if (raw === null || raw === undefined) return null;
  return Number(raw);
}

/** A map-encoded event in the positional layout (absent fields null), as llm-d-kv-cache normalizes it. */
function positional(raw: Record<string, unknown>): unknown[] {
  const fields: Record<string, readonly string[]> = {
    BlockStored: [
      "block_hashes",
      "parent_block_hash",
      "token_ids",
      "block_size",
      "lora_id",
      "medium",
      "lora_name",
    ],
    BlockRemoved: ["block_hashes", "medium"],
    AllBlocksCleared: [],
  };
  const tag = raw["type"];
  assert.equal(typeof tag, "string", "a map event names its tag under type");
  return [tag, ...(fields[tag as string] ?? []).map((field) => raw[field] ?? null)];
}

function decodeEvent(encoded: unknown): DecodedEvent {
  const raw =
    encoded !== null && typeof encoded === "object" && !Array.isArray(encoded)
      ? positional(encoded as Record<string, unknown>)
      : encoded;
  assert.ok(Array.isArray(raw) && raw.length >= 1, "an event is a tagged array or map");
  const [tag] = raw;
  if (tag === "BlockStored") {
    assert.ok(raw.length >= 5, "BlockStored has hashes, parent, tokens and block size");
    return {
      type: "BlockStored",
      blockHashes: (raw[1] as unknown[]).map(hashOf),
      parentHash: raw[2] === null ? 0n : hashOf(raw[2]),
      tokenIds: (raw[3] as unknown[]).map(Number),
      blockSize: Number(raw[4]),
      loraId: intOrNull(raw[5]),
      deviceTier: tierOf(raw[6]),
    };
  }
  if (tag === "BlockRemoved") {
    return {
      type: "BlockRemoved",
      blockHashes: (raw[1] as unknown[]).map(hashOf),
      deviceTier: tierOf(raw[2]),
    };
  }
  if (tag === "AllBlocksCleared") return { type: "AllBlocksCleared" };
  throw new Error(`unknown vLLM event tag: ${String(tag)}`);
}

/** One ZMQ message of the publisher, decoded; throws where llm-d would reject it. */
export function decodeMessage(frames: readonly Buffer[]): DecodedBatch {
  assert.equal(frames.length, 3, "vLLM sends [topic, sequence, payload]");
  const [topicFrame, sequenceFrame, payload] = frames as [Buffer, Buffer, Buffer];
  assert.equal(sequenceFrame.length, 8, "the sequence is 8 bytes");
  const topic = topicFrame.toString("utf8");
  const parts = topic.split("@");
  const [podId, modelName] = parts.length === 3 ? [parts[1] as string, parts[2] as string] : [topic, ""];
  const batch = decode(payload, { useBigInt64: true });
  assert.ok(Array.isArray(batch) && (batch.length === 2 || batch.length === 3), "a batch is an array");
  const [ts, events, rank] = batch as [unknown, unknown, unknown];
  assert.equal(typeof ts, "number");
  assert.ok(Array.isArray(events));
  return {
    topic,
    podId,
    modelName,
    sequence: sequenceFrame.readBigUInt64BE(),
    ts: ts as number,
    dataParallelRank: intOrNull(rank),
    events: events.map(decodeEvent),
  };
}

const SUBSCRIPTION_SETTLE_MS = 100;

/**
 * Asks a publisher's replay socket for its batches from `first` on, as llm-d-router's replay client does: a
 * DEALER sends ["", sequence], every answer (its empty delimiter dropped) is [topic, sequence, payload] and
 * [topic, -1, ""] ends the replay.
 */
export async function requestReplay(replayEndpoint: string, first: bigint): Promise<DecodedBatch[]> {
  const dealer = new Dealer({ linger: 0, receiveTimeout: 5_000 });
  try {
    dealer.connect(replayEndpoint);
    const start = Buffer.alloc(8);
    start.writeBigUInt64BE(first);
    await dealer.send(["", start]);
    const batches: DecodedBatch[] = [];
    for (;;) {
      let frames = await dealer.receive();
      if (frames[0]?.length === 0) frames = frames.slice(1);
      if (frames.length === 3 && frames[2]?.length === 0) {
        assert.equal(frames[1]?.toString("hex"), "ffffffffffffffff", "the end is sequence -1");
        return batches;
      }
      batches.push(decodeMessage(frames));
    }
  } finally {
    dealer.close();
  }
}

/** A SUB socket collecting every batch and applying it to the block set, as llm-d's index does. */
export class KvEventSubscriber {
  readonly batches: DecodedBatch[] = [];
  /** the blocks the publisher holds, as its events so far say */
  readonly blocks = new Set<bigint>();
  private readonly socket = new Subscriber({ linger: 0 });
  /** resolves at the first peer's finished handshake (listened for before any bind or connect) */
  private readonly handshake: Promise<void>;
  private readonly loop: Promise<void>;
  private failure: Error | null = null;

  private constructor(topicFilter: string) {
    this.handshake = new Promise((resolve) => this.socket.events.on("handshake", () => resolve()));
    this.socket.subscribe(topicFilter);
    this.loop = this.receive();
  }

  /** Binds on 127.0.0.1 (any port) for a publisher that connects (`--kv-events-endpoint tcp://...`). */
  static async bind(topicFilter = "kv@"): Promise<{ subscriber: KvEventSubscriber; endpoint: string }> {
    const subscriber = new KvEventSubscriber(topicFilter);
    await subscriber.socket.bind("tcp://127.0.0.1:*");
    const endpoint = subscriber.socket.lastEndpoint;
    assert.ok(endpoint);
    return { subscriber, endpoint };
  }

  /** Connects to a publisher that binds. */
  static connect(endpoint: string, topicFilter = "kv@"): KvEventSubscriber {
    const subscriber = new KvEventSubscriber(topicFilter);
    subscriber.socket.connect(endpoint);
    return subscriber;
  }

  /**
   * Waits for a publisher to finish its handshake with this socket, then a little longer for the subscription
   * to reach it (a PUB socket drops what no subscription wants yet).
   */
  async joined(timeoutMs = 10_000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no publisher joined within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([this.handshake, timeout]);
    } finally {
      clearTimeout(timer);
    }
    await new Promise((resolve) => setTimeout(resolve, SUBSCRIPTION_SETTLE_MS));
  }

  /** Waits until `done()` holds, polling every 20 ms; false if it still does not after `timeoutMs`. */
  async until(done: () => boolean, timeoutMs = 5_000): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      if (Date.now() >= deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return true;
  }

  /** Closes the socket; throws the first message that could not be decoded, if any. */
  async close(): Promise<void> {
    this.socket.close();
    await this.loop;
    if (this.failure) throw this.failure;
  }

  private async receive(): Promise<void> {
    try {
      for await (const frames of this.socket) this.apply(decodeMessage(frames));
    } catch (error) {
      if (!this.socket.closed) this.failure = error as Error;
    }
  }

  private apply(batch: DecodedBatch): void {
    this.batches.push(batch);
    for (const event of batch.events) {
      if (event.type === "BlockStored") for (const hash of event.blockHashes) this.blocks.add(hash);
      else if (event.type === "BlockRemoved") for (const hash of event.blockHashes) this.blocks.delete(hash);
      else this.blocks.clear();
    }
  }
}
