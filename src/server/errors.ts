import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ZodError } from "zod";
import { EngineRejection } from "../engine/engine-api.js";

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

function zodParam(error: ZodError): string | null {
  const path = error.issues[0]?.path ?? [];
  if (path.length === 0) return null;
  let out = "";
  for (const key of path) out += typeof key === "number" ? `[${key}]` : out ? `.${String(key)}` : String(key);
  return out;
}

function zodMessage(error: ZodError): string {
  const issue = error.issues[0];
  if (!issue) return "invalid request";
  const param = zodParam(error);
  return param ? `${param}: ${issue.message}` : issue.message;
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
    return new ApiError(400, zodMessage(error), "invalid_request_error", "invalid_value", zodParam(error));
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
