/**
 * Outputs written as a run of messages, each a header telling what it is and a body: gpt-oss's harmony
 * (harmony.ts), Functionary v3.2's and Muse Glimmer's (recipient-formats.ts). The thinking messages' bodies
 * are the reasoning, the answer's the content, and a message to a function is a call its format reads; the
 * headers and the tokens between messages are none of them. Read whole, or piece by piece as the output
 * streams: the two give the same thinking and answer.
 */

/** What a message is, told by its header, and where its body starts. */
export interface MessageHeader {
  readonly role: "thinking" | "answer" | "call";
  /** the function a call goes to; null for the thinking and the answer */
  readonly callee: string | null;
  readonly start: number;
}

/** How a format writes its messages. */
export interface MessageSyntax {
  /**
   * The header of the message at `at` (the output's start, or where a body ended); null while it is not
   * written whole, and where none follows. `ended`: the output is complete.
   */
  header(text: string, at: number, ended: boolean): MessageHeader | null;
  /** Where the body from `from` ends; -1: not (yet). */
  bodyEnd(text: string, from: number): number;
  /** Where text from `from` on may still become the body's end: the text's end when none may. */
  heldFrom(text: string, from: number): number;
}

export interface OutputMessage extends MessageHeader {
  /** where its header starts: where the text before it ends */
  readonly at: number;
  /** where its body ends */
  readonly end: number;
}

const MESSAGE = "<|message|>";

/** Where the first of `markers` stands from `from` on; -1 when none does. */
function firstOf(text: string, markers: readonly string[], from: number): number {
  let first = -1;
  for (const marker of markers) {
    const at = text.indexOf(marker, from);
    if (at !== -1 && (first === -1 || at < first)) first = at;
  }
  return first;
}

/** Where text that may still become a control token begins (its last unclosed `<|`), else the text's end. */
function unclosedControlToken(text: string, from: number): number {
  const unread = text.slice(from);
  const open = unread.lastIndexOf("<");
  if (open < 0) return text.length;
  const tail = unread.slice(open);
  return "<|".startsWith(tail) || (tail.startsWith("<|") && !tail.includes("|>")) ? from + open : text.length;
}

/**
 * Messages written between control tokens (harmony's, Muse Glimmer's): a header up to `<|message|>`, what
 * `roleOf` reads in it, then a body up to the first of `ends`.
 */
export function controlTokenMessages(
  ends: readonly string[],
  roleOf: (header: string) => Omit<MessageHeader, "start">,
): MessageSyntax {
  return {
    header(text, at) {
      const open = text.indexOf(MESSAGE, at);
      return open === -1 ? null : { ...roleOf(text.slice(at, open)), start: open + MESSAGE.length };
    },
    bodyEnd: (text, from) => firstOf(text, ends, from),
    heldFrom: unclosedControlToken,
  };
}

/** The output's messages, in order; a header the output ended in has none. */
export function messagesIn(text: string, syntax: MessageSyntax): OutputMessage[] {
  const messages: OutputMessage[] = [];
  let at = 0;
  for (;;) {
    const header = syntax.header(text, at, true);
    if (header === null) return messages;
    const end = syntax.bodyEnd(text, header.start);
    messages.push({ ...header, at, end: end === -1 ? text.length : end });
    if (end === -1) return messages;
    at = end;
  }
}

/** An output's thinking and answer, read as messages. */
export interface MessagesText {
  readonly reasoning: string | null;
  readonly content: string | null;
  /** where the answer's first message starts; the text's end without one */
  readonly answerStart: number;
  /** where the answer's last message ends */
  readonly contentEnd: number;
}

/**
 * The thinking and the answer: each its messages' bodies one after the other (the thinking trimmed). An
 * output without a single message is all answer.
 */
export function readMessageText(text: string, messages: readonly OutputMessage[]): MessagesText {
  if (messages.length === 0)
    return { reasoning: null, content: text, answerStart: 0, contentEnd: text.length };
  const bodies = (role: MessageHeader["role"]) =>
    messages
      .filter((message) => message.role === role)
      .map((message) => text.slice(message.start, message.end));
  const reasoning = bodies("thinking").join("").trim();
  const content = bodies("answer").join("");
  const answers = messages.filter((message) => message.role === "answer");
  return {
    reasoning: reasoning.length > 0 ? reasoning : null,
    content: content.length > 0 ? content : null,
    answerStart: answers[0]?.start ?? text.length,
    contentEnd: answers.at(-1)?.end ?? text.length,
  };
}

/**
 * readMessageText over a stream: each piece of output in, the thinking and the answer it adds out (calls
 * are read when the output is whole). What may still become a body's end is held until the next piece
 * tells. `answerStart`: where the answer's first message starts, once it did.
 */
export class MessageStream {
  private text = "";
  /** where reading goes on: in a header, or in the body of a message of `role` */
  private at = 0;
  private role: MessageHeader["role"] | null = null;
  private opened = false;
  answerStart: number | null = null;

  constructor(private readonly syntax: MessageSyntax) {}

  push(piece: string): { reasoning: string; answer: string } {
    this.text += piece;
    return this.read(false);
  }

  finish(): { reasoning: string; answer: string } {
    const end = this.read(true);
    if (this.opened) return end;
    this.answerStart = 0;
    return { reasoning: "", answer: this.text };
  }

  private read(ended: boolean): { reasoning: string; answer: string } {
    let reasoning = "";
    let answer = "";
    for (;;) {
      if (this.role === null) {
        const header = this.syntax.header(this.text, this.at, ended);
        if (header === null) return { reasoning, answer };
        this.role = header.role;
        this.at = header.start;
        this.opened = true;
        if (this.role === "answer") this.answerStart ??= this.at;
      }
      const end = this.syntax.bodyEnd(this.text, this.at);
      const upTo = end !== -1 ? end : ended ? this.text.length : this.syntax.heldFrom(this.text, this.at);
      const body = this.text.slice(this.at, upTo);
      if (this.role === "thinking") reasoning += body;
      else if (this.role === "answer") answer += body;
      this.at = upTo;
      if (end === -1) return { reasoning, answer };
      this.role = null;
    }
  }
}
