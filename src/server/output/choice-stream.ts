/**
 * A choice's output read as it streams, the same way for chat completions, Messages and Responses: a
 * reasoning model's thinking apart from the answer (`<think>` tags, or the messages of a format that writes
 * them: harmony's, the recipient formats'), a tool call's markup held out of the answer and the first call's
 * arguments given as the model writes them; at the end, what was held back, the calls, and the answer not
 * streamed yet.
 */

import type { DoneEvent } from "../generation/generation.js";
import { type ChatGeneration, outputMessagesOf, readOutput } from "./chat-output.js";
import { MessageStream } from "./output-messages.js";
import { AnswerEndStream, ReasoningStream } from "./reasoning.js";
import { StreamedToolCall } from "./streamed-tool-call.js";
import { toolCallMarkers } from "./tool-call-formats.js";
import { type ParsedToolCall, ToolCallStreamGate } from "./tool-calls.js";

/** What a piece of output adds to the stream. */
export interface StreamedPiece {
  readonly reasoning: string;
  readonly text: string;
  /** the first call, announced with this piece (its arguments follow in `args`) */
  readonly opened: { readonly id: string; readonly name: string } | null;
  readonly args: string;
}

/** What the output's end adds. */
export interface StreamEnd {
  /** thinking held back until the end */
  readonly reasoning: string;
  /** the answer's text not streamed yet */
  readonly rest: string;
  readonly calls: readonly ParsedToolCall[];
  /** the first call's arguments not streamed yet, when it was announced while streaming; else null */
  readonly liveArgs: string | null;
  /** where the answer starts in the output */
  readonly answerStart: number;
}

export class ChoiceStream {
  private readonly thinking: MessageStream | ReasoningStream;
  /** where the model closes its answer with a tag of its own (null: it does not) */
  private readonly answerEnd: AnswerEndStream | null;
  /** null: no tools, or an output read as messages, whose calls are messages of their own and come whole at the end */
  private readonly gate: ToolCallStreamGate | null;
  private readonly live: StreamedToolCall | null;
  /** the answer's characters out so far */
  private streamed = 0;

  constructor(private readonly choice: ChatGeneration) {
    const { tools, format } = choice;
    const messages = outputMessagesOf(choice);
    this.thinking =
      messages === null
        ? new ReasoningStream(choice.insideThinking, choice.thinkTags)
        : new MessageStream(messages);
    const close = choice.insideThinking === null ? undefined : choice.thinkTags.answer?.close;
    this.answerEnd = close === undefined ? null : new AnswerEndStream(close);
    this.gate =
      tools.parseFor.length === 0 || messages !== null
        ? null
        : new ToolCallStreamGate(tools.parseFor, toolCallMarkers(format));
    this.live = this.gate ? new StreamedToolCall() : null;
  }

  /** Where the answer starts in the output, once it began. */
  get answerStart(): number | null {
    return this.thinking.answerStart;
  }

  /** Whether a call was announced while streaming. */
  get callOpened(): boolean {
    return this.live?.opened === true;
  }

  push(piece: string): StreamedPiece {
    const { reasoning, answer: written } = this.thinking.push(piece);
    const answer = this.answerEnd ? this.answerEnd.push(written) : written;
    const text = this.gate ? this.gate.push(answer) : answer;
    this.streamed += text.length;
    if (!this.gate || !this.live) return { reasoning, text, opened: null, args: "" };
    const { opened, args } = this.live.push(this.gate.held);
    return {
      reasoning,
      text,
      opened: opened ? { id: this.live.id, name: this.live.name as string } : null,
      args,
    };
  }

  finish(done: DoneEvent): StreamEnd {
    const { reasoning, answer } = this.thinking.finish();
    // A call already announced is a call, even when the output ended before it closed.
    const cut = done.finishReason !== "stop" || this.callOpened;
    const { calls, contentEnd, answerStart } = readOutput(done.text, this.choice, cut);
    const from = answerStart + this.streamed;
    // an answer read as messages is their bodies, no one stretch of the output: its stream holds the rest
    const rest =
      this.thinking instanceof MessageStream ? answer : done.text.slice(from, Math.max(contentEnd, from));
    const liveArgs = this.gate && this.live?.opened ? this.live.finish(this.gate.held) : null;
    return { reasoning, rest, calls, liveArgs, answerStart };
  }
}
