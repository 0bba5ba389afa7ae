import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ZodError, z } from "zod";
import { EngineRejection } from "../engine/engine-api.js";
import { deepestIssue, issuePath, typeNamingErrorMap } from "./zod-messages.js";

// Every zod parse in the process words a wrong type as what was expected and what came: the 400s of every
// API quote these messages.
z.config({ customError: typeNamingErrorMap });

/** OpenAI's error body: `{"error": {"message", "type", "param", "code"}}`. */
export interface OpenAIErrorBody {
  readonly error: {
    readonly message: string;
    readonly type: string;
    readonly param: string | null;
    readonly code: string | null;
  };
}

/** An error the server answers with a status and an OpenAI error body. */
export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    message: string,
    readonly type: string = "invalid_request_error",
    readonly code: string | null = null,
    readonly param: string | null = null,
    /** seconds, sent as Retry-After */
    readonly retryAfterS: number | null = null,
  ) {
    super(message);
    this.name = "ApiError";
  }

  static badRequest(message: string, param: string | null = null, code: string | null = null): ApiError {
    return new ApiError(400, message, "invalid_request_error", code, param);
  }
}

/** Status, type and code for each reason the engine refuses a request. */
const REJECTIONS: Readonly<
  Record<
    EngineRejection["code"],
    { status: ContentfulStatusCode; type: string; defaultRetryS: number | null }
  >
> = {
  invalid_request: { status: 400, type: "invalid_request_error", defaultRetryS: null },
  prompt_too_long: { status: 413, type: "invalid_request_error", defaultRetryS: null },
  duplicate_request: { status: 409, type: "invalid_request_error", defaultRetryS: null },
  overloaded: { status: 429, type: "rate_limit_error", defaultRetryS: 1 },
  shutting_down: { status: 503, type: "service_unavailable_error", defaultRetryS: 5 },
  draining: { status: 503, type: "service_unavailable_error", defaultRetryS: 1 },
  too_many_programs: { status: 429, type: "rate_limit_error", defaultRetryS: 5 },
};

/**
 * A zod error as the field it names (`within`: the path of the value parsed, "" for the body; null: the
 * body itself) and what is wrong with it.
 */
export function describeZodError(error: ZodError, within = ""): { param: string | null; message: string } {
  const first = error.issues[0];
  if (!first) return { param: within || null, message: "invalid request" };
  const issue = deepestIssue(first);
  const param = issuePath(issue.path, within) || null;
  return { param, message: param ? `${param}: ${issue.message}` : issue.message };
}

/** Every error the server can meet, as an ApiError. Unknown errors are internal (500). */
export function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof EngineRejection) {
    const r = REJECTIONS[error.code] ?? REJECTIONS.invalid_request;
    return new ApiError(
      r.status,
      error.message,
      r.type,
      error.code,
      null,
      error.retryAfterS ?? r.defaultRetryS,
    );
  }
  if (error instanceof ZodError) {
    const { param, message } = describeZodError(error);
    return new ApiError(400, message, "invalid_request_error", "invalid_value", param);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new ApiError(500, `internal error: ${message}`, "internal_error", "internal_error");
}

export function errorBody(error: ApiError): OpenAIErrorBody {
  return { error: { message: error.message, type: error.type, param: error.param, code: error.code } };
}

/** Response headers that go with an error (Retry-After). */
export function errorHeaders(error: ApiError): Record<string, string> {
  return error.retryAfterS === null
    ? {}
    : { "Retry-After": String(Math.max(1, Math.ceil(error.retryAfterS))) };
}
