/**
 * OpenAI's harmony format (gpt-oss): the model writes messages, each a header (its channel, and `to=` the
 * tool a call goes to) and a content between control tokens:
 *   <|channel|>analysis<|message|>thinking<|end|><|start|>assistant<|channel|>final<|message|>answer
 *   ...<|start|>assistant to=functions.bash<|channel|>commentary json<|message|>{"command":"ls"}
 * (the prompt's generation prompt opens the first, `<|start|>assistant`; the output ends at `<|return|>` or
 * `<|call|>`, end-of-generation tokens). The analysis channel is the thinking; the final channel the answer;
 * a commentary message to `functions.<name>` a tool call; a commentary message to nobody (a preamble) is
 * reported with the thinking, the contents as written one after the other (output-messages.ts reads them).
 * The server reads the output with the control tokens written into it (`skipSpecialTokens: false`).
 */
import { randomBytes } from "node:crypto";
import { controlTokenMessages, type MessageSyntax, messagesIn } from "./output-messages.js";
import type { ParsedToolCall, ToolSpec } from "./tool-calls.js";

const START = "<|start|>";
const CHANNEL = "<|channel|>";
const MESSAGE = "<|message|>";
const FUNCTIONS = "functions.";

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

/** Harmony's messages: one to `functions.<name>` a call, the final channel the answer, the rest thinking. */
export const HARMONY_MESSAGES: MessageSyntax = controlTokenMessages(
  ["<|end|>", "<|call|>", "<|return|>", START],
  (header) => {
    const recipient = /\bto=([^\s<]+)/.exec(header)?.[1];
    if (recipient?.startsWith(FUNCTIONS)) return { role: "call", callee: recipient.slice(FUNCTIONS.length) };
    const channel = /<\|channel\|>\s*([^\s<]+)/.exec(header)?.[1];
    return { role: channel === "final" ? "answer" : "thinking", callee: null };
  },
);

function callId(): string {
  return `call_${randomBytes(12).toString("hex")}`;
}

/**
 * The calls of an output read as harmony, their arguments as written. Calls to a function the request did
 * not offer stay out, as other formats' do.
 */
export function harmonyCalls(text: string, offered: readonly ToolSpec[]): ParsedToolCall[] {
  const names = new Set(offered.map((tool) => tool.name));
  return messagesIn(text, HARMONY_MESSAGES).flatMap(({ callee, start, end }) =>
    callee !== null && names.has(callee)
      ? [{ id: callId(), name: callee, arguments: text.slice(start, end).trim() }]
      : [],
  );
}
