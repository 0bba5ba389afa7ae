/** Errors of the Anthropic Messages routes in Anthropic's shape: `{type: "error", error: {type, message}}`. */

import type { ApiError } from "../errors.js";
import { ContextOverflow } from "../generation/context-overflow.js";

export const isMessagesPath = (path: string) => path === "/v1/messages" || path.startsWith("/v1/messages/");

function anthropicErrorType(error: ApiError): string {
  switch (error.status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return error.status >= 500 ? "api_error" : "invalid_request_error";
  }
}

export function anthropicErrorBody(error: ApiError) {
  const message = error instanceof ContextOverflow ? error.anthropicMessage : error.message;
  return { type: "error" as const, error: { type: anthropicErrorType(error), message } };
}
