import { ApiError } from "../errors.js";
import type { ChatMessageInput } from "../schemas.js";
import type { ListedItem } from "./responses-items.js";
import type { ResponseObject } from "./responses-output.js";
import { TenantStore } from "./tenant-store.js";

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
export class ResponseStore<Run extends LiveRun> extends TenantStore<StoredResponse<Run>> {
  constructor(capacity: number, maxBytes: number = Number.POSITIVE_INFINITY) {
    super(
      capacity,
      maxBytes,
      ({ conversation, response, inputItems }) =>
        JSON.stringify({ conversation, object: response, inputItems }).length,
      (stored) => stored.run?.live === true,
    );
  }

  /**
   * The response `previous_response_id` names (null: none named), or OpenAI's 404 when this tenant keeps
   * none of that id.
   */
  previous(tenant: string | null, previousId: string | null | undefined): StoredResponse<Run> | null {
    if (!previousId) return null;
    const previous = this.get(tenant, previousId);
    if (previous === undefined) {
      throw new ApiError(
        404,
        `Previous response with id '${previousId}' not found (responses created with store: false are not kept, nor the least recently used past the last ${this.capacity}).`,
        "invalid_request_error",
        "previous_response_not_found",
        "previous_response_id",
      );
    }
    return previous;
  }

  /**
   * The item with this id among the tenant's kept responses, their input items or their output (what an
   * `item_reference` names); undefined when none is kept.
   */
  findItem(tenant: string | null, id: string): { readonly id?: unknown } | undefined {
    for (const { inputItems, response } of this.values(tenant)) {
      const found =
        inputItems.find((item) => item.id === id) ??
        (response.output as readonly { readonly id?: unknown }[]).find((item) => item.id === id);
      if (found !== undefined) return found;
    }
    return undefined;
  }
}
