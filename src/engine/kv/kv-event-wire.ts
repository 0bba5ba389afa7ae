/**
 * vLLM's KV events on the wire (vllm/distributed/kv_events.py, msgspec structs), the encoding llm-d-kv-cache's
 * kvevents package, Dynamo and AIBrix decode:
 * - a ZMQ multipart message [topic, sequence, payload], the sequence an unsigned 64-bit big-endian count of
 *   the batches published, from 0;
 * - the payload a msgpack array [ts, events, data_parallel_rank]: ts a float64 of seconds since the epoch;
 * - each event in one of the two layouts vLLM has published (`KvEventsFormat`):
 *   `array`, msgspec's `array_like` structs of vLLM 0.11 up to PR #42892 (llm-d's guides' images, older
 *   consumers): a tagged array ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id,
 *   medium, lora_name], ["BlockRemoved", block_hashes, medium], ["AllBlocksCleared"];
 *   `map`, vLLM from PR #42892 (0.26 publishes it): the same fields as a map in their declared order, the tag
 *   under "type" first; fields with a default that is their value (extra_keys, group_idx...) omitted, as
 *   msgspec's `omit_defaults` does. The batch stays an array in both (what vLLM 0.26 sends, and what
 *   llm-d-kv-cache, llm-d-router and Dynamo decode).
 */
import { hostname } from "node:os";
import { encode } from "@msgpack/msgpack";
import type { StoredBlocks } from "../../core/kv/block-events.js";

/** vLLM's medium of the engine's own KV pool (`MEDIUM_GPU`). */
export const MEDIUM_GPU = "GPU";

/** vLLM's `buffer_steps` default: the batches a replay socket keeps. */
export const DEFAULT_BUFFER_STEPS = 10_000;

export const KV_EVENTS_FORMATS = ["array", "map"] as const;
export type KvEventsFormat = (typeof KV_EVENTS_FORMATS)[number];

export interface BlockStoredEvent {
  readonly type: "BlockStored";
  readonly blockHashes: readonly number[];
  readonly parentBlockHash: number | null;
  readonly tokenIds: readonly number[];
  readonly blockSize: number;
  readonly medium: string;
}
export interface BlockRemovedEvent {
  readonly type: "BlockRemoved";
  readonly blockHashes: readonly number[];
  readonly medium: string;
}
export interface AllBlocksClearedEvent {
  readonly type: "AllBlocksCleared";
}
export type KvCacheEvent = BlockStoredEvent | BlockRemovedEvent | AllBlocksClearedEvent;

export function blockStored(stored: StoredBlocks): BlockStoredEvent {
  return {
    type: "BlockStored",
    blockHashes: stored.hashes,
    parentBlockHash: stored.parentHash,
    tokenIds: stored.tokenIds,
    blockSize: stored.blockSizeTokens,
    medium: MEDIUM_GPU,
  };
}

export function blockRemoved(hashes: readonly number[]): BlockRemovedEvent {
  return { type: "BlockRemoved", blockHashes: hashes, medium: MEDIUM_GPU };
}

export const ALL_BLOCKS_CLEARED: AllBlocksClearedEvent = { type: "AllBlocksCleared" };

/** An event as vLLM's msgspec writes it in `format` (no LoRA here: lora_id and lora_name are None). */
function wireEvent(event: KvCacheEvent, format: KvEventsFormat): unknown {
  switch (event.type) {
    case "BlockStored":
      return format === "array"
        ? [
            event.type,
            event.blockHashes,
            event.parentBlockHash,
            event.tokenIds,
            event.blockSize,
            null,
            event.medium,
            null,
          ]
        : {
            type: event.type,
            block_hashes: event.blockHashes,
            parent_block_hash: event.parentBlockHash,
            token_ids: event.tokenIds,
            block_size: event.blockSize,
            lora_id: null,
            medium: event.medium,
            lora_name: null,
          };
    case "BlockRemoved":
      return format === "array"
        ? [event.type, event.blockHashes, event.medium]
        : { type: event.type, block_hashes: event.blockHashes, medium: event.medium };
    case "AllBlocksCleared":
      return format === "array" ? [event.type] : { type: event.type };
  }
}

const FIXARRAY_OF_3 = 0x93;

/**
 * One batch's payload. msgspec writes a Python float as a float64 even when it is integral; msgpack-js would
 * write an integral number as an integer, so ts is encoded on its own as a float.
 */
export function encodeEventBatch(
  tsS: number,
  events: readonly KvCacheEvent[],
  dataParallelRank = 0,
  format: KvEventsFormat = "array",
): Uint8Array {
  const parts = [
    Uint8Array.of(FIXARRAY_OF_3),
    encode(tsS, { forceIntegerToFloat: true }),
    encode(events.map((event) => wireEvent(event, format))),
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

/** vLLM's end of a replay, in the sequence frame: `(-1).to_bytes(8, "big", signed=True)`. */
export const END_OF_REPLAY = Buffer.alloc(8, 0xff);

/**
 * The topic llm-d reads the pod and the model from, `kv@<pod>@<model>` (what its guides put in vLLM's
 * `--kv-events-config`, with `$POD_IP` for the pod): the pod is `pod` when given, else `$POD_IP`, else the
 * host name.
 */
export function defaultKvEventsTopic(
  modelId: string,
  env: NodeJS.ProcessEnv = process.env,
  pod?: string,
): string {
  return `kv@${pod || env["POD_IP"] || hostname()}@${modelId}`;
}

/** The topic of `config` for model `modelId`: its own, else the default one for its pod. */
export function kvEventsTopicOf(
  config: { readonly topic?: string; readonly pod?: string },
  modelId: string,
  env: NodeJS.ProcessEnv = process.env,
): string {
  return config.topic ?? defaultKvEventsTopic(modelId, env, config.pod);
}

/**
 * Why `pod` cannot name a pod in the topic, or null: llm-d splits the topic on "@" and takes the pod from
 * the second of exactly three parts.
 */
export function kvEventsPodProblem(pod: string): string | null {
  if (pod.length === 0) return "is empty";
  if (pod.includes("@")) return "has an @ (llm-d splits the topic kv@<pod>@<model> on it)";
  return null;
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
