/**
 * OpenAI's logprobs: which a request asks for, and the shapes each API reports them in. The engine gives each
 * generated token's bytes and its log-probability under the model's raw distribution (vLLM's default), with
 * the most likely alternatives at that position.
 */
import type { OutputLogprob, PromptLogprob, TokenLogprob } from "../../engine/engine-api.js";
import { ApiError } from "../errors.js";

/** The most alternatives a token may report (OpenAI's limit for top_logprobs). */
export const MAX_TOP_LOGPROBS = 20;

/** vLLM's stand-in for a log-probability of -inf, which JSON cannot carry. */
const NEG_INF_LOGPROB = -9999;

/** The request fields that ask for logprobs (chat: a boolean and top_logprobs; completions: a count). */
export interface LogprobFields {
  readonly logprobs?: boolean | number | null | undefined;
  readonly top_logprobs?: number | null | undefined;
}

/**
 * How many alternatives each generated token reports, or null for no logprobs: chat's `logprobs: true` with
 * `top_logprobs` (0 when absent), completions' `logprobs: <n>`.
 */
export function requestedLogprobs(body: LogprobFields): number | null {
  const within = (n: number, param: string): number => {
    if (n > MAX_TOP_LOGPROBS) {
      throw ApiError.badRequest(`${param} must be at most ${MAX_TOP_LOGPROBS}`, param, "invalid_value");
    }
    return n;
  };
  if (typeof body.logprobs === "number") return within(body.logprobs, "logprobs");
  if (body.logprobs === true) return within(body.top_logprobs ?? 0, "top_logprobs");
  if ((body.top_logprobs ?? 0) > 0) {
    throw ApiError.badRequest("top_logprobs requires logprobs to be true", "top_logprobs", "invalid_value");
  }
  return null;
}

const decoder = new TextDecoder("utf-8");

/** A token's text as OpenAI reports it: its bytes decoded alone (part of a character shows as U+FFFD). */
function tokenText(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

function jsonLogprob(logprob: number): number {
  return Number.isFinite(logprob) ? logprob : NEG_INF_LOGPROB;
}

function chatToken(t: TokenLogprob) {
  return { token: tokenText(t.bytes), logprob: jsonLogprob(t.logprob), bytes: Array.from(t.bytes) };
}

/** Chat Completions' `choices[].logprobs` (and each stream chunk's, for its tokens). */
export function chatLogprobs(entries: readonly OutputLogprob[]) {
  return {
    content: entries.map((e) => ({ ...chatToken(e), top_logprobs: e.top.map(chatToken) })),
    refusal: null,
  };
}

/** The Responses API's `output_text.logprobs`. */
export function responsesLogprobs(entries: readonly OutputLogprob[]) {
  return entries.map((e) => ({ ...chatToken(e), top_logprobs: e.top.map(chatToken) }));
}

/**
 * The entries of the tokens that begin within the first `bytes` bytes of the text `entries` spell (the
 * answer's text before a tool call's markup, say), given them in order.
 */
export function entriesWithin(entries: readonly OutputLogprob[], bytes: number): OutputLogprob[] {
  const within: OutputLogprob[] = [];
  let start = 0;
  for (const e of entries) {
    if (start >= bytes) break;
    within.push(e);
    start += e.bytes.length;
  }
  return within;
}

/** The entries of the tokens that begin at or after byte `from` of the text `entries` spell. */
export function entriesFrom(entries: readonly OutputLogprob[], from: number): OutputLogprob[] {
  let start = 0;
  let i = 0;
  while (i < entries.length && start < from) start += entries[i++]!.bytes.length;
  return entries.slice(i);
}

/**
 * Completions' `choices[].logprobs` with `echo`: the prompt's tokens first (the first, `firstPiece`, has no
 * logprob or alternatives: null, as OpenAI gives them), then the generated ones, offsets counted from the
 * echoed text's start.
 */
export function echoedLogprobs(
  firstPiece: Uint8Array,
  prompt: readonly (OutputLogprob | null)[],
  output: readonly OutputLogprob[],
) {
  const scored = prompt.slice(1).map((entry, i) => {
    if (entry === null) throw new Error(`the engine scored no logprob for prompt token ${i + 1}`);
    return entry;
  });
  const first = tokenText(firstPiece);
  const promptPart = completionLogprobs(scored, first.length);
  const outputPart = completionLogprobs(output, promptPart.next);
  return {
    tokens: [first, ...promptPart.logprobs.tokens, ...outputPart.logprobs.tokens],
    token_logprobs: [null, ...promptPart.logprobs.token_logprobs, ...outputPart.logprobs.token_logprobs],
    top_logprobs: [null, ...promptPart.logprobs.top_logprobs, ...outputPart.logprobs.top_logprobs],
    text_offset: [0, ...promptPart.logprobs.text_offset, ...outputPart.logprobs.text_offset],
  };
}

/**
 * Completions' `choices[].logprobs` for tokens whose text starts at character `offset` of the choice's text
 * (a stream's later chunks continue where the earlier ones ended). Returns the shape and where the next
 * token's text starts.
 */
export function completionLogprobs(entries: readonly OutputLogprob[], offset = 0) {
  const tokens: string[] = [];
  const tokenLogprobs: number[] = [];
  const topLogprobs: Record<string, number>[] = [];
  const textOffset: number[] = [];
  let at = offset;
  for (const e of entries) {
    const text = tokenText(e.bytes);
    tokens.push(text);
    tokenLogprobs.push(jsonLogprob(e.logprob));
    // OpenAI's rule for completions: the sampled token is always among them (logprobs + 1 at most)
    const top = Object.fromEntries(e.top.map((t) => [tokenText(t.bytes), jsonLogprob(t.logprob)]));
    top[text] ??= jsonLogprob(e.logprob);
    topLogprobs.push(top);
    textOffset.push(at);
    at += text.length;
  }
  return {
    logprobs: { tokens, token_logprobs: tokenLogprobs, top_logprobs: topLogprobs, text_offset: textOffset },
    next: at,
  };
}

/** One entry of vLLM's `prompt_logprobs`: by token id, its logprob, its rank and its text. */
type VllmTokenLogprobs = Record<string, { logprob: number; rank: number; decoded_token: string }>;

/**
 * vLLM's `prompt_logprobs`: per prompt token (the first null: nothing precedes it) the token's own entry and
 * its position's most likely alternatives (ranked 1, 2, ...), keyed by token id.
 */
export function vllmPromptLogprobs(entries: readonly (PromptLogprob | null)[]): (VllmTokenLogprobs | null)[] {
  return entries.map((entry, i) => {
    if (i === 0 || entry === null) return null;
    const out: VllmTokenLogprobs = {
      [String(entry.token)]: {
        logprob: jsonLogprob(entry.logprob),
        rank: entry.rank,
        decoded_token: tokenText(entry.bytes),
      },
    };
    entry.top.forEach((t, k) => {
      out[String(t.token)] = {
        logprob: jsonLogprob(t.logprob),
        rank: k + 1,
        decoded_token: tokenText(t.bytes),
      };
    });
    return out;
  });
}
