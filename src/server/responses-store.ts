import type { ListedItem } from "./responses-items.js";
import type { ResponseObject } from "./responses-output.js";
import type { ChatMessageInput } from "./schemas.js";

/** What the store asks of a background response's run (responses-background.ts). */
export interface LiveRun {
  /** queued or in progress */
  readonly live: boolean;
}

/** A response kept for later (`store` left out or true, as at OpenAI). */
export interface StoredResponse<Run extends LiveRun = LiveRun> {
  /** the conversation up to and with its turn, which `previous_response_id` continues */
  conversation: readonly ChatMessageInput[];
  /**
   * the response object as it was returned (`GET /v1/responses/{id}`); a background response's state
   * now, replaced as it runs
   */
  response: ResponseObject;
  /**
   * the items its model saw before its output, oldest first (`GET /v1/responses/{id}/input_items`): those
   * of the response it continues and that response's output, then its own input
   */
  readonly inputItems: readonly ListedItem[];
  /** a background response's run: its cancel, its events; absent for the others */
  readonly run?: Run;
}

/**
 * The stored responses, so that `previous_response_id` can continue them and `GET` return them: the most
 * recently used of them over all tenants, at most `capacity` and `maxBytes` (as JSON text when stored),
 * each found only by the tenant that stored it. A background response still running is never the one
 * forgotten (it could not be cancelled or polled then), nor the one just stored.
 */
export class ResponseStore<Run extends LiveRun> {
  private readonly stored = new Map<string, StoredResponse<Run>>();
  private readonly sizes = new Map<string, number>();
  private bytes = 0;

  constructor(
    readonly capacity: number,
    readonly maxBytes: number = Number.POSITIVE_INFINITY,
  ) {}

  /** Bytes of the kept responses, as JSON text when each was stored. */
  get storedBytes(): number {
    return this.bytes;
  }

  private static key(tenant: string | null, id: string): string {
    return `${tenant ?? ""}\u0000${id}`;
  }

  get(tenant: string | null, id: string): StoredResponse<Run> | undefined {
    const key = ResponseStore.key(tenant, id);
    const found = this.stored.get(key);
    if (found !== undefined) {
      this.stored.delete(key);
      this.stored.set(key, found);
    }
    return found;
  }

  set(tenant: string | null, id: string, response: StoredResponse<Run>): void {
    const key = ResponseStore.key(tenant, id);
    this.forget(key);
    const { conversation, response: object, inputItems } = response;
    const size = JSON.stringify({ conversation, object, inputItems }).length;
    this.stored.set(key, response);
    this.sizes.set(key, size);
    this.bytes += size;
    for (const [oldest, entry] of this.stored) {
      if (this.stored.size <= this.capacity && this.bytes <= this.maxBytes) break;
      if (entry.run?.live || oldest === key) continue;
      this.forget(oldest);
    }
  }

  /**
   * The item with this id among the tenant's kept responses, their input items or their output (what an
   * `item_reference` names); undefined when none is kept.
   */
  findItem(tenant: string | null, id: string): { readonly id?: unknown } | undefined {
    const prefix = ResponseStore.key(tenant, "");
    for (const [key, { inputItems, response }] of this.stored) {
      if (!key.startsWith(prefix)) continue;
      const found =
        inputItems.find((item) => item.id === id) ??
        (response.output as readonly { readonly id?: unknown }[]).find((item) => item.id === id);
      if (found !== undefined) return found;
    }
    return undefined;
  }

  /** Whether there was such a response. */
  delete(tenant: string | null, id: string): boolean {
    return this.forget(ResponseStore.key(tenant, id));
  }

  private forget(key: string): boolean {
    this.bytes -= this.sizes.get(key) ?? 0;
    this.sizes.delete(key);
    return this.stored.delete(key);
  }
}
