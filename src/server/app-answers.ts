/** What the serve and gateway apps share at their edge: request ids, and errors in the client's API shape. */
import { randomUUID } from "node:crypto";
import type { Context } from "hono";
import { type ApiError, errorBody, errorHeaders, toApiError } from "./errors.js";
import type { AppEnv } from "./generation/generation.js";
import { anthropicErrorBody, isMessagesPath } from "./messages/messages-errors.js";

/** The client's `X-Request-Id` when it gives a usable one (128 characters at most), else a fresh id. */
export function requestIdOf(c: Context<AppEnv>): string {
  const given = c.req.header("x-request-id")?.trim();
  return given && given.length <= 128 ? given : randomUUID().replace(/-/g, "");
}

/** An API error in the shape of the API its path belongs to (Anthropic's under /v1/messages, else OpenAI's). */
export function errorResponse(c: Context<AppEnv>, error: ApiError): Response {
  for (const [name, value] of Object.entries(errorHeaders(error))) c.header(name, value);
  if (isMessagesPath(c.req.path)) return c.json(anthropicErrorBody(error), error.status);
  return c.json(errorBody(error), error.status);
}

/** Hono's error handler: every error answered as an API error; an unexpected one logged with its stack. */
export function answerErrors(label: string, logError: (message: string) => void) {
  return (error: Error, c: Context<AppEnv>): Response => {
    const apiError = toApiError(error);
    if (apiError.status >= 500 && apiError.code === "internal_error") {
      logError(`${label}: ${error.stack ?? error.message}`);
    }
    return errorResponse(c, apiError);
  };
}
