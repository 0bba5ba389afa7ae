/**
 * `serve --kv-events-endpoint`: the scheduler pool's prefix cache published as vLLM's KV events over a ZMQ PUB
 * socket (kv-event-wire.ts), so llm-d's precise prefix-cache scorer (or any vLLM KV-event consumer) knows which
 * blocks this replica holds. Events of one turn of the engine's loop go out as one batch, like vLLM's one batch
 * per engine step. With a replay endpoint, a ROUTER socket there resends the last batches to a subscriber that
 * joined late or missed some, as vLLM's ZmqEventPublisher does.
 */
import { Publisher, Router } from "zeromq";
import type { KvBlockObserver, StoredBlocks } from "../../core/kv/block-events.js";
import {
  ALL_BLOCKS_CLEARED,
  bindsEndpoint,
  blockRemoved,
  blockStored,
  DEFAULT_BUFFER_STEPS,
  END_OF_REPLAY,
  encodeEventBatch,
  type KvCacheEvent,
  type KvEventsFormat,
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
  /** vLLM's `replay_endpoint`: a ROUTER socket bound there answers replay requests; none when absent */
  readonly replayEndpoint?: string;
  /** vLLM's `buffer_steps`: how many of the last batches a replay can resend (default 10 000, vLLM's) */
  readonly bufferSteps?: number;
  /** the `data_parallel_rank` every batch carries (default 0) */
  readonly dataParallelRank?: number;
  /** which vLLM layout the events are written in (default `array`) */
  readonly format?: KvEventsFormat;
  /** where failed sends are reported (default stderr) */
  readonly logError?: (message: string) => void;
}

/** vLLM's defaults: the PUB socket's high-water mark, and how long close() lets the last batches leave. */
const SEND_HIGH_WATER_MARK = 100_000;
const LINGER_MS = 1_000;

interface SentBatch {
  readonly sequence: number;
  readonly payload: Uint8Array;
}

/**
 * The last batches published, oldest first, at most `capacity` (a ring: sequences only grow, so the oldest is
 * the one overwritten).
 */
class ReplayBuffer {
  private readonly batches: SentBatch[] = [];
  private start = 0;

  constructor(private readonly capacity: number) {}

  add(batch: SentBatch): void {
    if (this.batches.length < this.capacity) {
      this.batches.push(batch);
      return;
    }
    this.batches[this.start] = batch;
    this.start = (this.start + 1) % this.capacity;
  }

  /** The batches from sequence `first` on, in order. */
  from(first: bigint): SentBatch[] {
    const ordered = [...this.batches.slice(this.start), ...this.batches.slice(0, this.start)];
    return ordered.filter((b) => BigInt(b.sequence) >= first);
  }
}

async function openSocket<S extends Publisher | Router>(
  socket: S,
  endpoint: string,
  flag: string,
  bind: boolean,
): Promise<S> {
  try {
    if (bind) await socket.bind(endpoint);
    else socket.connect(endpoint);
    return socket;
  } catch (error) {
    socket.close();
    throw new Error(`${flag} ${endpoint}: ${(error as Error).message}`);
  }
}

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
  private readonly dataParallelRank: number;
  private readonly format: KvEventsFormat;
  private readonly buffer: ReplayBuffer | null;
  private readonly replaying: Promise<void>;

  private constructor(
    private readonly socket: Publisher,
    readonly endpoint: string,
    private readonly replay: Router | null,
    /** where the replay socket listens (the port it got for `tcp://*:*`), null without one */
    readonly replayEndpoint: string | null,
    options: KvEventPublisherOptions,
  ) {
    this.topic = Buffer.from(options.topic, "utf8");
    this.logError = options.logError ?? ((message) => process.stderr.write(`${message}\n`));
    this.dataParallelRank = options.dataParallelRank ?? 0;
    this.format = options.format ?? "array";
    this.buffer = replay ? new ReplayBuffer(options.bufferSteps ?? DEFAULT_BUFFER_STEPS) : null;
    this.replaying = replay ? this.serveReplays(replay) : Promise.resolve();
  }

  /**
   * Opens the PUB socket (binds or connects `endpoint`) and the replay socket (binds `replayEndpoint`); a
   * bind that fails throws here, naming its flag.
   */
  static async open(options: KvEventPublisherOptions): Promise<KvEventPublisher> {
    const socket = await openSocket(
      new Publisher({ sendHighWaterMark: SEND_HIGH_WATER_MARK, linger: LINGER_MS }),
      options.endpoint,
      "--kv-events-endpoint",
      bindsEndpoint(options.endpoint),
    );
    let replay: Router | null = null;
    if (options.replayEndpoint) {
      try {
        replay = await openSocket(
          new Router({ linger: 0 }),
          options.replayEndpoint,
          "--kv-events-replay-endpoint",
          true,
        );
      } catch (error) {
        socket.close();
        throw error;
      }
    }
    return new KvEventPublisher(
      socket,
      socket.lastEndpoint ?? options.endpoint,
      replay,
      replay ? (replay.lastEndpoint ?? options.replayEndpoint ?? null) : null,
      options,
    );
  }

  blocksStored(stored: StoredBlocks): void {
    this.add(blockStored(stored));
  }

  blocksRemoved(hashes: readonly number[]): void {
    this.add(blockRemoved(hashes));
  }

  /** The engine stopped and its pool is gone: publishes AllBlocksCleared, lets it leave, closes the sockets. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.flush();
      this.pending = [ALL_BLOCKS_CLEARED];
      this.flush();
      await this.sending;
      this.socket.close();
      this.replay?.close();
      await this.replaying;
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
    const payload = encodeEventBatch(Date.now() / 1000, this.pending, this.dataParallelRank, this.format);
    this.pending = [];
    const sequence = this.sequence++;
    this.buffer?.add({ sequence, payload });
    const frames = [this.topic, sequenceFrame(sequence), payload];
    this.sending = this.sending
      .then(() => this.socket.send(frames))
      .catch((error: unknown) => {
        this.logError(`KV events: a batch was not sent: ${(error as Error).message}`);
      });
  }

  /**
   * Answers replay requests until the socket closes: a request [identity, "", start sequence as 8 bytes
   * big-endian] (from a REQ or DEALER socket) gets every kept batch from that sequence on as [identity, "",
   * topic, sequence, payload], then [identity, "", topic, -1, ""] (vLLM's framing since PR #45177, which
   * llm-d's replay client reads). Other requests are logged and ignored, as vLLM does.
   */
  private async serveReplays(replay: Router): Promise<void> {
    try {
      for await (const frames of replay) {
        const [identity, delimiter, start] = frames as Buffer[];
        if (frames.length !== 3 || !identity || delimiter?.length !== 0 || start?.length !== 8) {
          this.logError(`KV events: a replay request of ${frames.length} frames was ignored`);
          continue;
        }
        for (const batch of this.buffer?.from(start.readBigUInt64BE()) ?? []) {
          await replay.send([identity, "", this.topic, sequenceFrame(batch.sequence), batch.payload]);
        }
        await replay.send([identity, "", this.topic, END_OF_REPLAY, ""]);
      }
    } catch (error) {
      if (!replay.closed) this.logError(`KV events: the replay socket failed: ${(error as Error).message}`);
    }
  }
}
