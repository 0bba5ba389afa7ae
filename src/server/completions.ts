import type { Context } from "hono";
import { checkModel, type RequestContext, readJsonBody } from "./chat-completions.js";
import { ApiError, errorBody, toApiError } from "./errors.js";
import {
  type AppEnv,
  openAIFinishReason,
  openAIUsage,
  SSE_DONE,
  sseData,
  sseResponse,
  unixSeconds,
} from "./generation.js";
import { responseFormatGrammar } from "./sampling.js";
import { completionSchema } from "./schemas.js";
import { startGeneration } from "./start-generation.js";

/** OpenAI's (and vLLM's) default for text completions; chat completions may fill the context. */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;

/** `POST /v1/completions`: one raw prompt, no chat template. */
export async function completions(c: Context<AppEnv>, ctx: RequestContext): Promise<Response> {
  const body = completionSchema.parse(await readJsonBody(c));
  const model = checkModel(ctx, body.model);
  if (body.logprobs !== null && body.logprobs !== undefined) {
    throw ApiError.badRequest("logprobs are not supported", "logprobs", "unsupported_value");
  }
  if (body.suffix) throw ApiError.badRequest("suffix is not supported", "suffix", "unsupported_value");
  if ((body.best_of ?? 1) !== 1) throw ApiError.badRequest("only best_of=1 is supported", "best_of");
  const prompt = typeof body.prompt === "string" ? body.prompt : body.prompt[0]!;
  const { requestId, generation } = await startGeneration(
    c,
    ctx,
    body,
    prompt,
    body.max_tokens ?? DEFAULT_COMPLETION_MAX_TOKENS,
    responseFormatGrammar(body.response_format),
    undefined,
  );
  const meta = {
    id: `cmpl-${requestId}`,
    object: "text_completion",
    created: unixSeconds(),
    model,
    system_fingerprint: ctx.systemFingerprint,
  };
  const echo = body.echo ? prompt : "";

  if (body.stream) {
    const includeUsage = body.stream_options?.include_usage ?? false;
    const usageField = includeUsage ? { usage: null } : {};
    const chunk = (text: string, finish: string | null = null) =>
      sseData({
        ...meta,
        choices: [{ index: 0, text, logprobs: null, finish_reason: finish }],
        ...usageField,
      });
    async function* frames(): AsyncGenerator<string> {
      try {
        if (echo) yield chunk(echo);
        for await (const event of generation.events()) {
          if (event.type === "delta") {
            if (event.text.length > 0) yield chunk(event.text);
            continue;
          }
          yield chunk("", openAIFinishReason(event.finishReason));
          if (includeUsage) yield sseData({ ...meta, choices: [], usage: openAIUsage(event.usage) });
        }
      } catch (error) {
        yield sseData(errorBody(toApiError(error)));
      }
      yield SSE_DONE;
    }
    return sseResponse(frames(), () => generation.abort());
  }

  const done = await generation.done();
  if (done === null) throw new Error("the engine ended the request without a result");
  return c.json({
    ...meta,
    choices: [
      {
        index: 0,
        text: echo + done.text,
        logprobs: null,
        finish_reason: openAIFinishReason(done.finishReason),
      },
    ],
    usage: openAIUsage(done.usage),
  });
}
