import { randomBytes } from "node:crypto";
import type { ListedItem } from "./responses-items.js";
import { TenantStore } from "./tenant-store.js";

/** A conversation of OpenAI's Conversations API: its items, oldest first, are what a response on it sees. */
export interface StoredConversation {
  readonly id: string;
  readonly created_at: number;
  metadata: Record<string, string>;
  items: ListedItem[];
}

/** OpenAI's conversation object (what create, retrieve, update and an item's delete return). */
export function conversationObject({ id, created_at, metadata }: StoredConversation) {
  return { id, object: "conversation" as const, created_at, metadata };
}

export function newConversationId(): string {
  return `conv_${randomBytes(24).toString("hex")}`;
}

/**
 * The conversations kept, so that responses can go on from them: the most recently used over all tenants, at
 * most `capacity` and `maxBytes` (as JSON text), each found only by the tenant that created it. The one just
 * used is never the one forgotten.
 */
export class ConversationStore extends TenantStore<StoredConversation> {
  constructor(capacity: number, maxBytes: number) {
    super(capacity, maxBytes, (conversation) => JSON.stringify(conversation).length);
  }
}
