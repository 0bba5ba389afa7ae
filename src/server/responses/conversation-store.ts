import { randomBytes } from "node:crypto";
import { ApiError } from "../errors.js";
import type { ListedItem } from "./responses-items.js";
import { TenantStore } from "./tenant-store.js";

/** A conversation of OpenAI's Conversations API: its items, oldest first, are what a response on it sees. */
export interface StoredConversation {
  readonly id: string;
  readonly created_at: number;
  metadata: Record<string, string>;
  /** added to in place (ConversationStore.add): a reader that must not see later items copies the list */
  items: ListedItem[];
  /** the items' size as JSON text, each measured once, when it was added */
  itemBytes: number;
}

/** OpenAI's conversation object (what create, retrieve, update and an item's delete return). */
export function conversationObject({ id, created_at, metadata }: StoredConversation) {
  return { id, object: "conversation" as const, created_at, metadata };
}

export function newConversationId(): string {
  return `conv_${randomBytes(24).toString("hex")}`;
}

/** Items' size as JSON text. */
export function itemsBytes(items: readonly ListedItem[]): number {
  let bytes = 0;
  for (const item of items) bytes += JSON.stringify(item).length;
  return bytes;
}

/** A conversation's size: its items' (as measured when added) and its metadata's, as JSON text. */
function conversationBytes(conversation: StoredConversation): number {
  return conversation.itemBytes + JSON.stringify(conversation.metadata).length;
}

const MIB = 2 ** 20;

/**
 * The conversations kept, so that responses can go on from them: the most recently used over all tenants, at
 * most `capacity` and `maxBytes` (as JSON text), each found only by the tenant that created it. The one just
 * used is never the one forgotten. One conversation holds at most `maxConversationBytes`: items that would
 * take it past that are refused (a 400). A conversation's size is kept as items come and go, so adding items
 * costs what they add, whatever the conversation holds.
 */
export class ConversationStore extends TenantStore<StoredConversation> {
  constructor(
    capacity: number,
    maxBytes: number,
    readonly maxConversationBytes: number,
  ) {
    super(capacity, maxBytes, conversationBytes);
  }

  /** Adds `items` (measured as `bytes`: itemsBytes) to the tenant's `conversation`, which stays kept. */
  add(
    tenant: string | null,
    conversation: StoredConversation,
    items: readonly ListedItem[],
    bytes: number,
  ): void {
    for (const item of items) conversation.items.push(item);
    conversation.itemBytes += bytes;
    this.set(tenant, conversation.id, conversation);
  }

  /** A 400 naming `param` when `bytes` more would take `conversation` past maxConversationBytes. */
  checkRoom(conversation: StoredConversation, bytes: number, param: string): void {
    const held = conversationBytes(conversation);
    if (held + bytes <= this.maxConversationBytes) return;
    throw ApiError.badRequest(
      `conversation '${conversation.id}' holds ${held} bytes of items and metadata (as JSON text); ${bytes} more would pass the ${this.maxConversationBytes / MIB} MiB one conversation may hold: start another conversation`,
      param,
    );
  }

  /** Removes the item at `index` of the tenant's `conversation`. */
  removeItem(tenant: string | null, conversation: StoredConversation, index: number): void {
    const [removed] = conversation.items.splice(index, 1);
    if (removed !== undefined) conversation.itemBytes -= JSON.stringify(removed).length;
    this.set(tenant, conversation.id, conversation);
  }
}
