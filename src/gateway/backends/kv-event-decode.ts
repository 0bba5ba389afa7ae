/**
 * vLLM's KV events as a subscriber reads them (vllm/distributed/kv_events.py): a ZMQ message [topic, sequence,
 * payload], the payload msgpack `[ts, events, data_parallel_rank?]`, each event a tagged array (msgspec's
 * `array_like`: `["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, ...]`,
 * `["BlockRemoved", block_hashes, medium]`, `["AllBlocksCleared"]`) or, from vLLM PR #42892 on, a map with its
 * tag under `type`. Block hashes are integers or bytes (vLLM's sha256 hashes); both become strings here.
 */
import { decode } from "@msgpack/msgpack";

export type KvEvent =
  | {
      readonly type: "stored";
      readonly hashes: readonly string[];
      readonly parent: string | null;
      readonly blockSize: number;
      readonly medium: string;
    }
  | { readonly type: "removed"; readonly hashes: readonly string[]; readonly medium: string }
  | { readonly type: "cleared" };

export interface KvEventBatch {
  readonly sequence: bigint;
  readonly events: readonly KvEvent[];
}

function hashKey(raw: unknown): string {
  if (typeof raw === "bigint") return BigInt.asUintN(64, raw).toString(16);
  if (typeof raw === "number" && Number.isInteger(raw)) return BigInt.asUintN(64, BigInt(raw)).toString(16);
  if (raw instanceof Uint8Array) return Buffer.from(raw).toString("hex");
  if (typeof raw === "string") return raw;
  throw new Error(`a block hash is an integer or bytes, got ${typeof raw}`);
}

function hashList(raw: unknown): string[] {
  if (!Array.isArray(raw)) throw new Error("block_hashes is not an array");
  return raw.map(hashKey);
}

/** GPU when the event names no medium (vLLM before mediums were added). */
function mediumOf(raw: unknown): string {
  return typeof raw === "string" ? raw.toUpperCase() : "GPU";
}

function fields(raw: unknown): { tag: string; at: (index: number, key: string) => unknown } {
  if (Array.isArray(raw)) return { tag: String(raw[0]), at: (index) => raw[index] };
  if (typeof raw === "object" && raw !== null) {
    const map = raw as Record<string, unknown>;
    return { tag: String(map["type"] ?? map["tag"]), at: (_, key) => map[key] };
  }
  throw new Error("an event is an array or a map");
}

export function decodeEvent(raw: unknown): KvEvent | null {
  const { tag, at } = fields(raw);
  if (tag === "BlockStored") {
    const parent = at(2, "parent_block_hash");
    return {
      type: "stored",
      hashes: hashList(at(1, "block_hashes")),
      parent: parent === null || parent === undefined ? null : hashKey(parent),
      blockSize: Number(at(4, "block_size")),
      medium: mediumOf(at(6, "medium")),
    };
  }
  if (tag === "BlockRemoved") {
    return { type: "removed", hashes: hashList(at(1, "block_hashes")), medium: mediumOf(at(2, "medium")) };
  }
  if (tag === "AllBlocksCleared") return { type: "cleared" };
  // events a later vLLM adds are not ours to read
  return null;
}

/** One message of the publisher; throws on frames that are not vLLM's. */
export function decodeBatch(frames: readonly Uint8Array[]): KvEventBatch {
  if (frames.length !== 3) throw new Error(`a KV event message has 3 frames, got ${frames.length}`);
  const sequenceFrame = Buffer.from(frames[1] as Uint8Array);
  if (sequenceFrame.length !== 8) throw new Error("the sequence frame is not 8 bytes");
  const payload = decode(frames[2] as Uint8Array, { useBigInt64: true });
  if (!Array.isArray(payload) || payload.length < 2 || !Array.isArray(payload[1])) {
    throw new Error("the payload is not [ts, events, ...]");
  }
  const events: KvEvent[] = [];
  for (const raw of payload[1] as unknown[]) {
    const event = decodeEvent(raw);
    if (event !== null) events.push(event);
  }
  return { sequence: sequenceFrame.readBigUInt64BE(), events };
}
