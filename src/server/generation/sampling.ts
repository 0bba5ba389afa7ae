import type { SamplingParams } from "../../engine/engine-api.js";
import { ApiError } from "../errors.js";
import {
  type GrammarTool,
  jsonObjectGbnf,
  jsonSchemaToGbnf,
  SchemaConversionError,
  toolCallGbnf,
} from "../grammars/json-schema-gbnf.js";
import type { CommonBody, ResponseFormatInput } from "../schemas.js";
import { ContextOverflow } from "./context-overflow.js";
import { type LogprobFields, requestedLogprobs } from "./logprobs.js";
import { checkTokenIds } from "./token-ids.js";

export const DEFAULT_TEMPERATURE = 1;

function grammarOrBadRequest(param: string, build: () => string): string {
  try {
    return build();
  } catch (error) {
    if (error instanceof SchemaConversionError) throw ApiError.badRequest(error.message, param);
    throw error;
  }
}

/** GBNF for `response_format`, or null for free text; a schema it cannot enforce is a 400 naming `schemaParam`. */
export function responseFormatGrammar(
  format: ResponseFormatInput | null | undefined,
  schemaParam = "response_format.json_schema.schema",
): string | null {
  if (!format || format.type === "text") return null;
  if (format.type === "json_object") return jsonObjectGbnf();
  const schema = format.json_schema.schema;
  return grammarOrBadRequest(schemaParam, () =>
    schema === undefined ? jsonObjectGbnf() : jsonSchemaToGbnf(schema),
  );
}

/** GBNF forcing a call of one of `tools` (tool_choice "required" or a named function). */
export function forcedToolGrammar(tools: readonly GrammarTool[]): string {
  return grammarOrBadRequest("tools", () => toolCallGbnf(tools));
}

function stopList(stop: CommonBody["stop"]): string[] {
  if (stop === null || stop === undefined) return [];
  const list = typeof stop === "string" ? [stop] : stop;
  return list.filter((s) => s.length > 0);
}

/** vLLM's `stop_token_ids`, each a token id of this model (else a 400). */
export function stopTokenIds(
  ids: readonly number[] | null | undefined,
  vocabSize: number,
): readonly number[] {
  checkTokenIds(ids ?? [], vocabSize, "stop_token_ids", "stop_token_ids");
  return ids ?? [];
}

/** The most choices (`n`) one request may ask for. */
export const MAX_CHOICES = 64;

/** How many choices the request asks for (`n`, 1 by default); more than MAX_CHOICES is a 400. */
export function choiceCount(body: Pick<CommonBody, "n">): number {
  const n = body.n ?? 1;
  if (n > MAX_CHOICES) throw ApiError.badRequest(`n must be at most ${MAX_CHOICES}`, "n", "invalid_value");
  return n;
}

/**
 * The body of a request's i-th choice: the request's own, its seed (when it has one) advanced by i, so the
 * choices differ and a seeded request is reproducible.
 */
export function choiceBody<T extends Pick<CommonBody, "seed">>(body: T, i: number): T {
  return i === 0 || body.seed === null || body.seed === undefined ? body : { ...body, seed: body.seed + i };
}

/** A request's output limit, as its API's front reads it. */
export interface OutputLimit {
  /** the most tokens the client asks for; null: as many as the context leaves (as vLLM does) */
  readonly tokens: number | null;
  /** the field it came in (a refusal names it) */
  readonly field: string;
  /**
   * more than the context leaves is taken, the output ending at the context's end (clients that always ask
   * for their model's largest output, as Claude Code does); else it is refused
   */
  readonly capToContext: boolean;
}

/**
 * The one check of a request's output limit, for a prompt of `promptTokens`: a prompt that leaves no room
 * is a ContextOverflow, a limit beyond the room a 400 naming its field (unless the API caps it: the engine
 * ends every output at the context's end).
 */
export function outputTokens(limit: OutputLimit, promptTokens: number, maxContextTokens: number): number {
  const room = maxContextTokens - promptTokens;
  if (room <= 0) throw new ContextOverflow(promptTokens, maxContextTokens);
  if (limit.tokens === null) return room;
  if (limit.tokens > room && !limit.capToContext) {
    throw new ApiError(
      400,
      `This model's maximum context length is ${maxContextTokens} tokens; the prompt has ${promptTokens} tokens ` +
        `and ${limit.tokens} completion tokens were requested. Reduce the prompt or ${limit.field}.`,
      "invalid_request_error",
      "context_length_exceeded",
      limit.field,
    );
  }
  return limit.tokens;
}

/** Engine sampling parameters for a request generating at most `maxTokens` (outputTokens). */
export function samplingParams(
  body: CommonBody & LogprobFields,
  maxTokens: number,
  grammar: string | null,
): SamplingParams {
  const minTokens = body.min_tokens ?? 0;
  if (minTokens > maxTokens) {
    throw ApiError.badRequest(
      `min_tokens (${minTokens}) must be at most the completion's maximum (${maxTokens} tokens)`,
      "min_tokens",
      "invalid_value",
    );
  }
  const topK = body.top_k ?? 0;
  return {
    temperature: body.temperature ?? DEFAULT_TEMPERATURE,
    topP: body.top_p ?? 1,
    topK: Math.max(0, topK),
    minP: body.min_p ?? 0,
    presencePenalty: body.presence_penalty ?? 0,
    frequencyPenalty: body.frequency_penalty ?? 0,
    repetitionPenalty: body.repetition_penalty ?? 1,
    seed: body.seed ?? null,
    maxTokens,
    stop: stopList(body.stop),
    grammar,
    ignoreEos: body.ignore_eos ?? false,
    minTokens,
    ...(body.skip_special_tokens === false ? { skipSpecialTokens: false } : {}),
    logprobs: requestedLogprobs(body),
  };
}
