import type { Context } from "hono";
import type { GenerateRequest } from "../engine/engine-api.js";
import type { RequestContext } from "./chat-completions.js";
import { type AppEnv, Generation } from "./generation.js";
import { programFields, scopeToTenant } from "./program-fields.js";
import { samplingParams } from "./sampling.js";
import type { CommonBody } from "./schemas.js";

/**
 * What chat and text completions share once the prompt is known: its length, the sampling parameters,
 * the program fields, and the generation queued on the engine.
 */
export async function startGeneration(
  c: Context<AppEnv>,
  ctx: RequestContext,
  body: CommonBody,
  prompt: string,
  maxTokens: number | null | undefined,
  grammar: string | null,
): Promise<{ requestId: string; generation: Generation }> {
  const promptTokens = ctx.engine.countTokens(prompt);
  const sampling = samplingParams(body, maxTokens, promptTokens, ctx.engine.maxContextTokens, grammar);
  const requestId = ctx.newRequestId(c);
  const fields = programFields(body, (name) => c.req.header(name));
  const request: GenerateRequest = {
    requestId,
    ...fields,
    ...scopeToTenant(c.get("tenant") ?? null, fields.programId, body.cache_salt),
    prompt,
    sampling,
  };
  return { requestId, generation: await Generation.start(ctx, c, request) };
}
