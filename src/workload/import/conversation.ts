import { tokensFromChars } from "../tokens.js";
import { roundToolS, type TraceProgram, type TraceTurn } from "../trace.js";

/** A chat message as agent trajectory files record it; content may be a string or a list of parts. */
export interface ChatMessage {
  role: string;
  content?: unknown;
  tool_calls?: unknown;
}

/** Tool time for calls whose file records none: the median tool time of swe-agent-lm32b.jsonl. */
export const FALLBACK_TOOL_S = 0.15;

export interface ImportOptions {
  /** program id; defaults to what the file records (the instance id) */
  id?: string;
  source?: string;
}

/** One model call reconstructed from a trajectory. */
export interface ModelCall {
  /** the messages sent */
  prompt: readonly ChatMessage[];
  /** the assistant message the call produced, as later prompts carry it */
  response: ChatMessage;
  tool: string | null;
  toolS: number | null;
}

/** Text of a message: string content, or the text parts of a content list, plus any tool calls. */
export function messageBody(message: ChatMessage): string {
  const { content } = message;
  let text = "";
  if (typeof content === "string") text = content;
  else if (Array.isArray(content)) {
    for (const part of content) {
      if (typeof part === "string") text += part;
      else if (typeof part?.text === "string") text += part.text;
    }
  }
  const calls = message.tool_calls;
  if (Array.isArray(calls) && calls.length > 0) text += JSON.stringify(calls);
  return text;
}

/**
 * A message as a chat template would lay it out. The exact template is unknown, so this one is minimal;
 * what matters for reuse is that a message serializes the same way in every prompt that carries it.
 */
export function serializeMessage(message: ChatMessage): string {
  return `<|${message.role}|>\n${messageBody(message)}\n`;
}

export function serializeMessages(messages: readonly ChatMessage[]): string {
  return messages.map(serializeMessage).join("");
}

export function commonPrefixLength(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/**
 * Trace program of a sequence of model calls. `cached` is the common prefix, in characters, of this
 * call's serialized prompt and the previous call's prompt + response, converted to tokens: histories
 * that elide old tool outputs break the prefix where the first elision is.
 */
export function callsToProgram(
  id: string,
  source: string | undefined,
  calls: readonly ModelCall[],
): TraceProgram {
  let previous = "";
  const turns = calls.map((call, i): TraceTurn => {
    const prompt = serializeMessages(call.prompt);
    const input = tokensFromChars(prompt.length);
    const cached = Math.min(input, tokensFromChars(commonPrefixLength(prompt, previous)));
    previous = prompt + serializeMessage(call.response);
    const isLast = i === calls.length - 1;
    return {
      input,
      cached,
      output: Math.max(1, tokensFromChars(messageBody(call.response).length)),
      tool: isLast ? null : (call.tool ?? "unknown"),
      toolS: isLast ? null : roundToolS(call.toolS ?? 0),
    };
  });
  return { id, ...(source === undefined ? {} : { source }), turns };
}
