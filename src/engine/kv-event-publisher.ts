/**
 * `serve --kv-events-endpoint`: the scheduler pool's prefix cache published as vLLM's KV events over a ZMQ PUB
 * socket (kv-event-wire.ts), so llm-d's precise prefix-cache scorer (or any vLLM KV-event consumer) knows which
 * blocks this replica holds. Events of one turn of the engine's loop go out as one batch, like vLLM's one batch
 * per engine step.
 */
import { Publisher } from "zeromq";
import type { KvBlockObserver, StoredBlocks } from "../core/kv/block-events.js";
import {
  ALL_BLOCKS_CLEARED,
  bindsEndpoint,
  blockRemoved,
  blockStored,
  encodeEventBatch,
  type KvCacheEvent,
  sequenceFrame,
} from "./kv-event-wire.js";

export interface KvEventPublisherOptions {
  /**
   * vLLM's `endpoint`: bound when it has a wildcard or is local (`tcp://*:5557`), else connected to (a
   * subscriber that binds, as llm-d's endpoint picker does in its centralised mode)
   */
  readonly endpoint: string;
  /** vLLM's `topic`, for llm-d `kv@<pod>@<model>` */
  readonly topic: string;
  /** where failed sends are reported (default stderr) */
  readonly logError?: (message: string) => void;
}

/** vLLM's defaults: the PUB socket's high-water mark, and how long close() lets the last batches leave. */
const SEND_HIGH_WATER_MARK = 100_000;
const LINGER_MS = 1_000;

export class KvEventPublisher implements KvBlockObserver {
  /** vLLM's BlockStored events carry the blocks' token ids */
  readonly needsTokenIds = true;
  private pending: KvCacheEvent[] = [];
  private sequence = 0;
  /** sends in order, one at a time (a zeromq socket takes one send at once) */
  private sending: Promise<void> = Promise.resolve();
  private closing: Promise<void> | null = null;
  private readonly topic: Buffer;
  private readonly logError: (message: string) => void;

  private constructor(
    private readonly socket: Publisher,
    readonly endpoint: string,
    topic: string,
    logError: ((message: string) => void) | undefined,
  ) {
    this.topic = Buffer.from(topic, "utf8");
    this.logError = logError ?? ((message) => process.stderr.write(`${message}\n`));
  }

  /** Opens the PUB socket: binds or connects `endpoint` (a bind that fails throws here). */
  static async open(options: KvEventPublisherOptions): Promise<KvEventPublisher> {
    const socket = new Publisher({ sendHighWaterMark: SEND_HIGH_WATER_MARK, linger: LINGER_MS });
    try {
      if (bindsEndpoint(options.endpoint)) await socket.bind(options.endpoint);
      else socket.connect(options.endpoint);
    } catch (error) {
      socket.close();
      throw new Error(`--kv-events-endpoint ${options.endpoint}: ${(error as Error).message}`);
    }
    const endpoint = socket.lastEndpoint ?? options.endpoint;
    return new KvEventPublisher(socket, endpoint, options.topic, options.logError);
  }

  blocksStored(stored: StoredBlocks): void {
    this.add(blockStored(stored));
  }

  blocksRemoved(hashes: readonly number[]): void {
    this.add(blockRemoved(hashes));
  }

  /** The engine stopped and its pool is gone: publishes AllBlocksCleared, lets it leave, closes the socket. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.flush();
      this.pending = [ALL_BLOCKS_CLEARED];
      this.flush();
      await this.sending;
      this.socket.close();
    })();
    return this.closing;
  }

  private add(event: KvCacheEvent): void {
    if (this.closing) return;
    if (this.pending.length === 0) queueMicrotask(() => this.flush());
    this.pending.push(event);
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    const payload = encodeEventBatch(Date.now() / 1000, this.pending);
    this.pending = [];
    const frames = [this.topic, sequenceFrame(this.sequence++), payload];
    this.sending = this.sending
      .then(() => this.socket.send(frames))
      .catch((error: unknown) => {
        this.logError(`KV events: a batch was not sent: ${(error as Error).message}`);
      });
  }
}
