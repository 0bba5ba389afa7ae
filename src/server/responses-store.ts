import type { ChatMessageInput } from "./schemas.js";

/**
 * The conversations of the responses created with `store: true`, so that `previous_response_id` can
 * continue them: the most recently used `capacity` of them over all tenants, each found only by the
 * tenant that stored it.
 */
export class ResponseStore {
  private readonly conversations = new Map<string, readonly ChatMessageInput[]>();

  constructor(readonly capacity: number) {}

  private static key(tenant: string | null, id: string): string {
    return `${tenant ?? ""}\u0000${id}`;
  }

  get(tenant: string | null, id: string): readonly ChatMessageInput[] | undefined {
    const key = ResponseStore.key(tenant, id);
    const conversation = this.conversations.get(key);
    if (conversation !== undefined) {
      this.conversations.delete(key);
      this.conversations.set(key, conversation);
    }
    return conversation;
  }

  set(tenant: string | null, id: string, conversation: readonly ChatMessageInput[]): void {
    const key = ResponseStore.key(tenant, id);
    this.conversations.delete(key);
    this.conversations.set(key, conversation);
    for (const oldest of this.conversations.keys()) {
      if (this.conversations.size <= this.capacity) break;
      this.conversations.delete(oldest);
    }
  }
}
