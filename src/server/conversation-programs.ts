/**
 * The program of a conversation whose client names none (Qwen Code), told from its messages. Each reply of
 * such a program is remembered by the conversation it answered and what a client sends back of it (its
 * content, trimmed, and its calls' names and arguments), and a request whose messages repeat one, after the
 * same messages, is a turn of that program. Messages, not tokens: a template that drops a reply's thinking
 * from the history (MiniMax M2's, Qwen3's before the last user message) writes other tokens than the model
 * generated, and the conversation is still one program.
 */
import { createHash } from "node:crypto";
import { conversationDigest, replyKey, replyKeysOf } from "./generated-replies.js";
import type { ChatMessageInput } from "./schemas.js";
import type { ParsedToolCall } from "./tool-calls.js";

/** A reply's key, hashed: a reply's content may be long, and many are kept. */
const hash = (key: string) => createHash("sha256").update(key).digest("base64");

export class ConversationPrograms {
  /** hashed reply key -> program id, least recently used first */
  private readonly programs = new Map<string, string>();

  /** `maxReplies`: replies kept */
  constructor(private readonly maxReplies: number) {}

  /** A reply of `programId`, as returned, to the conversation `messages` in `scope` (tenant and cache salt). */
  answered(
    scope: string | null,
    messages: readonly ChatMessageInput[],
    content: string | null,
    calls: readonly ParsedToolCall[],
    programId: string,
  ): void {
    const key = replyKey(
      conversationDigest(scope ?? "", messages),
      content ?? "",
      calls.map((c) => ({ name: c.name, args: c.arguments })),
    );
    if (key === null) return;
    const hashed = hash(key);
    this.programs.delete(hashed);
    this.programs.set(hashed, programId);
    while (this.programs.size > this.maxReplies)
      this.programs.delete(this.programs.keys().next().value as string);
  }

  /** A program that ended: its replies are continued no more. */
  forget(programId: string): void {
    for (const [key, program] of this.programs) if (program === programId) this.programs.delete(key);
  }

  /** The program of the latest assistant message in `messages` that repeats a remembered reply; null: none. */
  programOf(scope: string | null, messages: readonly ChatMessageInput[]): string | null {
    let found: string | null = null;
    for (const key of replyKeysOf(scope ?? "", messages).keys) {
      const program = key ? this.programs.get(hash(key)) : undefined;
      if (program !== undefined) found = program;
    }
    return found;
  }
}
