/**
 * A streamed chat completion: each choice's chunks (its thinking as `reasoning_content`, its text, its tool
 * calls, the first one's arguments as they come, its finish), then the usage of all of them when asked.
 */
import type { GenerateUsage } from "../../engine/engine-api.js";
import { errorBody, toApiError } from "../errors.js";
import { type DeltaEvent, openAIUsage, SSE_DONE, sseData, sumUsage } from "../generation/generation.js";
import { chatLogprobs } from "../generation/logprobs.js";
import { type ChatGeneration, finishReason } from "../output/chat-output.js";
import { ChoiceStream } from "../output/choice-stream.js";

export interface ChunkMeta {
  readonly id: string;
  readonly created: number;
  readonly model: string;
  readonly system_fingerprint: string;
}

/** A streamed chat completion: each choice's chunks in turn, then the usage of all of them (when asked). */
export async function* streamFrames(
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
  const { generation } = choice;
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
      // the choices share one prompt: its ids go out once, with the first choice's
      ...(tokens.promptTokenIds && choiceIndex === 0 ? { prompt_token_ids: tokens.promptTokenIds } : {}),
      ...usageField,
    });
  const callDelta = (fields: Record<string, unknown>) => chunk({ tool_calls: [{ index: 0, ...fields }] });
  const stream = new ChoiceStream(choice);
  yield chunk({ role: "assistant", content: "" });
  for await (const event of generation.events()) {
    if (event.type === "delta") {
      const { reasoning, text, opened, args } = stream.push(event.text);
      let tokens: DeltaTokens = event;
      if (reasoning.length > 0) {
        yield chunk({ reasoning_content: reasoning }, null, tokens);
        tokens = {};
      }
      if (text.length > 0 || carriesTokens(tokens)) {
        yield chunk(text.length > 0 ? { content: text } : {}, null, tokens);
      }
      if (opened) {
        yield callDelta({ id: opened.id, type: "function", function: { name: opened.name, arguments: "" } });
      }
      if (args.length > 0) yield callDelta({ function: { arguments: args } });
      continue;
    }
    const { reasoning, rest, calls, liveArgs } = stream.finish(event);
    if (reasoning.length > 0) yield chunk({ reasoning_content: reasoning });
    if (rest.length > 0) yield chunk({ content: rest });
    for (const [index, call] of calls.entries()) {
      if (index === 0 && liveArgs !== null) {
        if (liveArgs.length > 0) yield callDelta({ function: { arguments: liveArgs } });
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
