/**
 * OpenAI's harmony format (gpt-oss): the model writes messages, each a header (its channel, and `to=` the
 * tool a call goes to) and a content between control tokens:
 *   <|channel|>analysis<|message|>thinking<|end|><|start|>assistant<|channel|>final<|message|>answer
 *   ...<|start|>assistant to=functions.bash<|channel|>commentary json<|message|>{"command":"ls"}
 * (the prompt's generation prompt opens the first, `<|start|>assistant`; the output ends at `<|return|>` or
 * `<|call|>`, end-of-generation tokens). The analysis channel is the thinking; the final channel the answer;
 * a commentary message to `functions.<name>` a tool call; a commentary message to nobody (a preamble) is
 * reported with the thinking, the contents as written one after the other. The server reads the output with the control tokens written into it
 * (`skipSpecialTokens: false`).
 */
import { randomBytes } from "node:crypto";
import type { ParsedToolCall, ToolSpec } from "./tool-calls.js";

const START = "<|start|>";
const CHANNEL = "<|channel|>";
const MESSAGE = "<|message|>";
/** where a message's content ends */
const CONTENT_ENDS = ["<|end|>", "<|call|>", "<|return|>", START];

/** A thinking budget's marks in harmony: the analysis message, its end, and what ends it and opens the answer. */
export const HARMONY_THINKING = {
  open: `${CHANNEL}analysis${MESSAGE}`,
  closedBy: "<|end|>",
  close: `<|end|>${START}assistant${CHANNEL}final${MESSAGE}`,
} as const;

/** Whether a chat template writes harmony (gpt-oss's). */
export function templateIsHarmony(source: string): boolean {
  return source.includes(CHANNEL) && source.includes(MESSAGE);
}

interface HarmonyMessage {
  readonly channel: string;
  /** `to=` of the header (a tool call's `functions.<name>`), or null */
  readonly recipient: string | null;
  readonly content: string;
  /** where the content starts and ends in the output */
  readonly start: number;
  readonly end: number;
}

function headerOf(header: string): { channel: string; recipient: string | null } {
  const channel = /<\|channel\|>\s*([^\s<]+)/.exec(header)?.[1] ?? "";
  const recipient = /\bto=([^\s<]+)/.exec(header)?.[1] ?? null;
  return { channel, recipient };
}

/** The end of a content starting at `from`: the first control token that closes it, or the text's end. */
function contentEnd(text: string, from: number): number {
  let end = text.length;
  for (const token of CONTENT_ENDS) {
    const at = text.indexOf(token, from);
    if (at >= 0 && at < end) end = at;
  }
  return end;
}

/** The output's messages, in order; a header the output ended in has none. */
function messagesOf(text: string): HarmonyMessage[] {
  const messages: HarmonyMessage[] = [];
  let at = 0;
  for (;;) {
    const open = text.indexOf(MESSAGE, at);
    if (open < 0) return messages;
    const start = open + MESSAGE.length;
    const end = contentEnd(text, start);
    messages.push({ ...headerOf(text.slice(at, open)), content: text.slice(start, end), start, end });
    if (end === text.length) return messages;
    const next = text.indexOf(START, end);
    if (next < 0) return messages;
    at = next + START.length;
  }
}

/** What chat-output.ts reads of an output: the thinking, the answer (where it is), the calls. */
export interface HarmonyOutput {
  readonly reasoning: string | null;
  readonly content: string | null;
  readonly calls: ParsedToolCall[];
  readonly answerStart: number;
  readonly contentEnd: number;
}

function callId(): string {
  return `call_${randomBytes(12).toString("hex")}`;
}

/**
 * A finished output read as harmony. An output without a single message (not harmony at all) is all
 * answer. Calls to a function the request did not offer stay out, as other formats' do; `parallel` false
 * keeps the first.
 */
export function readHarmony(text: string, offered: readonly ToolSpec[], parallel: boolean): HarmonyOutput {
  const messages = messagesOf(text);
  if (messages.length === 0) {
    return { reasoning: null, content: text, calls: [], answerStart: 0, contentEnd: text.length };
  }
  const names = new Set(offered.map((tool) => tool.name));
  let thinking = "";
  const calls: ParsedToolCall[] = [];
  let final: HarmonyMessage | null = null;
  for (const message of messages) {
    const name = message.recipient?.startsWith("functions.")
      ? message.recipient.slice("functions.".length)
      : null;
    if (name !== null) {
      if (names.has(name)) calls.push({ id: callId(), name, arguments: message.content.trim() });
    } else if (message.channel === "final") {
      final = message;
    } else {
      thinking += message.content;
    }
  }
  const reasoning = thinking.trim();
  return {
    reasoning: reasoning.length > 0 ? reasoning : null,
    content: final !== null && final.content.length > 0 ? final.content : null,
    calls: parallel ? calls : calls.slice(0, 1),
    answerStart: final?.start ?? text.length,
    contentEnd: final?.end ?? text.length,
  };
}

/**
 * readHarmony over a stream: each piece of output in, the thinking and the answer it adds out (a call's
 * arguments come whole when the output is read at its end). What could still be a control token is held
 * until the next piece tells. `answerStart`: where the answer (the final channel's content) starts.
 */
export class HarmonyStream {
  private text = "";
  /** where reading goes on: in a header (up to its <|message|>) or in a content */
  private at = 0;
  private inContent = false;
  private channel = "";
  private recipient: string | null = null;
  answerStart: number | null = null;

  push(piece: string): { reasoning: string; answer: string } {
    this.text += piece;
    return this.read(false);
  }

  finish(): { reasoning: string; answer: string } {
    return this.read(true);
  }

  private read(ended: boolean): { reasoning: string; answer: string } {
    let reasoning = "";
    let answer = "";
    for (;;) {
      if (!this.inContent) {
        const open = this.text.indexOf(MESSAGE, this.at);
        if (open < 0) return { reasoning, answer };
        ({ channel: this.channel, recipient: this.recipient } = headerOf(this.text.slice(this.at, open)));
        this.at = open + MESSAGE.length;
        this.inContent = true;
        if (this.channel === "final" && this.recipient === null) this.answerStart ??= this.at;
      }
      const end = contentEnd(this.text, this.at);
      const closed = end < this.text.length;
      // a control token may be arriving: hold from its `<|` until it shows what it is
      const held = closed || ended ? end : heldFrom(this.text, this.at);
      const out = this.text.slice(this.at, held);
      if (this.recipient === null) {
        if (this.channel === "final") answer += out;
        else reasoning += out;
      }
      this.at = held;
      if (!closed) return { reasoning, answer };
      const next = this.text.indexOf(START, end);
      if (next < 0) {
        this.at = end;
        return { reasoning, answer };
      }
      this.at = next + START.length;
      this.inContent = false;
    }
  }
}

/** Where text that may still become a control token begins (its last unclosed `<|`), else the text's end. */
function heldFrom(text: string, from: number): number {
  const unread = text.slice(from);
  const open = unread.lastIndexOf("<");
  if (open < 0) return text.length;
  const tail = unread.slice(open);
  return "<|".startsWith(tail) || (tail.startsWith("<|") && !tail.includes("|>")) ? from + open : text.length;
}
