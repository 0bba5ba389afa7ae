/**
 * Tool-call formats whose output is a run of messages, each to a recipient, a message to a function being a
 * call of it: Functionary v3.2 (`>>>recipient\n`, `all` the user) and Muse Glimmer's ATEM (`<|start|>assistant
 * to=recipient<|message|>`, `self` its thinking, `user` the answer). The generation prompt writes the first
 * message's header up to its recipient (`>>>`, `<|start|>assistant`): the output opens with it. The output
 * is read as its messages (output-messages.ts), as harmony's is.
 */

import type { ThinkingBudget } from "../../engine/engine-api.js";
import { leadingJsonObjectEnd } from "../../tool-calls/json-objects.js";
import {
  controlTokenMessages,
  type MessageHeader,
  type MessageSyntax,
  messagesIn,
} from "./output-messages.js";
import { invokeReader, type Typed, type WrittenCall } from "./section-formats.js";
import type { CallMarkers } from "./tool-calls.js";

/** A format whose output is messages to recipients. */
interface RecipientFormat {
  /** what a template's text holds, every one of them, to tell the format */
  readonly detect: readonly string[];
  /** markers a vocabulary may hold as control tokens, to be kept in the text */
  readonly preserved: readonly string[];
  readonly messages: MessageSyntax;
  /** name and arguments of each call a message to `callee` writes in its body */
  readonly readCall: (callee: string, body: string, typed: Typed) => [unknown, unknown][];
  /**
   * A format whose model thinks (in messages to itself): where the server does not split thinking
   * (`--reasoning-format none`) its output is read as text, thinking and headers kept, and a stream may start
   * a call at these. Null: the format writes no thinking, its output is always read as messages.
   */
  readonly readAsText: CallMarkers | null;
  /** where a thinking budget counts from and to, and what ends the thinking at it; null: no thinking */
  readonly thinking: Omit<ThinkingBudget, "tokens"> | null;
}

/** a message's header: its recipient's line, after `>>>` (the generation prompt wrote the first one's) */
const FUNCTIONARY_RECIPIENT = /^(?:>>>)?([\w.-]+)\n/;
/** a message after the first: `>>>` and its recipient's line (`>>> print(1)` in text starts none) */
const FUNCTIONARY_NEXT = />>>[\w.-]+\n/;
/** the start of one that the text's end may still be */
const FUNCTIONARY_NEXT_SO_FAR = /(?:>>>[\w.-]*|>>?)$/;

/** Functionary v3.2: `name\n{...}` (`all\ntext` the user's), each message after `>>>` but the first. */
const FUNCTIONARY_MESSAGES: MessageSyntax = {
  header(text, at, ended) {
    const rest = text.slice(at);
    const line = FUNCTIONARY_RECIPIENT.exec(rest);
    if (line !== null) {
      const start = at + line[0].length;
      const recipient = line[1]!;
      return recipient === "all"
        ? { role: "answer", callee: null, start }
        : { role: "call", callee: recipient, start };
    }
    // an output opening with no recipient's line is all text to the user
    if (at > 0 || (!ended && /^[\w.-]*$/.test(rest))) return null;
    return { role: "answer", callee: null, start: at };
  },
  bodyEnd(text, from) {
    const next = text.slice(from).search(FUNCTIONARY_NEXT);
    return next === -1 ? -1 : from + next;
  },
  heldFrom(text, from) {
    const next = FUNCTIONARY_NEXT_SO_FAR.exec(text.slice(from));
    return next === null ? text.length : text.length - next[0].length;
  },
};

/** A call's arguments: the JSON object its body opens with. */
function functionaryCall(callee: string, body: string): [unknown, unknown][] {
  const end = leadingJsonObjectEnd(body);
  return end === -1 ? [] : [[callee, body.slice(0, end)]];
}

const MUSE_START = "<|start|>";
const MUSE_MESSAGE = "<|message|>";
const MUSE_ENDS = ["<|eom|>", "<|eot|>"];
const atemInvokes = invokeReader("atem:");

/** Muse Glimmer's recipients: `self` its thinking, `user` (or none) the answer, any other a function. */
function museRole(header: string): Omit<MessageHeader, "start"> {
  const recipient = /\bto=([^\s<]+)/.exec(header)?.[1] ?? "user";
  if (recipient === "self") return { role: "thinking", callee: null };
  return recipient === "user" ? { role: "answer", callee: null } : { role: "call", callee: recipient };
}

/** Formats whose output is messages to recipients, by name. */
const RECIPIENT_FORMATS = {
  // Functionary v3.2: bash\n{"command": "ls"}>>>read_file\n{"path": "a.py"}, or all\nText>>>bash\n{...}
  "functionary-v3.2": {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the template's own words, as llama.cpp tells it
    detect: [">>>all", ">>>${recipient}"],
    preserved: [">>>all"],
    messages: FUNCTIONARY_MESSAGES,
    readCall: functionaryCall,
    readAsText: null,
    thinking: null,
  },
  // Muse Glimmer: " to=self<|message|>thinking<|eom|><|start|>assistant to=bash<|message|><atem:function_calls>
  // <atem:invoke name="bash"><atem:parameter name="command">ls</atem:parameter>...</atem:function_calls><|eom|>";
  // ATEM markup in a message to `self` or `user` is text, as llama.cpp reads it
  "muse-glimmer": {
    detect: ["<atem:function_calls>", "<|eom|>"],
    preserved: [
      MUSE_START,
      MUSE_MESSAGE,
      ...MUSE_ENDS,
      "<atem:function_calls>",
      "<atem:invoke",
      "<atem:parameter",
      "</atem:parameter>",
      "</atem:invoke>",
      "</atem:function_calls>",
    ],
    messages: controlTokenMessages([...MUSE_ENDS, MUSE_START], museRole),
    readCall: (_callee, body, typed) => atemInvokes(body, typed),
    readAsText: {
      markers: ["<|eom|>", MUSE_START],
      contentOpenings: [" to=user<|message|>", " to=self<|message|>", MUSE_MESSAGE],
    },
    // at the budget its message to itself ends and one to the user opens, as harmony's final channel does
    thinking: {
      open: ` to=self${MUSE_MESSAGE}`,
      closedBy: "<|eom|>",
      close: `<|eom|>${MUSE_START}assistant to=user${MUSE_MESSAGE}`,
    },
  },
} satisfies Record<string, RecipientFormat>;

export type RecipientFormatName = keyof typeof RECIPIENT_FORMATS;

export function isRecipientFormat(format: string): format is RecipientFormatName {
  return Object.hasOwn(RECIPIENT_FORMATS, format);
}

/** The recipient format a template's text teaches its model; null: none of them. */
export function recipientFormatOf(template: string): RecipientFormatName | null {
  for (const [name, format] of Object.entries(RECIPIENT_FORMATS) as [
    RecipientFormatName,
    RecipientFormat,
  ][]) {
    if (format.detect.every((marker) => template.includes(marker))) return name;
  }
  return null;
}

/** Whether a tool-call format is a recipient format whose model thinks in messages to itself. */
export function recipientThinks(format: string): boolean {
  return recipientThinking(format) !== null;
}

/** A recipient format's thinking, as a thinking budget counts and ends it; null: none (or no such format). */
export function recipientThinking(format: string): Omit<ThinkingBudget, "tokens"> | null {
  return isRecipientFormat(format) ? RECIPIENT_FORMATS[format].thinking : null;
}

/** The markers a vocabulary may hold as control tokens, to be kept in the text. */
export function recipientMarkers(format: RecipientFormatName): string[] {
  return [...RECIPIENT_FORMATS[format].preserved];
}

/**
 * The messages the output is read as; null where it is read as text: a thinking model's whose thinking the
 * server does not split (`splitsThinking` false).
 */
export function recipientMessages(
  format: RecipientFormatName,
  splitsThinking: boolean,
): MessageSyntax | null {
  const { messages, readAsText } = RECIPIENT_FORMATS[format];
  return readAsText === null || splitsThinking ? messages : null;
}

/**
 * Where an output read as text may start a call: at a message's start, or its very start unless it opens as
 * text. (A format read as messages always has none: its stream is read by its messages.)
 */
export function recipientCallMarkers(format: RecipientFormatName): CallMarkers {
  return RECIPIENT_FORMATS[format].readAsText ?? { markers: [] };
}

/** Each call written in the output's messages, `at` where the text before its message ends. */
export function readRecipientCalls(output: string, format: RecipientFormatName, typed: Typed): WrittenCall[] {
  const { messages, readCall } = RECIPIENT_FORMATS[format];
  return messagesIn(output, messages).flatMap(({ callee, at, start, end }) =>
    callee === null
      ? []
      : readCall(callee, output.slice(start, end), typed).map(([name, args]) => ({ at, name, args })),
  );
}
