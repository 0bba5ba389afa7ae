/**
 * An echoed tool-call reply rendered as the model generated it. A client sends a reply's tool calls back as
 * structured data, and the chat template writes them its own way (other spacing, other key order), so the
 * rendered text parts from what the model generated at the first difference and the engine computes the
 * rest of the reply again (src/engine/text/turn-continuation.ts keeps the generated tokens only as far as the
 * text repeats them). Each reply with tool calls is remembered by the conversation it answered and what a
 * client sends back of it (its content and its calls' names and arguments; not the call ids, since a stream
 * announces a call under an id of its own), and an assistant message that repeats one, after the same
 * messages, is rendered as the generated text itself. An agent calling the same tool with the same
 * arguments twice thus gets each reply back where it was generated.
 *
 * A call cut off at max_tokens has arguments that are no JSON yet. Clients send it back as they received
 * it, or as their partial-JSON parser read it (written again as JSON, or as Anthropic's `input` object),
 * and parsers keep different parts of the cut end: such a reply repeats the generated one when each call's
 * arguments say nothing the generated text does not (partial-json.ts).
 */
import { createHash } from "node:crypto";
import { withinJsonDepth } from "../../tool-calls/json-depth.js";
import { isRecord } from "../../tool-calls/json-objects.js";
import type { ParsedToolCall } from "../output/tool-calls.js";
import type { ChatMessageInput } from "../schemas.js";
import { contentText } from "./chat-render.js";
import { partialJsonValue, saysNoMoreThan } from "./partial-json.js";

/** One request's view: replies are remembered and restored within the API key that saw them. */
export interface ReplyMemory {
  /** A reply of this server: its whole generated text, the content before its calls, and the calls. */
  remember(text: string, content: string | null, calls: readonly ParsedToolCall[]): void;
  /** The request's messages with every assistant message that repeats a remembered reply as its text. */
  restore(): ChatMessageInput[];
}

type Arguments = string | Record<string, unknown> | undefined;

/** What a client sends back of a reply: the content before its calls, and each call's name and arguments. */
export interface EchoedReply {
  readonly content: string;
  readonly calls: readonly { readonly name: string; readonly args: Arguments }[];
}

/** The arguments' value: parsed when they are JSON text; undefined when they are none (or too deep to walk). */
function argumentsValue(args: Arguments): unknown {
  if (args === undefined) return {};
  if (typeof args !== "string") return args;
  try {
    const value: unknown = JSON.parse(args);
    return withinJsonDepth(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** What arguments cut off mid-JSON say (nothing yet: an empty object); undefined when they are no JSON. */
function cutArgumentsValue(args: Arguments): unknown {
  if (typeof args !== "string") return argumentsValue(args);
  return args.trim() === "" ? {} : partialJsonValue(args);
}

/** JSON with object keys sorted, so that equal values give equal text. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    isRecord(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : 1))) : v,
  );
}

const hash = (parts: readonly string[]) =>
  createHash("sha256").update(JSON.stringify(parts)).digest("base64");

/** A digest of the tenant and the messages before a reply, extended one message at a time. */
function extend(digest: string, message: ChatMessageInput): string {
  return createHash("sha256").update(digest).update(JSON.stringify(message)).digest("base64");
}

export function conversationDigest(tenant: string, messages: readonly ChatMessageInput[]): string {
  return messages.reduce(extend, createHash("sha256").update(tenant).digest("base64"));
}

/**
 * Each assistant message of `messages` as echoed, with the digest of the conversation before it (by
 * index); and the digest of the whole conversation.
 */
export function echoedReplies(
  scope: string,
  messages: readonly ChatMessageInput[],
): { replies: Map<number, { before: string; reply: EchoedReply }>; digest: string } {
  const replies = new Map<number, { before: string; reply: EchoedReply }>();
  let before = conversationDigest(scope, []);
  messages.forEach((message, i) => {
    if (message.role === "assistant") {
      const reply = {
        content: contentText(message.content, `messages[${i}].content`),
        calls: (message.tool_calls ?? []).map((c) => ({ name: c.function.name, args: c.function.arguments })),
      };
      replies.set(i, { before, reply });
    }
    before = extend(before, message);
  });
  return { replies, digest: before };
}

interface CutReply<T> {
  /** what each call's arguments say */
  readonly args: readonly unknown[];
  readonly value: T;
}

/** Cut replies kept per conversation, content and call names (a client retrying a turn gets another). */
const CUT_REPLIES_PER_SHAPE = 4;

/**
 * Values kept for replies with tool calls, found again by what a client sends back of a reply after the
 * conversation it answered (`before`, a digest). Replies whose calls' arguments are JSON are found by
 * equal arguments; a reply with a call cut off mid-JSON, by arguments that say no more than it. Least
 * recently used first out, `maxReplies` of each kind.
 */
export class ReplyIndex<T> {
  /** digest of the conversation, content, names and arguments -> value */
  private readonly whole = new Map<string, T>();
  /** digest of the conversation, content and names -> the cut replies of that shape, latest last */
  private readonly cut = new Map<string, CutReply<T>[]>();
  private cutReplies = 0;

  constructor(private readonly maxReplies: number) {}

  remember(before: string, reply: EchoedReply, value: T): void {
    const args = reply.calls.map((c) => argumentsValue(c.args));
    if (args.every((a) => a !== undefined)) {
      const key = wholeKey(before, reply, args);
      this.whole.delete(key);
      this.whole.set(key, value);
      while (this.whole.size > this.maxReplies) this.whole.delete(this.whole.keys().next().value as string);
      return;
    }
    const cutArgs = reply.calls.map((c) => cutArgumentsValue(c.args));
    if (cutArgs.some((a) => a === undefined)) return;
    const key = shapeKey(before, reply);
    const kept = (this.cut.get(key) ?? []).slice(1 - CUT_REPLIES_PER_SHAPE);
    this.cutReplies += kept.length + 1 - (this.cut.get(key)?.length ?? 0);
    this.cut.delete(key);
    this.cut.set(key, [...kept, { args: cutArgs, value }]);
    while (this.cutReplies > this.maxReplies) {
      const oldest = this.cut.keys().next().value as string;
      this.cutReplies -= this.cut.get(oldest)?.length ?? 0;
      this.cut.delete(oldest);
    }
  }

  /** Forgets every reply whose value is `value`. */
  forget(value: T): void {
    for (const [key, kept] of this.whole) if (kept === value) this.whole.delete(key);
    for (const [key, replies] of this.cut) {
      const left = replies.filter((r) => r.value !== value);
      this.cutReplies -= replies.length - left.length;
      if (left.length === 0) this.cut.delete(key);
      else this.cut.set(key, left);
    }
  }

  /** The value of the reply `reply` repeats after the conversation `before`; undefined: none. */
  find(before: string, reply: EchoedReply): T | undefined {
    const args = reply.calls.map((c) => argumentsValue(c.args));
    if (args.every((a) => a !== undefined)) {
      const value = this.whole.get(wholeKey(before, reply, args));
      if (value !== undefined) return value;
    }
    const key = shapeKey(before, reply);
    const candidates = this.cut.get(key);
    if (candidates === undefined) return undefined;
    const echoed = reply.calls.map((c) => cutArgumentsValue(c.args));
    for (let i = candidates.length - 1; i >= 0; i--) {
      const candidate = candidates[i] as CutReply<T>;
      if (echoed.every((a, k) => a !== undefined && saysNoMoreThan(a, candidate.args[k]))) {
        this.cut.delete(key);
        this.cut.set(key, candidates);
        return candidate.value;
      }
    }
    return undefined;
  }
}

function shapeKey(before: string, reply: EchoedReply): string {
  return hash([before, reply.content.trim(), ...reply.calls.map((c) => c.name)]);
}

function wholeKey(before: string, reply: EchoedReply, args: readonly unknown[]): string {
  return hash([before, reply.content.trim(), ...reply.calls.flatMap((c, i) => [c.name, canonical(args[i])])]);
}

export class GeneratedReplies {
  private readonly texts: ReplyIndex<string>;

  /** `maxReplies`: replies kept of each kind (whole calls, cut calls) */
  constructor(maxReplies: number) {
    this.texts = new ReplyIndex(maxReplies);
  }

  /** The view of a request of `tenant` whose conversation is `requestMessages`. */
  scoped(tenant: string | null, requestMessages: readonly ChatMessageInput[]): ReplyMemory {
    const scope = tenant ?? "";
    // restore() walks the same digest chain: its end is the digest remember() keys the reply under
    let requestDigest: string | null = null;
    return {
      remember: (text, content, calls) => {
        if (calls.length === 0) return;
        requestDigest ??= conversationDigest(scope, requestMessages);
        const reply = {
          content: content ?? "",
          calls: calls.map((c) => ({ name: c.name, args: c.arguments })),
        };
        this.texts.remember(requestDigest, reply, text);
      },
      restore: () => {
        const { replies, digest } = echoedReplies(scope, requestMessages);
        requestDigest = digest;
        return requestMessages.map((message, i) => {
          // only replies with calls are remembered
          const echoed = replies.get(i);
          const text = echoed?.reply.calls.length ? this.texts.find(echoed.before, echoed.reply) : undefined;
          return text === undefined ? message : ({ role: "assistant", content: text } as const);
        });
      },
    };
  }
}
