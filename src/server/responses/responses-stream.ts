/**
 * A streamed response as the Responses API's server-sent events (`event:` and `data:` lines, each
 * payload with its `type` and `sequence_number`): created, in_progress, then per output item its
 * added / delta / done events (text as a message item, each call as a function_call item, the first
 * call's arguments streamed while the model writes them), then completed or incomplete with the whole
 * response and its usage.
 */

import type { OutputLogprob } from "../../engine/engine-api.js";
import { OutputTokens } from "../../engine/text/output-tokens.js";
import { type ApiError, errorBody, toApiError } from "../errors.js";
import type { DoneEvent } from "../generation/generation.js";
import { responsesLogprobs } from "../generation/logprobs.js";
import type { ChatGeneration } from "../output/chat-output.js";
import { ChoiceStream } from "../output/choice-stream.js";
import type { ParsedToolCall } from "../output/tool-calls.js";
import {
  callItem,
  type MessageItem,
  messageItem,
  newItemId,
  type OutputItem,
  outputText,
  type ResponseMeta,
  type ResponseObject,
  type ResponseStatus,
  reasoningItem,
  reasoningText,
  responseObject,
  responseStatus,
} from "./responses-output.js";
import { wantsTextLogprobs } from "./responses-schema.js";
import type { OfferedTools } from "./responses-tools.js";

/** One event of a response as its `event:` and `data:` lines; `sequence`: its `sequence_number`. */
export function responseFrame(type: string, sequence: number, fields: Record<string, unknown>): string {
  const data = { type, sequence_number: sequence, ...fields };
  return `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
}

/** The events of one response, numbered, and the output items they have announced. */
export class ResponseEvents {
  private sequence = 0;
  readonly items: OutputItem[] = [];
  private text: { id: string; index: number; text: string; logprobs: OutputLogprob[] } | null = null;
  private thinking: {
    at: { item_id: string; output_index: number; content_index: 0 };
    text: string;
    heldWhitespace: string;
  } | null = null;

  /**
   * `withLogprobs`: the request included "message.output_text.logprobs"; `tools`: what it offered, by
   * which its calls are named
   */
  constructor(
    private readonly withLogprobs: boolean,
    private readonly tools: OfferedTools,
  ) {}
  private call: { id: string; index: number; callId: string; name: string; custom: boolean } | null = null;

  frame(type: string, fields: Record<string, unknown>): string {
    return responseFrame(type, this.sequence++, fields);
  }

  /**
   * A reasoning model's thinking, into a reasoning item opened by the first piece, streamed as its
   * `reasoning_text` part's deltas (as Codex reads them). Whitespace at the end of a piece is held until more
   * thinking follows, so the deltas add up to the item's text, trimmed as the whole response's is.
   */
  thinkingDelta(delta: string): string[] {
    if (delta.length === 0) return [];
    const frames: string[] = [];
    if (this.thinking === null) {
      const id = newItemId("rs");
      const index = this.items.length;
      const at = { item_id: id, output_index: index, content_index: 0 } as const;
      this.thinking = { at, text: "", heldWhitespace: "" };
      const added = reasoningItem(id, "");
      this.items.push(added);
      frames.push(this.frame("response.output_item.added", { output_index: index, item: added }));
      frames.push(this.frame("response.content_part.added", { ...at, part: reasoningText("") }));
    }
    const pending = this.thinking.heldWhitespace + delta;
    const shown = pending.trimEnd();
    this.thinking.heldWhitespace = pending.slice(shown.length);
    if (shown.length === 0) return frames;
    this.thinking.text += shown;
    frames.push(this.frame("response.reasoning_text.delta", { ...this.thinking.at, delta: shown }));
    return frames;
  }

  /** Ends the reasoning item, if one is open. */
  endThinking(): string[] {
    if (this.thinking === null) return [];
    const { at, text } = this.thinking;
    this.thinking = null;
    const item = reasoningItem(at.item_id, text);
    this.items[at.output_index] = item;
    return [
      this.frame("response.reasoning_text.done", { ...at, text }),
      this.frame("response.content_part.done", { ...at, part: reasoningText(text) }),
      this.frame("response.output_item.done", { output_index: at.output_index, item }),
    ];
  }

  /** Text of the message item (opened by the first), with the logprobs of the tokens it carries. */
  textDelta(delta: string, logprobs: readonly OutputLogprob[] = []): string[] {
    const frames: string[] = this.endThinking();
    if (this.text === null) {
      const id = newItemId("msg");
      const index = this.items.length;
      this.text = { id, index, text: "", logprobs: [] };
      const added: MessageItem = { ...messageItem(id, "", "in_progress"), content: [] };
      this.items.push(added);
      frames.push(this.frame("response.output_item.added", { output_index: index, item: added }));
      frames.push(
        this.frame("response.content_part.added", {
          item_id: id,
          output_index: index,
          content_index: 0,
          part: outputText(""),
        }),
      );
    }
    this.text.text += delta;
    this.text.logprobs.push(...logprobs);
    frames.push(
      this.frame("response.output_text.delta", {
        item_id: this.text.id,
        output_index: this.text.index,
        content_index: 0,
        delta,
        logprobs: responsesLogprobs(logprobs),
      }),
    );
    return frames;
  }

  /** Ends the message item, if one is open. */
  endText(status: ResponseStatus): string[] {
    if (this.text === null) return [];
    const { id, index, text } = this.text;
    const logprobs = this.withLogprobs ? this.text.logprobs : undefined;
    this.text = null;
    const item = messageItem(id, text, status, logprobs);
    this.items[index] = item;
    const at = { item_id: id, output_index: index, content_index: 0 };
    return [
      this.frame("response.output_text.done", { ...at, text, logprobs: responsesLogprobs(logprobs ?? []) }),
      this.frame("response.content_part.done", { ...at, part: outputText(text, logprobs) }),
      this.frame("response.output_item.done", { output_index: index, item }),
    ];
  }

  startCall(callId: string, name: string): string[] {
    const frames = [...this.endThinking(), ...this.endText("completed")];
    const added = callItem({ id: callId, name, arguments: "" }, "in_progress", this.tools);
    const index = this.items.length;
    this.call = { id: added.id, index, callId, name, custom: added.type === "custom_tool_call" };
    this.items.push(added);
    frames.push(this.frame("response.output_item.added", { output_index: index, item: added }));
    return frames;
  }

  /** The open call's arguments as the model writes them; a custom tool's input comes whole at its end. */
  callArguments(delta: string): string[] {
    if (this.call === null || this.call.custom || delta.length === 0) return [];
    const { id, index } = this.call;
    return [
      this.frame("response.function_call_arguments.delta", { item_id: id, output_index: index, delta }),
    ];
  }

  /** Ends the open call with its final arguments. */
  endCall(args: string, status: ResponseStatus): string[] {
    if (this.call === null) return [];
    const { id, index, callId, name } = this.call;
    this.call = null;
    const item = callItem({ id: callId, name, arguments: args }, status, this.tools, id);
    this.items[index] = item;
    const at = { item_id: id, output_index: index };
    const done =
      item.type === "custom_tool_call"
        ? [
            this.frame("response.custom_tool_call_input.delta", { ...at, delta: item.input }),
            this.frame("response.custom_tool_call_input.done", { ...at, input: item.input }),
          ]
        : [this.frame("response.function_call_arguments.done", { ...at, name: item.name, arguments: args })];
    return [...done, this.frame("response.output_item.done", { output_index: index, item })];
  }

  wholeCall(call: ParsedToolCall, status: ResponseStatus): string[] {
    return [
      ...this.startCall(call.id, call.name),
      ...this.callArguments(call.arguments),
      ...this.endCall(call.arguments, status),
    ];
  }
}

/** What a background response's run learns from its event stream besides the finished response. */
export interface BackgroundHooks {
  /** the engine's first event came: the response is in_progress now */
  readonly onStarted: (response: ResponseObject) => void;
  /** the generation failed: the response, failed with its `error` */
  readonly onFailed: (response: ResponseObject) => void;
}

/** A failed response's `error.code` (OpenAI's codes) for what went wrong. */
function failureCode(error: ApiError): string {
  return error.status === 429 ? "rate_limit_exceeded" : "server_error";
}

/**
 * The event stream; `onDone` gets the finished response (to store it) and the engine's done event.
 * `background`: the response is created `queued` (`response.created`, `response.queued`), turns
 * `in_progress` at the engine's first event, and an error ends it with `response.failed` (no `error` event).
 */
export async function* responseEventStream(
  choice: ChatGeneration,
  meta: ResponseMeta,
  onDone: (response: ResponseObject, done: DoneEvent) => void,
  background?: BackgroundHooks,
): AsyncGenerator<string> {
  const { generation } = choice;
  const events = new ResponseEvents(wantsTextLogprobs(meta.body), meta.tools);
  const inProgress = { response: responseObject(meta, "in_progress", [], null) };
  if (background === undefined) {
    yield events.frame("response.created", inProgress);
    yield events.frame("response.in_progress", inProgress);
  } else {
    const queued = { response: responseObject(meta, "queued", [], null) };
    yield events.frame("response.created", queued);
    yield events.frame("response.queued", queued);
  }
  let started = background === undefined;
  const stream = new ChoiceStream(choice);
  // the output so far
  let output = "";
  // the output's token logprobs, in its bytes: a text delta takes those of the tokens it begins to carry,
  // from the answer's start on (the thinking's tokens are not the text's)
  const logprobs = new OutputTokens<OutputLogprob>();
  let outputBytes = 0;
  let streamedBytes: number | null = null;
  const textDelta = (text: string, answerStart: number) => {
    if (streamedBytes === null) {
      streamedBytes = Buffer.byteLength(output.slice(0, answerStart));
      logprobs.release(streamedBytes);
    }
    streamedBytes += Buffer.byteLength(text);
    return events.textDelta(text, logprobs.release(streamedBytes));
  };
  try {
    for await (const event of generation.events()) {
      if (!started && background !== undefined) {
        started = true;
        background.onStarted(inProgress.response);
        yield events.frame("response.in_progress", inProgress);
      }
      if (event.type === "delta") {
        output += event.text;
        for (const entry of event.logprobs ?? []) {
          logprobs.add(entry, outputBytes);
          outputBytes += entry.bytes.length;
        }
        const { reasoning, text, opened, args } = stream.push(event.text);
        yield* events.thinkingDelta(reasoning);
        if (text.length > 0) yield* textDelta(text, stream.answerStart ?? 0);
        if (opened) yield* events.startCall(opened.id, opened.name);
        yield* events.callArguments(args);
        continue;
      }
      const status = responseStatus(event);
      const { reasoning, rest, calls, liveArgs, answerStart } = stream.finish(event);
      yield* events.thinkingDelta(reasoning);
      yield* events.endThinking();
      if (rest.trim().length > 0 && liveArgs === null) yield* textDelta(rest, answerStart);
      yield* events.endText(status);
      for (const [index, call] of calls.entries()) {
        if (index === 0 && liveArgs !== null) {
          yield* events.callArguments(liveArgs);
          yield* events.endCall(call.arguments, status);
        } else {
          yield* events.wholeCall(call, status);
        }
      }
      const response = responseObject(meta, status, events.items, event.usage);
      onDone(response, event);
      const type = status === "completed" ? "response.completed" : "response.incomplete";
      yield events.frame(type, { response });
    }
  } catch (error) {
    const apiError = toApiError(error);
    if (background !== undefined) {
      const failure = { code: failureCode(apiError), message: apiError.message };
      const response = responseObject(meta, "failed", [], null, failure);
      background.onFailed(response);
      yield events.frame("response.failed", { response });
      return;
    }
    const { error: detail } = errorBody(apiError);
    const { type, code, message, param } = detail;
    // OpenAI's SDKs read the fields flat; the Open Responses spec nests them under `error`.
    yield events.frame("error", { code, message, param, error: { type, code, message, param } });
  }
}

/** A response that failed before it started: created, then failed with `error` (how Codex learns the context is full). */
export async function* failedResponseEvents(
  meta: ResponseMeta,
  error: { code: string; message: string },
): AsyncGenerator<string> {
  const events = new ResponseEvents(false, meta.tools);
  yield events.frame("response.created", { response: responseObject(meta, "in_progress", [], null) });
  yield events.frame("response.failed", { response: responseObject(meta, "failed", [], null, error) });
}
