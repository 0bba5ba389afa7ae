import { randomBytes } from "node:crypto";
import type { ListedItem } from "./responses-items.js";

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
 * most `capacity` and `maxBytes` (their items as JSON text), each found only by the tenant that created it.
 * The one just used is never the one forgotten.
 */
export class ConversationStore {
  private readonly kept = new Map<string, StoredConversation>();
  private readonly sizes = new Map<string, number>();
  private bytes = 0;

  constructor(
    readonly capacity: number,
    readonly maxBytes: number,
  ) {}

  private static key(tenant: string | null, id: string): string {
    return `${tenant ?? ""}\u0000${id}`;
  }

  get(tenant: string | null, id: string): StoredConversation | undefined {
    const key = ConversationStore.key(tenant, id);
    const found = this.kept.get(key);
    if (found !== undefined) {
      this.kept.delete(key);
      this.kept.set(key, found);
    }
    return found;
  }

  /** Keeps `conversation` (new, or changed in place: its size is measured again), then forgets the oldest over the bounds. */
  set(tenant: string | null, conversation: StoredConversation): void {
    const key = ConversationStore.key(tenant, conversation.id);
    this.forget(key);
    const size = JSON.stringify(conversation).length;
    this.kept.set(key, conversation);
    this.sizes.set(key, size);
    this.bytes += size;
    for (const oldest of this.kept.keys()) {
      if (this.kept.size <= this.capacity && this.bytes <= this.maxBytes) break;
      if (oldest !== key) this.forget(oldest);
    }
  }

  /** Whether there was such a conversation. */
  delete(tenant: string | null, id: string): boolean {
    return this.forget(ConversationStore.key(tenant, id));
  }

  private forget(key: string): boolean {
    this.bytes -= this.sizes.get(key) ?? 0;
    this.sizes.delete(key);
    return this.kept.delete(key);
  }
}
