/**
 * The program of a conversation whose client names none (Qwen Code), told from its messages. Each reply of
 * such a program is remembered by the conversation it answered and what a client sends back of it (its
 * content and its calls' names and arguments, a cut call's as far as they go), and a request whose messages
 * repeat one, after the same messages, is proposed as a turn of that program. The engine joins a request to
 * the program whose turn its prompt's tokens continue (src/engine/implicit-programs.ts); this finds the
 * program where the tokens part: a template that drops a reply's thinking from the history (MiniMax M2's,
 * Qwen3's before the last user message) writes other tokens than the model generated.
 */
import { conversationDigest, echoedReplies, ReplyIndex } from "./generated-replies.js";
import type { ChatMessageInput } from "./schemas.js";
import type { ParsedToolCall } from "./tool-calls.js";

export class ConversationPrograms {
  /** reply -> program id */
  private readonly programs: ReplyIndex<string>;

  /** `maxReplies`: replies kept */
  constructor(maxReplies: number) {
    this.programs = new ReplyIndex(maxReplies);
  }

  /** A reply of `programId`, as returned, to the conversation `messages` of `tenant`. */
  answered(
    tenant: string | null,
    messages: readonly ChatMessageInput[],
    content: string | null,
    calls: readonly ParsedToolCall[],
    programId: string,
  ): void {
    const reply = { content: content ?? "", calls: calls.map((c) => ({ name: c.name, args: c.arguments })) };
    this.programs.remember(conversationDigest(tenant ?? "", messages), reply, programId);
  }

  /** The program of the latest assistant message in `messages` that repeats a remembered reply; null: none. */
  programOf(tenant: string | null, messages: readonly ChatMessageInput[]): string | null {
    let found: string | null = null;
    for (const { before, reply } of echoedReplies(tenant ?? "", messages).replies.values()) {
      found = this.programs.find(before, reply) ?? found;
    }
    return found;
  }
}
