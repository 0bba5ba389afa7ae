/**
 * What the gateway's routes share: the Gateway (its backends and their schedulers), the names clients may ask
 * for the model by, the programs of conversations whose clients name none, and how a turn is submitted (the
 * client going away cancels it; no backend up is a 503).
 */
import type { Context } from "hono";
import { GatewayRejection } from "../../gateway/backends/backend-lane.js";
import type { BackendReply } from "../../gateway/backends/forward.js";
import { BackendUnreachable } from "../../gateway/backends/forward.js";
import { type Gateway, NoBackendAvailable } from "../../gateway/gateway.js";
import type { GatewayTurn } from "../../gateway/turn.js";
import { ApiError } from "../errors.js";
import type { AppEnv } from "../generation/generation.js";
import type { ConversationPrograms } from "../programs/conversation-programs.js";
import { unavailable } from "./backend-errors.js";

export interface GatewayContext {
  readonly gateway: Gateway;
  /** extra names clients may use for the model (`--served-model-name`), beside the backends' own */
  readonly servedModelNames: readonly string[];
  readonly conversations: ConversationPrograms;
  /** Retry-After (s) of a 503 while no backend is up */
  readonly retryAfterS: number;
  newRequestId(c: Context<AppEnv>): string;
}

/** Every model name a request may ask for: the served names, then each backend's model. */
export function modelNames(ctx: GatewayContext): string[] {
  const backends = ctx.gateway.backends.flatMap((b) => (b.info ? [b.info.modelId] : []));
  return [...new Set([...ctx.servedModelNames, ...backends])];
}

/** The request's `model`, checked against the names served (none given: the first one). */
export function checkGatewayModel(ctx: GatewayContext, model: string | null | undefined): string {
  const names = modelNames(ctx);
  if (model === null || model === undefined || model === "") return names[0] ?? "";
  if (names.length > 0 && !names.includes(model)) {
    throw new ApiError(
      404,
      `The model \`${model}\` does not exist; this gateway serves ${names.map((n) => `\`${n}\``).join(", ")}.`,
      "invalid_request_error",
      "model_not_found",
      "model",
    );
  }
  return model;
}

/** Forwards a turn through the gateway; the client's leaving cancels it. Errors come back as ApiErrors. */
export async function submitTurn(
  ctx: GatewayContext,
  c: Context<AppEnv>,
  turn: GatewayTurn,
): Promise<BackendReply> {
  try {
    return await ctx.gateway.submit(turn, c.req.raw.signal);
  } catch (error) {
    if (error instanceof NoBackendAvailable || error instanceof BackendUnreachable) {
      throw unavailable(error.message, ctx.retryAfterS);
    }
    if (error instanceof GatewayRejection) {
      const status = error.code === "prompt_too_long" ? 413 : error.code === "too_many_programs" ? 429 : 400;
      throw new ApiError(status, error.message, "invalid_request_error", error.code);
    }
    throw error;
  }
}
