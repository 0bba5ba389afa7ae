/**
 * `POST /v1/chat/completions`, and what Messages and Responses share once their request is a chat request:
 * the model check, the tools, the prompt rendered (a continued last message included), the generation
 * started. A finished output is read in chat-output.ts, a stream written in chat-stream.ts.
 */
import type { Context } from "hono";
import type { ThinkingBudget } from "../../engine/engine-api.js";
import { MAX_JSON_DEPTH, tooDeepPath } from "../../tool-calls/json-depth.js";
import { ApiError } from "../errors.js";
import { IndexedRequestIds, startChoiceGroup } from "../generation/choice-group.js";
import type { ChoiceTally } from "../generation/choice-tally.js";
import { type AppEnv, openAIUsage, sseResponse, sumUsage, unixSeconds } from "../generation/generation.js";
import { chatLogprobs, vllmPromptLogprobs } from "../generation/logprobs.js";
import { choiceBody, choiceCount, forcedToolGrammar, type OutputLimit } from "../generation/sampling.js";
import { type GenerationContext, startGeneration } from "../generation/start-generation.js";
import { outputGrammar } from "../grammars/structured-outputs.js";
import {
  type ChatGeneration,
  finishReason,
  readOutput,
  type ToolSetup,
  toolCallsJson,
} from "../output/chat-output.js";
import { HARMONY_THINKING } from "../output/harmony.js";
import { budgetClose, promptOpensThinking, THINK_TAGS, type ThinkTags } from "../output/reasoning.js";
import { recipientThinking } from "../output/recipient-formats.js";
import { formatMarkers, type ToolCallFormat } from "../output/tool-call-formats.js";
import type { ToolSpec } from "../output/tool-calls.js";
import { requestProgramOf } from "../programs/program-identity.js";
import { type ChatCompletionBody, type ChatMessageInput, chatCompletionSchema } from "../schemas.js";
import { chatTurns, contentText } from "../templates/chat-render.js";
import type { ChatTemplate } from "../templates/chat-template.js";
import type { GeneratedReplies, ReplyMemory } from "../templates/generated-replies.js";
import { noteMedia } from "../templates/media-notes.js";
import { streamFrames } from "./chat-stream.js";

export interface RequestContext extends GenerationContext {
  /** model names a request may ask for (the engine's id first) */
  readonly modelNames: readonly string[];
  /** the model's Jinja template; null: the engine's template over `chatTurns` */
  readonly chatTemplate: ChatTemplate | null;
  /** the model's template for requests that offer tools, where it ships one apart (`tool_use`); else null */
  readonly toolUseTemplate: ChatTemplate | null;
  /**
   * chat completions report a thinking template's thinking as `reasoning_content` (reasoning.ts); false:
   * `--reasoning-format none`
   */
  readonly splitsReasoning: boolean;
  /** `system_fingerprint` of every response and chunk */
  readonly systemFingerprint: string;
  /** this server's replies with tool calls, rendered as generated when a client sends them back */
  readonly generatedReplies: GeneratedReplies;
}

/**
 * The request's variables for the model's template: `chat_template_kwargs`, and OpenAI's `reasoning_effort`
 * as the variable gpt-oss's template reads (`Reasoning: low|medium|high` in its system message), unless the
 * kwargs set it.
 */
function templateVariables(body: ChatCompletionBody): Record<string, unknown> {
  const effort = body.reasoning_effort;
  return effort == null
    ? (body.chat_template_kwargs ?? {})
    : { reasoning_effort: effort, ...body.chat_template_kwargs };
}

/**
 * Whether the request continues its last message, the assistant's (vLLM's `continue_final_message`, an
 * Anthropic prefill): the reply goes on from that text instead of opening a new assistant turn.
 */
export function continuesFinalMessage(body: ChatCompletionBody): boolean {
  if (!body.continue_final_message) return false;
  if (body.add_generation_prompt === true) {
    throw ApiError.badRequest(
      "continue_final_message and add_generation_prompt cannot both be true: the reply either continues the last message or opens a new one",
      "add_generation_prompt",
    );
  }
  const final = body.messages.at(-1);
  if (final?.role !== "assistant" || (final.tool_calls?.length ?? 0) > 0) {
    throw ApiError.badRequest(
      "continue_final_message needs the last message to be the assistant's text (without tool calls): the reply continues it",
      "messages",
    );
  }
  return true;
}

/** The template a chat request renders with: the model's `tool_use` one when it offers tools and there is one. */
function chatTemplateFor(ctx: RequestContext, tools: ToolSetup): ChatTemplate | null {
  return tools.rendered.length > 0 && ctx.toolUseTemplate !== null ? ctx.toolUseTemplate : ctx.chatTemplate;
}

/**
 * A chat request's prompt text: the server's template (`--chat-template`), else the model's own. A
 * continued last message is rendered as llama-server renders an assistant prefill: the conversation
 * before it with the generation prompt, then its text, so any template can continue it.
 */
export function renderChatPrompt(ctx: RequestContext, body: ChatCompletionBody, tools: ToolSetup): string {
  const messages = tools.replies?.restore() ?? body.messages;
  const template = chatTemplateFor(ctx, tools);
  const render = (list: readonly ChatMessageInput[], addGenerationPrompt: boolean) =>
    template
      ? template.render(list, tools.rendered, templateVariables(body), { addGenerationPrompt })
      : ctx.engine.renderChat(chatTurns(list, tools.rendered), { addGenerationPrompt });
  if (continuesFinalMessage(body)) {
    const last = messages.length - 1;
    return (
      render(messages.slice(0, last), true) +
      contentText(messages[last]!.content, `messages[${last}].content`)
    );
  }
  return render(messages, body.add_generation_prompt ?? true);
}

export function checkModel(ctx: RequestContext, model: string | null | undefined): string {
  const served = ctx.modelNames[0]!;
  if (model === null || model === undefined || model === "") return served;
  if (!ctx.modelNames.includes(model)) {
    throw new ApiError(
      404,
      `The model \`${model}\` does not exist; this server serves ${ctx.modelNames.map((n) => `\`${n}\``).join(", ")}.`,
      "invalid_request_error",
      "model_not_found",
      "model",
    );
  }
  return model;
}

export function toolSetup(body: ChatCompletionBody, replies: ReplyMemory | null = null): ToolSetup {
  const tools = body.tools ?? [];
  const specs: ToolSpec[] = tools.map((t) => ({
    name: t.function.name,
    parameters: t.function.parameters ?? null,
  }));
  const choice = body.tool_choice ?? (tools.length > 0 ? "auto" : "none");
  const parallel = body.parallel_tool_calls ?? true;
  // The tools stay in the prompt (as models' own templates keep them): a program's final "none" turn
  // then extends the prefix its earlier turns cached. Nothing is parsed as a call.
  if (choice === "none") return { parseFor: [], rendered: tools, grammar: null, parallel, replies };
  if (tools.length === 0)
    throw ApiError.badRequest(`tool_choice ${JSON.stringify(choice)} needs tools`, "tool_choice");
  if (choice === "auto") return { parseFor: specs, rendered: tools, grammar: null, parallel, replies };
  const named = choice === "required" ? null : choice.function.name;
  const forced = named === null ? specs : specs.filter((s) => s.name === named);
  if (forced.length === 0) {
    throw ApiError.badRequest(
      `tool_choice names ${JSON.stringify(named)}, which is not in tools`,
      "tool_choice",
    );
  }
  return { parseFor: specs, rendered: tools, grammar: forcedToolGrammar(forced), parallel, replies };
}

/** The request body as JSON; a clear 400 when it is empty, malformed or nested too deeply to walk (json-depth.ts). */
export async function readJsonBody(c: Context<AppEnv>): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim().length === 0) throw ApiError.badRequest("request body is empty; expected a JSON object");
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw ApiError.badRequest(
      `request body is not valid JSON: ${(error as Error).message}`,
      null,
      "invalid_json",
    );
  }
  const tooDeep = tooDeepPath(body);
  if (tooDeep !== null) {
    const levels = `nests deeper than ${MAX_JSON_DEPTH} levels`;
    if (tooDeep === "") throw ApiError.badRequest(`request body ${levels}`, null, "invalid_value");
    const message = `${tooDeep}: ${levels}, counted from the top of the request body`;
    throw ApiError.badRequest(message, tooDeep, "invalid_value");
  }
  const api = c.get("notesMedia");
  return api === undefined ? body : noteMedia(api, body).body;
}

/**
 * What chat completions, Messages and Responses share once their request is a chat request: tools (with
 * this tenant's generated replies), the rendered prompt, and the generation queued. `formatGrammar`: a
 * constraint of the output besides tools (response_format), refused beside a forced tool call.
 */
export async function startChat(
  c: Context<AppEnv>,
  ctx: RequestContext,
  body: ChatCompletionBody,
  limit: OutputLimit,
  options: {
    /** the program the client names (program-identity.ts); null: none */
    programId: string | null;
    /** the program that spawned it as a subagent, as the client names it; null or absent: none */
    parentProgramId?: string | null;
    formatGrammar?: { grammar: string; param: string } | null;
    returnTokenIds?: boolean;
    /** vLLM's prompt_logprobs: the prompt's tokens' logprobs with this many alternatives */
    promptLogprobs?: number | null;
    /** a second or later choice (`n`): a one-off beside the first, which is the program's turn */
    sibling?: boolean;
    /** return once the first token is out, streaming or not (the first of several choices) */
    awaitFirstToken?: boolean;
    /** the request's choices this one is one of (`n`) */
    tally?: ChoiceTally;
  },
): Promise<ChatGeneration> {
  const tools = toolSetup(body, ctx.generatedReplies.scoped(c.get("tenant") ?? null, body.messages));
  const extra = options.formatGrammar ?? null;
  if (extra !== null && tools.grammar !== null) {
    throw ApiError.badRequest(`${extra.param} cannot be combined with a forced tool_choice`, extra.param);
  }
  const prompt = renderChatPrompt(ctx, body, tools);
  const template = chatTemplateFor(ctx, tools);
  const thinkTags = template?.thinkTags ?? THINK_TAGS;
  const insideThinking =
    ctx.splitsReasoning && template?.thinks === true ? promptOpensThinking(prompt, thinkTags) : null;
  const format = template?.format ?? "generic";
  // the TTL prices a pin by the tool a turn calls: read as the model writes calls, not only as Hermes does
  const reading = { tools: { ...tools, replies: null }, format, insideThinking, thinkTags };
  const toolNamer =
    tools.parseFor.length > 0
      ? (output: string) => readOutput(output, reading, false).calls[0]?.name ?? null
      : null;
  const { requestId, generation, implicit } = await startGeneration(
    c,
    ctx,
    // harmony's structure is in its control tokens: they stay in the text it is read from
    format === "harmony" ? { ...body, skip_special_tokens: false } : body,
    options.programId,
    prompt,
    limit,
    tools.grammar ?? extra?.grammar ?? null,
    {
      // a continued last message is this turn's own beginning, not a turn before it
      priorTurns:
        body.messages.filter((m) => m.role === "assistant").length - (continuesFinalMessage(body) ? 1 : 0),
      offersTools: (body.tools?.length ?? 0) > 0,
      messages: body.messages,
    },
    {
      returnTokenIds: options.returnTokenIds ?? false,
      promptLogprobs: options.promptLogprobs ?? null,
      sibling: options.sibling ?? false,
      awaitFirstToken: options.awaitFirstToken ?? false,
      ...(options.tally ? { tally: options.tally } : {}),
      thinkingBudget: thinkingBudgetOf(body, insideThinking, format, thinkTags),
      // the markers the output is read by, should the model hold them as control tokens
      preservedTokens: [
        ...formatMarkers(format),
        ...(insideThinking === null ? [] : [thinkTags.open, thinkTags.close]),
      ],
      toolNamer,
      parentProgramId: options.parentProgramId ?? null,
    },
  );
  // a program its client names not: its reply, as returned, tells the conversation's next turn where it runs
  if (implicit !== null) {
    generation.onDone((done) => {
      const reply =
        done.finishReason === "abort" ? null : readOutput(done.text, reading, done.finishReason !== "stop");
      ctx.turnPrograms.answered(implicit.program, body.messages, implicit.isLastStep, reply);
    });
  }
  return { tools, format, requestId, generation, insideThinking, thinkTags };
}

/**
 * `thinking_budget` for a model whose thinking is split: its think tags' blocks (open from the start when the
 * prompt opened one, else once the model opens it), or harmony's analysis channel; none for other models.
 */
function thinkingBudgetOf(
  body: ChatCompletionBody,
  insideThinking: boolean | null,
  format: ToolCallFormat,
  tags: ThinkTags,
): ThinkingBudget | null {
  const tokens = body.thinking_budget;
  if (tokens == null || insideThinking === null) return null;
  if (format === "harmony") return { tokens, ...HARMONY_THINKING };
  const messages = recipientThinking(format);
  if (messages !== null) return { tokens, ...messages };
  return { tokens, open: insideThinking ? null : tags.open, closedBy: tags.close, close: budgetClose(tags) };
}

/** A chat request's output limit: OpenAI's newer max_completion_tokens, else max_tokens. */
function chatOutputLimit(body: ChatCompletionBody): OutputLimit {
  const newer = body.max_completion_tokens != null;
  return {
    tokens: (newer ? body.max_completion_tokens : body.max_tokens) ?? null,
    field: newer ? "max_completion_tokens" : "max_tokens",
    capToContext: false,
  };
}

export async function chatCompletions(c: Context<AppEnv>, ctx: RequestContext): Promise<Response> {
  const body = chatCompletionSchema.parse(await readJsonBody(c));
  const model = checkModel(ctx, body.model);
  const returnTokenIds = body.return_token_ids ?? false;
  const promptLogprobs = body.prompt_logprobs ?? null;
  if (promptLogprobs !== null && body.stream) {
    throw ApiError.badRequest(
      "prompt_logprobs is not supported when streaming",
      "prompt_logprobs",
      "unsupported_value",
    );
  }
  const program = requestProgramOf("chat", body, (name) => c.req.header(name));
  const choices = await startChoices(c, ctx, body, choiceCount(body), {
    programId: program.id,
    parentProgramId: program.parentId,
    formatGrammar: outputGrammar(body),
    returnTokenIds,
    promptLogprobs,
  });
  const meta = {
    id: `chatcmpl-${choices[0]!.requestId}`,
    created: unixSeconds(),
    model,
    system_fingerprint: ctx.systemFingerprint,
  };
  const abortAll = () => {
    for (const choice of choices) choice.generation.abort();
  };
  if (body.stream) {
    return sseResponse(streamFrames(choices, meta, body.stream_options?.include_usage ?? false), abortAll);
  }
  const dones = await Promise.all(choices.map((choice) => choice.generation.done()));
  const json = dones.map((done, index) => {
    if (done === null) throw new Error("the engine ended the request without a result");
    const { reasoning, content, calls } = readOutput(
      done.text,
      choices[index]!,
      done.finishReason !== "stop",
    );
    const message: Record<string, unknown> = { role: "assistant", content };
    if (reasoning) message["reasoning_content"] = reasoning;
    if (calls.length > 0) message["tool_calls"] = toolCallsJson(calls);
    return {
      index,
      message,
      logprobs: done.logprobs ? chatLogprobs(done.logprobs) : null,
      finish_reason: finishReason(done, calls),
      ...(done.tokenIds ? { token_ids: done.tokenIds.output } : {}),
    };
  });
  const first = dones[0]!;
  return c.json({
    ...meta,
    object: "chat.completion",
    choices: json,
    ...(first.tokenIds ? { prompt_token_ids: first.tokenIds.prompt } : {}),
    ...(first.promptLogprobs ? { prompt_logprobs: vllmPromptLogprobs(first.promptLogprobs) } : {}),
    usage: openAIUsage(sumUsage(dones.map((done) => done!.usage))),
  });
}

/**
 * Queues the request's `n` choices, each a generation of the same prompt (its seed advanced by its index;
 * choice-group.ts). A client's X-Request-Id names the first; the others get it with their index appended.
 */
function startChoices(
  c: Context<AppEnv>,
  ctx: RequestContext,
  body: ChatCompletionBody,
  n: number,
  options: Parameters<typeof startChat>[4],
): Promise<ChatGeneration[]> {
  const ids = new IndexedRequestIds();
  return startChoiceGroup(n, async (i, awaitFirstToken, tally) => {
    const started = await startChat(c, ids.contextFor(ctx, i), choiceBody(body, i), chatOutputLimit(body), {
      ...options,
      sibling: i > 0,
      awaitFirstToken,
      tally,
    });
    ids.started(i, started.requestId);
    return started;
  });
}
