/**
 * An echoed tool-call reply rendered as the model generated it. A client sends a reply's tool calls back as
 * structured data, and the chat template writes them its own way (other spacing, other key order), so the
 * rendered text parts from what the model generated at the first difference and the engine computes the
 * rest of the reply again (src/engine/turn-continuation.ts keeps the generated tokens only as far as the
 * text repeats them). Each reply with tool calls is remembered by the conversation it answered and what a
 * client sends back of it (its content and its calls' names and arguments; not the call ids, since a stream
 * announces a call under an id of its own), and an assistant message that repeats one exactly, after the
 * same messages, is rendered as the generated text itself. An agent calling the same tool with the same
 * arguments twice thus gets each reply back where it was generated.
 */
import { createHash } from "node:crypto";
import { contentText } from "./chat-render.js";
import type { ChatMessageInput } from "./schemas.js";
import type { ParsedToolCall } from "./tool-calls.js";

/** One request's view: replies are remembered and restored within the API key that saw them. */
export interface ReplyMemory {
  /** A reply of this server: its whole generated text, the content before its calls, and the calls. */
  remember(text: string, content: string | null, calls: readonly ParsedToolCall[]): void;
  /** The request's messages with every assistant message that repeats a remembered reply as its text. */
  restore(): ChatMessageInput[];
}

type Arguments = string | Record<string, unknown> | undefined;

/** JSON with object keys sorted, so that equal arguments give equal text; null for unparsable ones. */
function canonical(args: Arguments): string | null {
  let value: unknown = args ?? {};
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      return null;
    }
  }
  return JSON.stringify(value, (_key, v: unknown) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}

/** A digest of the tenant and the messages before a reply, extended one message at a time. */
function extend(digest: string, message: ChatMessageInput): string {
  return createHash("sha256").update(digest).update(JSON.stringify(message)).digest("base64");
}

export function conversationDigest(tenant: string, messages: readonly ChatMessageInput[]): string {
  return messages.reduce(extend, createHash("sha256").update(tenant).digest("base64"));
}

/** A reply's key: the digest of the conversation it answered, its content and its calls; null: unreadable arguments. */
export function replyKey(
  before: string,
  content: string,
  calls: readonly { name: string; args: Arguments }[],
): string | null {
  const parts: string[] = [before, content.trim()];
  for (const call of calls) {
    const args = canonical(call.args);
    if (args === null) return null;
    parts.push(call.name, args);
  }
  return JSON.stringify(parts);
}

/**
 * The key of the reply each assistant message of `messages` repeats (undefined for other messages, null for
 * unreadable arguments), and the digest of the whole conversation.
 */
export function replyKeysOf(
  scope: string,
  messages: readonly ChatMessageInput[],
): { keys: (string | null | undefined)[]; digest: string } {
  let before = conversationDigest(scope, []);
  const keys = messages.map((message, i) => {
    const digest = before;
    before = extend(before, message);
    if (message.role !== "assistant") return undefined;
    return replyKey(
      digest,
      contentText(message.content, `messages[${i}].content`),
      (message.tool_calls ?? []).map((c) => ({ name: c.function.name, args: c.function.arguments })),
    );
  });
  return { keys, digest: before };
}

export class GeneratedReplies {
  private readonly texts = new Map<string, string>();

  /** `maxReplies`: replies kept, least recently used first out */
  constructor(private readonly maxReplies: number) {}

  /** The view of a request of `tenant` whose conversation is `requestMessages`. */
  scoped(tenant: string | null, requestMessages: readonly ChatMessageInput[]): ReplyMemory {
    const scope = tenant ?? "";
    // restore() walks the same digest chain: its end is the digest remember() keys the reply under
    let requestDigest: string | null = null;
    return {
      remember: (text, content, calls) => {
        if (calls.length === 0) return;
        requestDigest ??= conversationDigest(scope, requestMessages);
        const key = replyKey(
          requestDigest,
          content ?? "",
          calls.map((c) => ({ name: c.name, args: c.arguments })),
        );
        if (key === null) return;
        this.texts.delete(key);
        this.texts.set(key, text);
        while (this.texts.size > this.maxReplies) this.texts.delete(this.texts.keys().next().value as string);
      },
      restore: () => {
        const { keys, digest } = replyKeysOf(scope, requestMessages);
        requestDigest = digest;
        return requestMessages.map((message, i) => {
          const key = keys[i];
          // only replies with calls are remembered
          const calls = message.role === "assistant" ? (message.tool_calls?.length ?? 0) : 0;
          const text = key && calls > 0 ? this.texts.get(key) : undefined;
          return text === undefined ? message : ({ role: "assistant", content: text } as const);
        });
      },
    };
  }
}
