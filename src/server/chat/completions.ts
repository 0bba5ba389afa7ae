import type { Context } from "hono";
import type { GenerateUsage } from "../../engine/engine-api.js";
import { ApiError, errorBody, toApiError } from "../errors.js";
import { IndexedRequestIds, startChoiceGroup } from "../generation/choice-group.js";
import { ContextOverflow } from "../generation/context-overflow.js";
import {
  type AppEnv,
  type DeltaEvent,
  type Generation,
  openAIFinishReason,
  openAIUsage,
  SSE_DONE,
  sseData,
  sseResponse,
  sumUsage,
  unixSeconds,
} from "../generation/generation.js";
import { completionLogprobs, echoedLogprobs, vllmPromptLogprobs } from "../generation/logprobs.js";
import { choiceBody, choiceCount } from "../generation/sampling.js";
import { startGeneration } from "../generation/start-generation.js";
import { outputGrammar } from "../grammars/structured-outputs.js";
import { type RequestProgram, requestProgramOf } from "../programs/program-identity.js";
import { type CompletionBody, completionSchema } from "../schemas.js";
import { checkModel, type RequestContext, readJsonBody } from "./chat-completions.js";
import { type CompletionPrompt, completionPrompts } from "./completion-prompts.js";

/** OpenAI's (and vLLM's) default for text completions; chat completions may fill the context. */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;

/** `POST /v1/completions`: raw prompts (no chat template), `n` choices per prompt in order. */
export async function completions(c: Context<AppEnv>, ctx: RequestContext): Promise<Response> {
  const body = completionSchema.parse(await readJsonBody(c));
  const model = checkModel(ctx, body.model);
  // echo with logprobs, or vLLM's prompt_logprobs: the prompt's tokens' logprobs (computed whole, not from cache)
  const echoesLogprobs = (body.echo ?? false) && body.logprobs != null;
  const promptTop = Math.max(echoesLogprobs ? body.logprobs! : -1, body.prompt_logprobs ?? -1);
  const scoresPrompt = promptTop >= 0;
  if (scoresPrompt && body.stream) {
    throw ApiError.badRequest(
      "the prompt's logprobs (echo with logprobs, prompt_logprobs) are not supported when streaming",
      body.prompt_logprobs != null ? "prompt_logprobs" : "echo",
      "unsupported_value",
    );
  }
  if (body.suffix) throw ApiError.badRequest("suffix is not supported", "suffix", "unsupported_value");
  if ((body.best_of ?? 1) !== 1) throw ApiError.badRequest("only best_of=1 is supported", "best_of");
  const prompts = completionPrompts(body.prompt, ctx.engine.vocabSize);
  const returnTokenIds = body.return_token_ids ?? false;
  const n = choiceCount(body);
  const generations = await startAll(c, ctx, body, prompts, n, {
    program: requestProgramOf("completions", body, (name) => c.req.header(name)),
    // echo's logprobs name the prompt's first token by its id
    returnTokenIds: returnTokenIds || echoesLogprobs,
    promptLogprobs: scoresPrompt ? promptTop : null,
  });
  const meta = {
    id: `cmpl-${generations[0]!.requestId}`,
    object: "text_completion",
    created: unixSeconds(),
    model,
    system_fingerprint: ctx.systemFingerprint,
  };
  // choice i is the (i mod n)-th of prompt i / n, as OpenAI numbers them
  // a token-id prompt echoes as its text
  const echoOf = (i: number) => {
    const prompt = prompts[Math.floor(i / n)]!;
    return !body.echo ? "" : typeof prompt === "string" ? prompt : ctx.engine.detokenize(prompt);
  };
  const abortAll = () => {
    for (const g of generations) g.generation.abort();
  };

  if (body.stream) {
    const includeUsage = body.stream_options?.include_usage ?? false;
    const usageField = includeUsage ? { usage: null } : {};
    // `ids`: with return_token_ids, the ids of the tokens the chunk carries (and, first, the prompt's)
    const chunk = (
      index: number,
      text: string,
      finish: string | null = null,
      logprobs: unknown = null,
      ids: Pick<DeltaEvent, "tokenIds" | "promptTokenIds"> = {},
    ) =>
      sseData({
        ...meta,
        choices: [
          {
            index,
            text,
            logprobs,
            finish_reason: finish,
            ...(ids.promptTokenIds ? { prompt_token_ids: ids.promptTokenIds } : {}),
            ...(ids.tokenIds ? { token_ids: ids.tokenIds } : {}),
          },
        ],
        ...usageField,
      });
    async function* frames(): AsyncGenerator<string> {
      const usages: GenerateUsage[] = [];
      try {
        for (const [index, { generation }] of generations.entries()) {
          if (echoOf(index)) yield chunk(index, echoOf(index));
          let textOffset = 0;
          for await (const event of generation.events()) {
            if (event.type === "delta") {
              let logprobs = null;
              if (event.logprobs) {
                const converted = completionLogprobs(event.logprobs, textOffset);
                textOffset = converted.next;
                logprobs = converted.logprobs;
              }
              if (event.text.length > 0 || logprobs || event.tokenIds) {
                yield chunk(index, event.text, null, logprobs, event);
              }
              continue;
            }
            usages.push(event.usage);
            yield chunk(index, "", openAIFinishReason(event.finishReason));
          }
        }
        if (includeUsage) yield sseData({ ...meta, choices: [], usage: openAIUsage(sumUsage(usages)) });
      } catch (error) {
        yield sseData(errorBody(toApiError(error)));
      }
      yield SSE_DONE;
    }
    return sseResponse(frames(), abortAll);
  }

  const dones = await Promise.all(generations.map((g) => g.generation.done()));
  const choices = dones.map((done, index) => {
    if (done === null) throw new Error("the engine ended the request without a result");
    return {
      index,
      text: echoOf(index) + done.text,
      logprobs: !done.logprobs
        ? null
        : echoesLogprobs && done.promptLogprobs && done.tokenIds
          ? echoedLogprobs(
              ctx.engine.tokenPieces(done.tokenIds.prompt.slice(0, 1))[0]!,
              done.promptLogprobs,
              done.logprobs,
            )
          : completionLogprobs(done.logprobs).logprobs,
      finish_reason: openAIFinishReason(done.finishReason),
      ...(body.prompt_logprobs != null && done.promptLogprobs
        ? { prompt_logprobs: vllmPromptLogprobs(done.promptLogprobs) }
        : {}),
      ...(returnTokenIds && done.tokenIds
        ? { prompt_token_ids: done.tokenIds.prompt, token_ids: done.tokenIds.output }
        : {}),
    };
  });
  return c.json({
    ...meta,
    choices,
    usage: openAIUsage(sumUsage(dones.map((done) => done!.usage))),
  });
}

/**
 * Queues `n` generations per prompt (a choice's seed advanced by its index among the prompt's). A client's
 * X-Request-Id names the first; the others get it with their index appended, as request ids must be
 * unique. If one cannot start, those already queued end.
 */
async function startAll(
  c: Context<AppEnv>,
  ctx: RequestContext,
  body: CompletionBody,
  prompts: readonly CompletionPrompt[],
  n: number,
  options: { program: RequestProgram; returnTokenIds: boolean; promptLogprobs: number | null },
): Promise<{ requestId: string; generation: Generation }[]> {
  const { program, ...rest } = options;
  const started: { requestId: string; generation: Generation }[] = [];
  const grammar = outputGrammar(body)?.grammar ?? null;
  const ids = new IndexedRequestIds();
  try {
    for (const [p, prompt] of prompts.entries()) {
      const group = await startChoiceGroup(n, async (k, awaitFirstToken, tally) => {
        const i = p * n + k;
        const generation = await startGeneration(
          c,
          ids.contextFor(ctx, i),
          choiceBody(body, k),
          program.id,
          typeof prompt === "string" ? prompt : `<${prompt.length} token ids>`,
          {
            tokens: body.max_tokens ?? DEFAULT_COMPLETION_MAX_TOKENS,
            field: "max_tokens",
            capToContext: false,
          },
          grammar,
          undefined,
          {
            ...(typeof prompt === "string" ? {} : { promptTokenIds: prompt }),
            ...rest,
            sibling: k > 0,
            awaitFirstToken,
            parentProgramId: program.parentId,
            tally,
          },
        );
        ids.started(i, generation.requestId);
        return generation;
      });
      started.push(...group);
    }
  } catch (error) {
    for (const s of started) s.generation.abort();
    throw error instanceof ContextOverflow ? error.completionsError() : error;
  }
  return started;
}
