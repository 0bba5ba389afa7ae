/**
 * A ZMQ SUB socket on a backend's KV events endpoint (vLLM's `--kv-events-config` publisher, `continuum serve
 * --kv-events-endpoint`, which bind: the gateway connects), every batch applied to the backend's index as it
 * arrives. A message that cannot be decoded is counted and skipped: the index then misses its events, as a
 * gap in the sequence says.
 */
import { Subscriber } from "zeromq";
import type { BackendKvIndex } from "./backend-kv-index.js";
import { decodeBatch } from "./kv-event-decode.js";

export class KvEventFeed {
  private readonly socket = new Subscriber({ linger: 0 });
  private readonly loop: Promise<void>;
  undecodable = 0;
  /** the first undecodable message's error, for the log */
  firstError: string | null = null;

  constructor(
    readonly endpoint: string,
    private readonly index: BackendKvIndex,
  ) {
    this.socket.subscribe();
    this.socket.connect(endpoint);
    this.loop = this.receive();
  }

  private async receive(): Promise<void> {
    try {
      for await (const frames of this.socket) {
        try {
          this.index.apply(decodeBatch(frames), Date.now());
        } catch (error) {
          this.undecodable++;
          this.firstError ??= error instanceof Error ? error.message : String(error);
        }
      }
    } catch (error) {
      if (!this.socket.closed) throw error;
    }
  }

  async close(): Promise<void> {
    this.socket.close();
    await this.loop;
  }
}
