/**
 * A prompt that does not fit the model's context, said the way each client family reads "compact the
 * conversation and retry" rather than a plain failure: OpenAI's 400 `context_length_exceeded` with its
 * message (opencode matches the code and `maximum context length is N tokens`), Anthropic's 400
 * `prompt is too long: N tokens > M maximum` (Claude Code), and for a streamed Responses request a
 * `response.failed` event with that code (the only form Codex reads as a full context window).
 */
import { ApiError } from "../errors.js";

/** The Responses API's words for it (OpenAI's). */
export const RESPONSES_OVERFLOW_MESSAGE =
  "Your input exceeds the context window of this model. Please adjust your input and try again.";

/** OpenAI's words for it, about the request's `messages` or (legacy completions) its `prompt`. */
function overflowMessage(
  promptTokens: number,
  maxContextTokens: number,
  atLeast: boolean,
  input: string,
): string {
  return (
    `This model's maximum context length is ${maxContextTokens} tokens. However, your ${input} resulted in ` +
    `${atLeast ? "at least " : ""}${promptTokens} tokens. Please reduce the length of the ${input}.`
  );
}

export class ContextOverflow extends ApiError {
  /**
   * `atLeast`: `promptTokens` is a lower bound (a prompt refused by its size in bytes, never tokenized).
   */
  constructor(
    readonly promptTokens: number,
    readonly maxContextTokens: number,
    readonly atLeast = false,
  ) {
    super(
      400,
      overflowMessage(promptTokens, maxContextTokens, atLeast, "messages"),
      "invalid_request_error",
      "context_length_exceeded",
      "messages",
    );
    this.name = "ContextOverflow";
  }

  /** Anthropic's message: the largest prompt that fits leaves one token of the context for the output. */
  get anthropicMessage(): string {
    return `prompt is too long: ${this.promptTokens} tokens > ${this.maxContextTokens - 1} maximum`;
  }

  /** The same refusal for `/v1/completions`, whose input is a prompt, not messages. */
  completionsError(): ApiError {
    return new ApiError(
      400,
      overflowMessage(this.promptTokens, this.maxContextTokens, this.atLeast, "prompt"),
      "invalid_request_error",
      "context_length_exceeded",
      "prompt",
    );
  }

  /** The same refusal as the Responses API answers a request that is not streamed. */
  responsesError(): ApiError {
    return new ApiError(
      400,
      RESPONSES_OVERFLOW_MESSAGE,
      "invalid_request_error",
      "context_length_exceeded",
      "input",
    );
  }
}
