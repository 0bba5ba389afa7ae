/**
 * Tool-call formats whose output is a run of messages, each to a recipient, a message to a function being a
 * call of it: Functionary v3.2 (`>>>recipient\n`, `all` the user) and Muse Glimmer's ATEM (`<|start|>assistant
 * to=recipient<|message|>`, `self` its thinking, `user` the answer). The generation prompt writes the first
 * message's header up to its recipient (`>>>`, `<|start|>assistant`): the output opens with it.
 */
import { leadingJsonObjectEnd } from "../core/tools/json-objects.js";
import { invokeReader, type Typed, type WrittenCall } from "./section-formats.js";
import type { CallMarkers } from "./tool-calls.js";

/** A format whose output is messages to recipients, its calls read by `read`. */
interface RecipientFormat {
  /** what a template's text holds, every one of them, to tell the format */
  readonly detect: readonly string[];
  /** markers a vocabulary may hold as control tokens, to be kept in the text */
  readonly preserved: readonly string[];
  /** where a message after the first may start */
  readonly messageStarts: readonly string[];
  /** how the output opens when its first message is not a call */
  readonly contentOpenings: readonly string[];
  /** each call in the output's messages from `from` on, `at` where the text before its message ends */
  readonly read: (output: string, from: number, typed: Typed) => WrittenCall[];
}

const FUNCTIONARY_NEXT = ">>>";

/** Functionary v3.2: `name\n{...}` (`all\ntext` the user's), each message after `>>>` but the first. */
function functionaryCalls(output: string, from: number): WrittenCall[] {
  const calls: WrittenCall[] = [];
  let at = from;
  let recipientAt = from;
  for (;;) {
    const newline = output.indexOf("\n", recipientAt);
    if (newline === -1) return calls;
    const recipient = output.slice(recipientAt, newline);
    let end = newline + 1;
    if (recipient !== "all") {
      // the object's own end, not the next `>>>`: its strings may hold one
      const args = output.slice(end);
      const argsEnd = leadingJsonObjectEnd(args);
      if (argsEnd !== -1) {
        calls.push({ at, name: recipient, args: args.slice(0, argsEnd) });
        end += argsEnd;
      }
    }
    at = output.indexOf(FUNCTIONARY_NEXT, end);
    if (at === -1) return calls;
    recipientAt = at + FUNCTIONARY_NEXT.length;
  }
}

const MUSE_START = "<|start|>";
const MUSE_MESSAGE = "<|message|>";
const MUSE_ENDS = ["<|eom|>", "<|eot|>", MUSE_START];
/** recipients that are no function: the model's thinking, and the user */
const MUSE_NOT_FUNCTIONS = ["self", "user"];
const atemInvokes = invokeReader("atem:");

/** Where the first of `markers` stands from `from` on; the text's end when none does. */
function firstOf(text: string, markers: readonly string[], from: number): number {
  let first = text.length;
  for (const marker of markers) {
    const at = text.indexOf(marker, from);
    if (at !== -1 && at < first) first = at;
  }
  return first;
}

/**
 * Muse Glimmer: `<|start|>assistant to=bash<|message|><atem:function_calls><atem:invoke name="bash">
 * <atem:parameter name="command">ls</atem:parameter>...</atem:function_calls><|eom|>`; ATEM markup in a message
 * to `self` or `user` is text, as llama.cpp reads it.
 */
function museCalls(output: string, from: number, typed: Typed): WrittenCall[] {
  const calls: WrittenCall[] = [];
  let at = from;
  let header = from;
  for (;;) {
    const open = output.indexOf(MUSE_MESSAGE, header);
    if (open === -1) return calls;
    const recipient = /\bto=([^\s<]+)/.exec(output.slice(header, open))?.[1];
    const body = open + MUSE_MESSAGE.length;
    const end = firstOf(output, MUSE_ENDS, body);
    if (recipient !== undefined && !MUSE_NOT_FUNCTIONS.includes(recipient)) {
      for (const [name, args] of atemInvokes(output.slice(body, end), typed)) calls.push({ at, name, args });
    }
    const next = output.indexOf(MUSE_START, end);
    if (next === -1) return calls;
    at = end;
    header = next + MUSE_START.length;
  }
}

/** Formats whose output is messages to recipients, by name. */
const RECIPIENT_FORMATS = {
  // Functionary v3.2: bash\n{"command": "ls"}>>>read_file\n{"path": "a.py"}, or all\nText>>>bash\n{...}
  "functionary-v3.2": {
    // biome-ignore lint/suspicious/noTemplateCurlyInString: the template's own words, as llama.cpp tells it
    detect: [">>>all", ">>>${recipient}"],
    preserved: [">>>all"],
    messageStarts: [FUNCTIONARY_NEXT],
    contentOpenings: ["all\n"],
    read: functionaryCalls,
  },
  // Muse Glimmer: " to=self<|message|>thinking<|eom|><|start|>assistant to=bash<|message|><atem:function_calls>..."
  "muse-glimmer": {
    detect: ["<atem:function_calls>", "<|eom|>"],
    preserved: [
      MUSE_START,
      MUSE_MESSAGE,
      "<|eom|>",
      "<|eot|>",
      "<atem:function_calls>",
      "<atem:invoke",
      "<atem:parameter",
      "</atem:parameter>",
      "</atem:invoke>",
      "</atem:function_calls>",
    ],
    messageStarts: ["<|eom|>", MUSE_START],
    contentOpenings: [" to=user<|message|>", " to=self<|message|>", MUSE_MESSAGE],
    read: museCalls,
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

/** The markers a vocabulary may hold as control tokens, to be kept in the text. */
export function recipientMarkers(format: RecipientFormatName): string[] {
  return [...RECIPIENT_FORMATS[format].preserved];
}

/** Where a streamed output may start a call: at a message's start, or its very start unless it opens as text. */
export function recipientCallMarkers(format: RecipientFormatName): CallMarkers {
  const { messageStarts, contentOpenings } = RECIPIENT_FORMATS[format];
  return { markers: messageStarts, contentOpenings };
}

/** Each call written in the output's messages from `from` on, `at` where the text before its message ends. */
export function readRecipientCalls(
  output: string,
  from: number,
  format: RecipientFormatName,
  typed: Typed,
): WrittenCall[] {
  return RECIPIENT_FORMATS[format].read(output, from, typed);
}
