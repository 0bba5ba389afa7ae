import type { ListedItem } from "./responses-items.js";
import type { ResponseObject } from "./responses-output.js";
import type { ChatMessageInput } from "./schemas.js";

/** What the store asks of a background response's run (responses-background.ts). */
export interface LiveRun {
  /** queued or in progress */
  readonly live: boolean;
}

/** A response created with `store: true` (or `background: true`). */
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
 * The responses created with `store: true`, so that `previous_response_id` can continue them and `GET`
 * return them: the most recently used `capacity` of them over all tenants, each found only by the tenant
 * that stored it. A background response still running is never the one forgotten (it could not be
 * cancelled or polled then).
 */
export class ResponseStore<Run extends LiveRun> {
  private readonly stored = new Map<string, StoredResponse<Run>>();

  constructor(readonly capacity: number) {}

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
    this.stored.delete(key);
    this.stored.set(key, response);
    for (const [oldest, entry] of this.stored) {
      if (this.stored.size <= this.capacity) break;
      if (entry.run?.live) continue;
      this.stored.delete(oldest);
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
    return this.stored.delete(ResponseStore.key(tenant, id));
  }
}
