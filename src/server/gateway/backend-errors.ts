/**
 * A backend's refusal as the gateway's client reads it: its status and message kept, in the client's API
 * shape (the app's error handler writes OpenAI's or Anthropic's body), and a context the prompt does not fit
 * as the client's own context-overflow error (ContextOverflow), whichever engine said it and how:
 * llama-server's `exceed_context_size_error` (with `n_prompt_tokens` and `n_ctx`), vLLM's and Continuum's
 * "maximum context length is N tokens. However, ... M tokens", SGLang's "The input (M tokens) is longer than
 * the model's context length (N tokens)", an Anthropic-shaped "prompt is too long: M tokens > N - 1 maximum".
 */
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { ApiError } from "../errors.js";
import { ContextOverflow } from "../generation/context-overflow.js";

type Json = Record<string, unknown>;

function objectOf(value: unknown): Json | null {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Json) : null;
}

function numberIn(text: string, pattern: RegExp): number | null {
  const m = pattern.exec(text);
  return m ? Number(m[1]) : null;
}

/** Prompt tokens and the context, when the backend said the prompt does not fit; null otherwise. */
export function overflowOf(detail: Json, message: string): { prompt: number; context: number } | null {
  const prompt = Number(detail["n_prompt_tokens"]);
  const context = Number(detail["n_ctx"]);
  if (detail["type"] === "exceed_context_size_error" && prompt > 0 && context > 0) return { prompt, context };
  const maxContext = numberIn(message, /maximum context length is (\d+)/i);
  if (maxContext !== null) {
    const tokens =
      numberIn(message, /resulted in (?:at least )?(\d+) tokens/i) ??
      numberIn(message, /has (\d+) input tokens/i) ??
      numberIn(message, /requested (\d+) tokens/i) ??
      numberIn(message, /\((\d+) in the messages/i);
    if (tokens !== null) return { prompt: tokens, context: maxContext };
  }
  const anthropic = /prompt is too long: (\d+) tokens > (\d+) maximum/i.exec(message);
  if (anthropic) return { prompt: Number(anthropic[1]), context: Number(anthropic[2]) + 1 };
  const sglang = /input \((\d+) tokens\) is longer than the model's context length \((\d+) tokens\)/i.exec(
    message,
  );
  if (sglang) return { prompt: Number(sglang[1]), context: Number(sglang[2]) };
  return null;
}

function statusOf(status: number): ContentfulStatusCode {
  return (status >= 400 && status <= 599 ? status : 502) as ContentfulStatusCode;
}

/** The backend's error answer (`status`, `body`) as the error the gateway's client gets. */
export function backendError(backend: string, status: number, body: unknown): ApiError {
  const parsed = objectOf(body);
  // OpenAI's {error: {...}}, Anthropic's {type: "error", error: {...}}, or FastAPI's {detail: ...}
  const detail = objectOf(parsed?.["error"]) ?? parsed ?? {};
  const rawMessage = detail["message"] ?? parsed?.["detail"] ?? parsed?.["message"];
  const message =
    typeof rawMessage === "string"
      ? rawMessage
      : typeof body === "string" && body.length > 0
        ? body.slice(0, 2000)
        : `backend ${backend} answered HTTP ${status}`;
  const overflow = overflowOf(detail, message);
  if (overflow !== null) return new ContextOverflow(overflow.prompt, overflow.context);
  const type =
    typeof detail["type"] === "string"
      ? detail["type"]
      : status >= 500
        ? "server_error"
        : "invalid_request_error";
  const code = typeof detail["code"] === "string" ? detail["code"] : null;
  const param = typeof detail["param"] === "string" ? detail["param"] : null;
  return new ApiError(statusOf(status), message, type, code, param);
}

/** No backend can take requests now. */
export function unavailable(message: string, retryAfterS: number): ApiError {
  return new ApiError(503, message, "service_unavailable_error", "no_backend", null, retryAfterS);
}
