import type { Context } from "hono";
import {
  EngineRejection,
  type GenerateRequest,
  type ThinkingBudget,
  type TokenBias,
  type ToolNamer,
} from "../../engine/engine-api.js";
import { scopeToTenant } from "../programs/program-identity.js";
import { turnFields } from "../programs/turn-fields.js";
import type { ChatTurn, TurnPrograms } from "../programs/turn-programs.js";
import type { CommonBody } from "../schemas.js";
import type { ChoiceTally } from "./choice-tally.js";
import { ContextOverflow } from "./context-overflow.js";
import { type AppEnv, Generation, type GenerationDeps } from "./generation.js";
import { logitBias, withRequestBias } from "./logit-bias.js";
import type { LogprobFields } from "./logprobs.js";
import { type OutputLimit, outputTokens, samplingParams, stopTokenIds } from "./sampling.js";

/** What starting a generation needs of the server: the engine and metrics, request ids, turn programs. */
export interface GenerationContext extends GenerationDeps {
  readonly newRequestId: (c: Context<AppEnv>) => string;
  /** which program a request is a turn of (implicit programs, side requests) */
  readonly turnPrograms: TurnPrograms;
  /** biases every request samples with (`serve --logit-bias`), below its own `logit_bias` */
  readonly defaultLogitBias: readonly TokenBias[];
}

/**
 * Prompts above this many UTF-8 bytes per context token are refused untokenized: text runs 3-5 bytes per
 * token, and the long tokens some vocabularies have for runs of spaces or symbols average far below it.
 */
const MAX_BYTES_PER_TOKEN = 32;

/**
 * What chat and text completions share once the prompt is known: its length, the sampling parameters,
 * the program and turn fields, and the generation queued on the engine. `programId`: the program the client
 * names (program-identity.ts), null: none. `limit`: the output limit its API's front read (sampling.ts).
 * `chat`: what a chat request says about its turn (undefined for a raw-text prompt; turn-programs.ts).
 * `options`: a prompt given as token ids (then `prompt` is only its
 * label), whether the result carries the prompt's and the output's ids, `sibling`: the request is a
 * second or later choice of one (`n`), served as a one-off, and `awaitFirstToken`: return once the first
 * token is out even when streaming (its prompt's KV is then computed for the choices that follow).
 */
export async function startGeneration(
  c: Context<AppEnv>,
  ctx: GenerationContext,
  body: CommonBody & LogprobFields,
  programId: string | null,
  prompt: string,
  limit: OutputLimit,
  grammar: string | null,
  chat: ChatTurn | undefined,
  options: Pick<GenerateRequest, "promptTokenIds" | "returnTokenIds"> & {
    sibling?: boolean;
    awaitFirstToken?: boolean;
    /** the prompt's logprobs with this many alternatives (completions' `echo` with `logprobs`) */
    promptLogprobs?: number | null;
    /** a reasoning model's thinking cut at this many tokens (chat's `thinking_budget`) */
    thinkingBudget?: ThinkingBudget | null;
    /** control tokens written into the text (a chat format's markers) */
    preservedTokens?: readonly string[];
    /** the tool an output calls, in the model's own call format (for the TTL's per-tool times) */
    toolNamer?: ToolNamer | null;
    /** the program that spawned this request's program as a subagent, as the client names it */
    parentProgramId?: string | null;
    /** the request's choices this generation is one of (`n`) */
    tally?: ChoiceTally;
  } = {},
): Promise<{
  requestId: string;
  generation: Generation;
  /** the program the server found for a request whose client names none (turn-programs.ts) */
  implicit: {
    readonly program: { readonly programId: string; readonly cacheSalt: string | null };
    readonly isLastStep: boolean;
  } | null;
}> {
  const {
    sibling = false,
    awaitFirstToken = false,
    promptLogprobs = null,
    thinkingBudget = null,
    preservedTokens = [],
    toolNamer = null,
    parentProgramId: namedParent = null,
    tally,
    ...tokenIds
  } = options;
  // No tokenizer makes fewer tokens than this: refuse a prompt that cannot fit before tokenizing it
  // (tokenizing a 30 MB prompt blocks the event loop for seconds).
  const bytes = Buffer.byteLength(prompt, "utf8");
  if (bytes > MAX_BYTES_PER_TOKEN * ctx.engine.maxContextTokens) {
    throw new ContextOverflow(Math.ceil(bytes / MAX_BYTES_PER_TOKEN), ctx.engine.maxContextTokens, true);
  }
  const fields = turnFields(body, (name) => c.req.header(name));
  const turn = ctx.turnPrograms.programOf(
    c.get("tenant") ?? null,
    programId,
    body.cache_salt,
    fields.isLastStep,
    chat ?? null,
  );
  // a request's second and later choices (`n`) are not turns of its program: one-offs beside the first,
  // never pinned, with the same cache salt
  const program = sibling ? { programId: null, cacheSalt: turn.cacheSalt, implicit: false } : turn;
  const { implicit, ...engineProgram } = program;
  const promptTokens =
    tokenIds.promptTokenIds?.length ?? (await ctx.engine.countPromptTokens(prompt, engineProgram));
  const maxTokens = outputTokens(limit, promptTokens, ctx.engine.maxContextTokens);
  const bias = withRequestBias(ctx.defaultLogitBias, logitBias(body.logit_bias, ctx.engine.vocabSize));
  const stops = stopTokenIds(body.stop_token_ids, ctx.engine.vocabSize);
  const sampling = {
    ...samplingParams(body, maxTokens, grammar),
    ...(bias.length > 0 ? { logitBias: bias } : {}),
    ...(stops.length > 0 ? { stopTokenIds: stops } : {}),
    ...(promptLogprobs !== null ? { promptLogprobs } : {}),
    ...(thinkingBudget !== null ? { thinkingBudget } : {}),
    ...(preservedTokens.length > 0 ? { preservedTokens } : {}),
  };
  const requestId = ctx.newRequestId(c);
  // the parent's id scoped to the tenant as the program's is (tenants never link to each other's programs)
  const parentProgramId =
    namedParent === null ? null : scopeToTenant(c.get("tenant") ?? null, namedParent, null).programId;
  const request: GenerateRequest = {
    requestId,
    ...fields,
    parentProgramId,
    ...engineProgram,
    prompt,
    sampling,
    ...(chat === undefined ? {} : { priorTurns: chat.priorTurns }),
    ...(toolNamer === null ? {} : { toolNamer }),
    ...tokenIds,
  };
  try {
    const generation = await Generation.start(
      ctx,
      c,
      request,
      awaitFirstToken || body.stream !== true,
      tally,
    );
    ctx.turnPrograms.queued(program, requestId, fields.isLastStep, chat ?? null);
    const { programId, cacheSalt } = program;
    return {
      requestId,
      generation,
      implicit:
        implicit && programId !== null
          ? { program: { programId, cacheSalt: cacheSalt ?? null }, isLastStep: fields.isLastStep }
          : null,
    };
  } catch (error) {
    if (error instanceof EngineRejection && error.code === "prompt_too_long") {
      throw new ContextOverflow(promptTokens, ctx.engine.maxContextTokens);
    }
    throw error;
  }
}
