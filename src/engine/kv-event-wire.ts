/**
 * vLLM's KV events on the wire (vllm/distributed/kv_events.py, msgspec structs with `array_like=True`), the
 * encoding llm-d-kv-cache's kvevents package, Dynamo and AIBrix decode:
 * - a ZMQ multipart message [topic, sequence, payload], the sequence an unsigned 64-bit big-endian count of
 *   the batches published, from 0;
 * - the payload a msgpack array [ts, events, data_parallel_rank]: ts a float64 of seconds since the epoch,
 *   the rank 0 (one engine);
 * - each event a msgpack array whose first element is its tag:
 *   ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name],
 *   ["BlockRemoved", block_hashes, medium], ["AllBlocksCleared"]: vLLM's fields from `lora_name` (PR #27577)
 *   on, the ones llm-d's decoder names; later vLLM appended more (extra_keys, group_idx...), which array
 *   decoders skip.
 * vLLM since PR #42892 writes events as tagged maps instead; llm-d-kv-cache (from v0.9) reads both, older
 * consumers only arrays, so arrays reach every consumer.
 */
import { hostname } from "node:os";
import { encode } from "@msgpack/msgpack";
import type { StoredBlocks } from "../core/kv/block-events.js";

/** vLLM's medium of the engine's own KV pool (`MEDIUM_GPU`). */
export const MEDIUM_GPU = "GPU";

export type BlockStoredEvent = readonly [
  tag: "BlockStored",
  blockHashes: readonly number[],
  parentBlockHash: number | null,
  tokenIds: readonly number[],
  blockSize: number,
  loraId: null,
  medium: string,
  loraName: null,
];
export type BlockRemovedEvent = readonly [
  tag: "BlockRemoved",
  blockHashes: readonly number[],
  medium: string,
];
export type AllBlocksClearedEvent = readonly [tag: "AllBlocksCleared"];
export type KvCacheEvent = BlockStoredEvent | BlockRemovedEvent | AllBlocksClearedEvent;

export function blockStored(stored: StoredBlocks): BlockStoredEvent {
  return [
    "BlockStored",
    stored.hashes,
    stored.parentHash,
    stored.tokenIds,
    stored.blockSizeTokens,
    null,
    MEDIUM_GPU,
    null,
  ];
}

export function blockRemoved(hashes: readonly number[]): BlockRemovedEvent {
  return ["BlockRemoved", hashes, MEDIUM_GPU];
}

export const ALL_BLOCKS_CLEARED: AllBlocksClearedEvent = ["AllBlocksCleared"];

const FIXARRAY_OF_3 = 0x93;

/**
 * One batch's payload. msgspec writes a Python float as a float64 even when it is integral; msgpack-js would
 * write an integral number as an integer, so ts is encoded on its own as a float.
 */
export function encodeEventBatch(
  tsS: number,
  events: readonly KvCacheEvent[],
  dataParallelRank = 0,
): Uint8Array {
  const parts = [
    Uint8Array.of(FIXARRAY_OF_3),
    encode(tsS, { forceIntegerToFloat: true }),
    encode(events),
    encode(dataParallelRank),
  ];
  const payload = new Uint8Array(parts.reduce((n, part) => n + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    payload.set(part, offset);
    offset += part.length;
  }
  return payload;
}

/** The sequence frame: `seq.to_bytes(8, "big")`. */
export function sequenceFrame(sequence: number): Buffer {
  const frame = Buffer.alloc(8);
  frame.writeBigUInt64BE(BigInt(sequence));
  return frame;
}

/**
 * The topic llm-d reads the pod and the model from, `kv@<pod>@<model>` (what its guides put in vLLM's
 * `--kv-events-config`, with `$POD_IP` for the pod): the pod is `$POD_IP` when set, else the host name.
 */
export function defaultKvEventsTopic(modelId: string, env: NodeJS.ProcessEnv = process.env): string {
  return `kv@${env["POD_IP"] || hostname()}@${modelId}`;
}

/** vLLM's rule: bind an endpoint with a wildcard (`tcp://*:5557`, `::`) or a local transport; connect to others. */
export function bindsEndpoint(endpoint: string): boolean {
  return (
    endpoint.includes("*") ||
    endpoint.includes("::") ||
    endpoint.startsWith("ipc://") ||
    endpoint.startsWith("inproc://")
  );
}
