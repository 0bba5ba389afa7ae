/**
 * The program of a conversation whose client names none (Qwen Code), told from its messages. Each reply of
 * such a program is remembered by the conversation it answered and what a client sends back of it (its
 * content, trimmed, and its calls' names and arguments, a cut call's as far as they go), and a request whose
 * messages repeat one, after the same messages, is a turn of that program. Messages, not tokens: a template that drops a reply's thinking
 * from the history (MiniMax M2's, Qwen3's before the last user message) writes other tokens than the model
 * generated, and the conversation is still one program.
 */

import type { ParsedToolCall } from "../output/tool-calls.js";
import type { ChatMessageInput } from "../schemas.js";
import { conversationDigest, echoedReplies, ReplyIndex } from "../templates/generated-replies.js";

export class ConversationPrograms {
  /** reply -> program id */
  private readonly programs: ReplyIndex<string>;

  /** `maxReplies`: replies kept */
  constructor(maxReplies: number) {
    this.programs = new ReplyIndex(maxReplies);
  }

  /** A reply of `programId`, as returned, to the conversation `messages` in `scope` (tenant and cache salt). */
  answered(
    scope: string | null,
    messages: readonly ChatMessageInput[],
    content: string | null,
    calls: readonly ParsedToolCall[],
    programId: string,
  ): void {
    const reply = { content: content ?? "", calls: calls.map((c) => ({ name: c.name, args: c.arguments })) };
    this.programs.remember(conversationDigest(scope ?? "", messages), reply, programId);
  }

  /** A program that ended: its replies are continued no more. */
  forget(programId: string): void {
    this.programs.forget(programId);
  }

  /** The program of the latest assistant message in `messages` that repeats a remembered reply; null: none. */
  programOf(scope: string | null, messages: readonly ChatMessageInput[]): string | null {
    let found: string | null = null;
    for (const { before, reply } of echoedReplies(scope ?? "", messages).replies.values()) {
      found = this.programs.find(before, reply) ?? found;
    }
    return found;
  }
}
