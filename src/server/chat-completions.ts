import type { Context } from "hono";
import type { GenerateUsage } from "../engine/engine-api.js";
import { chatTurns, contentText } from "./chat-render.js";
import type { ChatTemplate } from "./chat-template.js";
import { startChoiceGroup } from "./choice-group.js";
import { ApiError, errorBody, toApiError } from "./errors.js";
import type { GeneratedReplies, ReplyMemory } from "./generated-replies.js";
import {
  type AppEnv,
  type DeltaEvent,
  type DoneEvent,
  type Generation,
  openAIFinishReason,
  openAIUsage,
  SSE_DONE,
  sseData,
  sseResponse,
  sumUsage,
  unixSeconds,
} from "./generation.js";
import { chatLogprobs } from "./logprobs.js";
import { promptOpensThinking, ReasoningStream, splitReasoning } from "./reasoning.js";
import { choiceBody, choiceCount, forcedToolGrammar, responseFormatGrammar } from "./sampling.js";
import {
  type ChatCompletionBody,
  type ChatMessageInput,
  chatCompletionSchema,
  type ToolInput,
} from "./schemas.js";
import { type GenerationContext, startGeneration } from "./start-generation.js";
import { StreamedToolCall } from "./streamed-tool-call.js";
import { parseToolCallsAs, type ToolCallFormat, toolCallMarkers } from "./tool-call-formats.js";
import {
  type ParsedToolCall,
  parseTruncatedToolCall,
  ToolCallStreamGate,
  type ToolSpec,
} from "./tool-calls.js";

export interface RequestContext extends GenerationContext {
  /** model names a request may ask for (the engine's id first) */
  readonly modelNames: readonly string[];
  /** the model's Jinja template; null: the engine's template over `chatTurns` */
  readonly chatTemplate: ChatTemplate | null;
  /** chat completions report the model's `<think>` blocks as `reasoning_content` (reasoning.ts) */
  readonly splitsReasoning: boolean;
  /** `system_fingerprint` of every response and chunk */
  readonly systemFingerprint: string;
  /** this server's replies with tool calls, rendered as generated when a client sends them back */
  readonly generatedReplies: GeneratedReplies;
}

export interface ToolSetup {
  /** offered functions the output may call; empty: no tool-call parsing */
  readonly parseFor: readonly ToolSpec[];
  readonly rendered: readonly ToolInput[];
  readonly grammar: string | null;
  readonly parallel: boolean;
  /** where a reply with tool calls is remembered, to render it back as generated (generated-replies.ts) */
  readonly replies: ReplyMemory | null;
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

/**
 * A chat request's prompt text: the server's template (`--chat-template`), else the model's own. A
 * continued last message is rendered as llama-server renders an assistant prefill: the conversation
 * before it with the generation prompt, then its text, so any template can continue it.
 */
export function renderChatPrompt(ctx: RequestContext, body: ChatCompletionBody, tools: ToolSetup): string {
  const messages = tools.replies?.restore() ?? body.messages;
  const render = (list: readonly ChatMessageInput[], addGenerationPrompt: boolean) =>
    ctx.chatTemplate
      ? ctx.chatTemplate.render(list, tools.rendered, body.chat_template_kwargs ?? {}, {
          addGenerationPrompt,
        })
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

function toolCallsJson(calls: readonly ParsedToolCall[]) {
  return calls.map((call) => ({
    id: call.id,
    type: "function" as const,
    function: { name: call.name, arguments: call.arguments },
  }));
}

/**
 * Content and tool calls of a finished output, its answer from `answerStart` on (past a reasoning model's
 * thinking). A call cut off by max_tokens or the context (`truncated`) comes back as a call with the
 * arguments generated so far, never as markup in the content.
 */
function splitOutput(
  text: string,
  tools: ToolSetup,
  format: ToolCallFormat,
  truncated: boolean,
  answerStart: number,
): { content: string | null; calls: ParsedToolCall[]; contentEnd: number } {
  const parse = (output: string, specs: readonly ToolSpec[]) =>
    parseToolCallsAs(format, output, specs) ?? (truncated ? parseTruncatedToolCall(output, specs) : null);
  const answer = text.slice(answerStart);
  const parsed = tools.parseFor.length > 0 ? parse(answer, tools.parseFor) : null;
  if (parsed === null) return { content: answer, calls: [], contentEnd: text.length };
  const calls = tools.parallel ? [...parsed.calls] : parsed.calls.slice(0, 1);
  const content = answer.slice(0, parsed.start).trim();
  // the whole output is what the model generated: a reply sent back renders as it, its thinking included
  tools.replies?.remember(text, content, calls);
  return { content: content.length > 0 ? content : null, calls, contentEnd: answerStart + parsed.start };
}

/**
 * A finished output as every API reads it: a reasoning model's thinking (when the choice's output is
 * split), then its answer's content and tool calls (splitOutput).
 */
export function readOutput(
  text: string,
  { tools, format, insideThinking }: Pick<ChatGeneration, "tools" | "format" | "insideThinking">,
  truncated: boolean,
) {
  const { reasoning, answerStart } = splitReasoning(text, insideThinking);
  return { reasoning, answerStart, ...splitOutput(text, tools, format, truncated, answerStart) };
}

function finishReason(done: DoneEvent, calls: readonly ParsedToolCall[]): string {
  return calls.length > 0 && done.finishReason === "stop"
    ? "tool_calls"
    : openAIFinishReason(done.finishReason);
}

/** The request body as JSON; a clear 400 when it is empty or malformed. */
export async function readJsonBody(c: Context<AppEnv>): Promise<unknown> {
  const text = await c.req.text();
  if (text.trim().length === 0) throw ApiError.badRequest("request body is empty; expected a JSON object");
  try {
    return JSON.parse(text);
  } catch (error) {
    throw ApiError.badRequest(
      `request body is not valid JSON: ${(error as Error).message}`,
      null,
      "invalid_json",
    );
  }
}

/** A chat request under way: its tools, the template's tool-call format, and the queued generation. */
export interface ChatGeneration {
  readonly tools: ToolSetup;
  readonly format: ToolCallFormat;
  readonly requestId: string;
  readonly generation: Generation;
  /**
   * With `splitsReasoning`: whether the prompt left a thinking block open (the output starts inside it);
   * null: the output is not split
   */
  readonly insideThinking: boolean | null;
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
  maxTokens: number | null | undefined,
  options: {
    formatGrammar?: { grammar: string; param: string } | null;
    capToContext?: boolean;
    returnTokenIds?: boolean;
    /** a second or later choice (`n`): a one-off beside the first, which is the program's turn */
    sibling?: boolean;
    /** return once the first token is out, streaming or not (the first of several choices) */
    awaitFirstToken?: boolean;
  } = {},
): Promise<ChatGeneration> {
  const tools = toolSetup(body, ctx.generatedReplies.scoped(c.get("tenant") ?? null, body.messages));
  const extra = options.formatGrammar ?? null;
  if (extra !== null && tools.grammar !== null) {
    throw ApiError.badRequest(`${extra.param} cannot be combined with a forced tool_choice`, extra.param);
  }
  const prompt = renderChatPrompt(ctx, body, tools);
  const { requestId, generation } = await startGeneration(
    c,
    ctx,
    body,
    prompt,
    maxTokens,
    tools.grammar ?? extra?.grammar ?? null,
    {
      // a continued last message is this turn's own beginning, not a turn before it
      priorTurns:
        body.messages.filter((m) => m.role === "assistant").length - (continuesFinalMessage(body) ? 1 : 0),
      offersTools: (body.tools?.length ?? 0) > 0,
    },
    options.capToContext ?? false,
    {
      returnTokenIds: options.returnTokenIds ?? false,
      sibling: options.sibling ?? false,
      awaitFirstToken: options.awaitFirstToken ?? false,
    },
  );
  return {
    tools,
    format: ctx.chatTemplate?.format ?? "generic",
    requestId,
    generation,
    insideThinking: ctx.splitsReasoning ? promptOpensThinking(prompt) : null,
  };
}

export async function chatCompletions(c: Context<AppEnv>, ctx: RequestContext): Promise<Response> {
  const body = chatCompletionSchema.parse(await readJsonBody(c));
  const model = checkModel(ctx, body.model);
  const formatGrammar = responseFormatGrammar(body.response_format);
  const returnTokenIds = body.return_token_ids ?? false;
  const choices = await startChoices(c, ctx, body, choiceCount(body), {
    formatGrammar: formatGrammar === null ? null : { grammar: formatGrammar, param: "response_format" },
    returnTokenIds,
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
  let firstId = "";
  return startChoiceGroup(n, async (i, awaitFirstToken) => {
    const indexed: RequestContext = i === 0 ? ctx : { ...ctx, newRequestId: () => `${firstId}-${i}` };
    const maxTokens = body.max_completion_tokens ?? body.max_tokens;
    const started = await startChat(c, indexed, choiceBody(body, i), maxTokens, {
      ...options,
      sibling: i > 0,
      awaitFirstToken,
    });
    if (i === 0) firstId = started.requestId;
    return started;
  });
}

interface ChunkMeta {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly system_fingerprint: string;
}

/** A streamed chat completion: each choice's chunks in turn, then the usage of all of them (when asked). */
async function* streamFrames(
  choices: readonly ChatGeneration[],
  meta: ChunkMeta,
  includeUsage: boolean,
): AsyncGenerator<string> {
  const usages: GenerateUsage[] = [];
  try {
    for (const [index, choice] of choices.entries()) {
      const usage = yield* choiceFrames(choice, index, meta, includeUsage);
      if (usage !== null) usages.push(usage);
    }
    if (includeUsage && usages.length === choices.length) {
      yield sseData({
        ...meta,
        object: "chat.completion.chunk",
        choices: [],
        usage: openAIUsage(sumUsage(usages)),
      });
    }
  } catch (error) {
    yield sseData(errorBody(toApiError(error)));
  }
  yield SSE_DONE;
}

/** What a delta's tokens add to the chunk that carries them (`return_token_ids`: their ids, the prompt's first). */
type DeltaTokens = Pick<DeltaEvent, "logprobs" | "tokenIds" | "promptTokenIds">;

function carriesTokens(tokens: DeltaTokens): boolean {
  return (
    (tokens.logprobs?.length ?? 0) > 0 ||
    (tokens.tokenIds?.length ?? 0) > 0 ||
    tokens.promptTokenIds !== undefined
  );
}

/**
 * One choice's chunks: its thinking (`reasoning_content`), its text, its tool calls (the first one's
 * arguments as they come), its finish.
 */
async function* choiceFrames(
  choice: ChatGeneration,
  choiceIndex: number,
  meta: ChunkMeta,
  includeUsage: boolean,
): AsyncGenerator<string, GenerateUsage | null> {
  const { generation, tools, format, insideThinking } = choice;
  const usageField = includeUsage ? { usage: null } : {};
  // a delta's tokens (logprobs, ids) go with its first chunk, or alone when what it carries is held back
  const chunk = (delta: Record<string, unknown>, finish: string | null = null, tokens: DeltaTokens = {}) =>
    sseData({
      ...meta,
      object: "chat.completion.chunk",
      choices: [
        {
          index: choiceIndex,
          delta,
          logprobs: tokens.logprobs ? chatLogprobs(tokens.logprobs) : null,
          finish_reason: finish,
          ...(tokens.tokenIds ? { token_ids: tokens.tokenIds } : {}),
        },
      ],
      ...(tokens.promptTokenIds ? { prompt_token_ids: tokens.promptTokenIds } : {}),
      ...usageField,
    });
  const gate =
    tools.parseFor.length > 0 ? new ToolCallStreamGate(tools.parseFor, toolCallMarkers(format)) : null;
  const live = gate ? new StreamedToolCall() : null;
  const callDelta = (fields: Record<string, unknown>) => chunk({ tool_calls: [{ index: 0, ...fields }] });
  const thinking = new ReasoningStream(insideThinking);
  // the answer's characters out as content so far
  let streamed = 0;
  yield chunk({ role: "assistant", content: "" });
  for await (const event of generation.events()) {
    if (event.type === "delta") {
      const { reasoning, answer } = thinking.push(event.text);
      const text = gate ? gate.push(answer) : answer;
      streamed += text.length;
      let tokens: DeltaTokens = event;
      if (reasoning.length > 0) {
        yield chunk({ reasoning_content: reasoning }, null, tokens);
        tokens = {};
      }
      if (text.length > 0 || carriesTokens(tokens)) {
        yield chunk(text.length > 0 ? { content: text } : {}, null, tokens);
      }
      if (gate && live) {
        const { opened, args } = live.push(gate.held);
        if (opened) {
          yield callDelta({ id: live.id, type: "function", function: { name: live.name, arguments: "" } });
        }
        if (args.length > 0) yield callDelta({ function: { arguments: args } });
      }
      continue;
    }
    const heldThinking = thinking.finish().reasoning;
    if (heldThinking.length > 0) yield chunk({ reasoning_content: heldThinking });
    // A call already announced is a call, even when the output ended before it closed.
    const cut = event.finishReason !== "stop" || live?.opened === true;
    const { calls, contentEnd, answerStart } = readOutput(event.text, choice, cut);
    const from = answerStart + streamed;
    const rest = event.text.slice(from, Math.max(contentEnd, from));
    if (rest.length > 0) yield chunk({ content: rest });
    for (const [index, call] of calls.entries()) {
      if (index === 0 && gate && live?.opened) {
        const args = live.finish(gate.held);
        if (args.length > 0) yield callDelta({ function: { arguments: args } });
        continue;
      }
      yield chunk({
        tool_calls: [
          {
            index,
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          },
        ],
      });
    }
    yield chunk({}, finishReason(event, calls));
    return event.usage;
  }
  return null;
}
