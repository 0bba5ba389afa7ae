import type { TokenIdContent } from "../core/kv/token-content.js";
import type { Request, RequestSpec } from "../core/request.js";
import type {
  FinishReason,
  GenerateEvent,
  GenerateRequest,
  OutputLogprob,
  PromptLogprob,
} from "./engine-api.js";
import type { EventChannel } from "./event-channel.js";
import type { OutputText } from "./text/output-text.js";
import type { OutputTokens } from "./text/output-tokens.js";
import type { ThinkingBudgetWatch } from "./text/thinking-budget.js";

/** A generate() call in flight: its scheduler request, its tokens, its text so far and its stream. */
export interface ActiveRequest {
  readonly spec: GenerateRequest;
  /** what the scheduler is given when the loop delivers the request */
  readonly requestSpec: RequestSpec;
  /** the scheduler's request, from its delivery on (null while posted) */
  request: Request | null;
  readonly content: TokenIdContent;
  readonly output: OutputText;
  /** with `sampling.logprobs`: the generated tokens' logprobs, handed out with their text */
  readonly logprobs: OutputTokens<OutputLogprob> | null;
  /** with `returnTokenIds`: the generated tokens' ids, handed out with their text */
  readonly tokenIds: OutputTokens<number> | null;
  /** with `sampling.promptLogprobs`: each prompt position's, as its scored row comes back (null until then) */
  readonly promptLogprobs: (PromptLogprob | null)[] | null;
  readonly channel: EventChannel<GenerateEvent>;
  readonly signal: AbortSignal;
  readonly onAbort: () => void;
  firstAdmittedS: number | null;
  /** the prompt's ids went out with a delta (`returnTokenIds`) */
  promptIdsOut: boolean;
  /** the prompt's usage went out (pushPromptUsage) */
  promptUsageOut: boolean;
  /** `sampling.preservedTokens` as token ids: control tokens written into the text as their names */
  readonly preserved: ReadonlySet<number>;
  /** with `sampling.thinkingBudget`: the thinking watched, its close forced once the budget is spent */
  readonly thinking: ThinkingBudgetWatch | null;
  /** how the tool its finished output calls is read for the scheduler (turn-tool.ts); null: its client named it */
  readonly readTool: ((output: string) => string | null) | null;
  done: boolean;
}

/**
 * What the scheduler is given for a generate() call: its prompt `content`, its output capped by the room
 * the context leaves, the client's program fields, and `arrivalS` (when it reached the engine).
 */
export function requestSpecOf(
  spec: GenerateRequest,
  content: TokenIdContent,
  maxContextTokens: number,
  arrivalS: number,
): RequestSpec {
  return {
    requestId: spec.requestId,
    programId: spec.programId,
    promptTokens: content.length,
    maxOutputTokens: Math.min(spec.sampling.maxTokens, maxContextTokens - content.length),
    isLastStep: spec.isLastStep,
    toolHint: spec.toolHint,
    ...(spec.retentionHints ? { retentionHints: spec.retentionHints } : {}),
    ...(spec.priorTurns === undefined ? {} : { priorTurns: spec.priorTurns }),
    ...(spec.parentProgramId ? { parentProgramId: spec.parentProgramId } : {}),
    content,
    arrivalS,
  };
}

/** The generate() calls in flight, by request id. */
export type ActiveRequests = Map<string, ActiveRequest>;

/**
 * Streams new text with the logprobs and ids of the tokens it carries (the first delta with the prompt's
 * ids too). `ended`: generation is over, and every sampled token's entries not out yet go out: the
 * end-of-generation token's, and a stop string's tokens, whose text is cut (one entry per sampled token, as
 * usage counts them).
 */
export function pushDelta(active: ActiveRequest, text: string, ended: boolean): void {
  const emitted = active.output.emittedText.length;
  const take = <T>(tokens: OutputTokens<T> | null): T[] =>
    tokens === null ? [] : ended ? tokens.releaseAll() : tokens.release(emitted);
  const logprobs = take(active.logprobs);
  const tokenIds = take(active.tokenIds);
  if (text.length === 0 && logprobs.length === 0 && tokenIds.length === 0) return;
  const promptIds = active.tokenIds !== null && !active.promptIdsOut && active.request !== null;
  if (promptIds) active.promptIdsOut = true;
  active.channel.push({
    type: "delta",
    text,
    ...(logprobs.length > 0 ? { logprobs } : {}),
    ...(tokenIds.length > 0 ? { tokenIds } : {}),
    ...(promptIds ? { promptTokenIds: tokenIdsOf(active.content, active.request!.promptTokens).prompt } : {}),
  });
}

/**
 * The prompt's usage, once the scheduler counted its cached tokens (its first step ran): streams tell their
 * client the prompt's size and cache before the reply (Anthropic's `message_start`).
 */
export function pushPromptUsage(active: ActiveRequest): void {
  const r = active.request;
  if (active.promptUsageOut || active.done || r === null || r.cachedTokens === null) return;
  active.promptUsageOut = true;
  active.channel.push({
    type: "delta",
    text: "",
    promptUsage: { promptTokens: r.promptTokens, cachedTokens: r.cachedTokens },
  });
}

/** The request's stream fails with `error` (a failed step, a bad sampler); it leaves the table. */
export function failActive(active: ActiveRequest, table: ActiveRequests, error: unknown): void {
  if (active.done) return;
  active.done = true;
  table.delete(active.spec.requestId);
  active.signal.removeEventListener("abort", active.onAbort);
  active.channel.fail(error);
}

function tokenIdsOf(content: TokenIdContent, promptTokens: number): { prompt: number[]; output: number[] } {
  const ids = Array.from({ length: content.length }, (_, pos) => content.tokenAt(pos));
  return { prompt: ids.slice(0, promptTokens), output: ids.slice(promptTokens) };
}

/** The done event of a request that ended for `reason` at `nowS`: usage and timings as the scheduler saw them. */
export function doneEvent(active: ActiveRequest, reason: FinishReason, nowS: number): GenerateEvent {
  const r = active.request;
  if (r === null) return abortedBeforeStart(active.requestSpec.promptTokens);
  const finishS = r.finishS ?? nowS;
  const e2eS = Math.max(0, finishS - r.arrivalS);
  const admittedS = active.firstAdmittedS ?? r.admittedS;
  return {
    type: "done",
    finishReason: reason,
    text: reason === "abort" ? active.output.emittedText : active.output.text,
    stopSequence: reason === "stop" ? active.output.stopString : null,
    usage: {
      promptTokens: r.promptTokens,
      completionTokens: r.numOutputTokens,
      cachedTokens: r.cachedTokens ?? 0,
    },
    queueS: Math.max(0, (admittedS ?? finishS) - r.arrivalS),
    ttftS: r.firstTokenS === null ? null : Math.max(0, r.firstTokenS - r.arrivalS),
    e2eS,
    programJctS:
      active.spec.isLastStep && reason !== "abort" ? Math.max(0, finishS - r.program.firstArrivalS) : null,
    ...(active.logprobs ? { logprobs: active.logprobs.handedOut } : {}),
    ...(active.spec.returnTokenIds ? { tokenIds: tokenIdsOf(active.content, r.promptTokens) } : {}),
    ...(active.promptLogprobs ? { promptLogprobs: active.promptLogprobs } : {}),
  };
}

/** The done event of a request whose client left before it was queued. */
export function abortedBeforeStart(promptTokens: number): GenerateEvent {
  return {
    type: "done",
    finishReason: "abort",
    text: "",
    usage: { promptTokens, completionTokens: 0, cachedTokens: 0 },
    queueS: 0,
    ttftS: null,
    e2eS: 0,
    programJctS: null,
  };
}
