import type { RetentionHints } from "../../core/client-hints.js";
import { ApiError } from "../errors.js";
import type { CommonBody } from "../schemas.js";
import type { HeaderReader } from "./program-identity.js";

/** What a request's client declares about its turn (its program: program-identity.ts). */
export interface TurnFields {
  readonly isLastStep: boolean;
  readonly toolHint: string | null;
  readonly retentionHints: RetentionHints;
}

const SECONDS_PER_UNIT: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600 };

/** A cache-control TTL ("30s", "5m", "1h" or seconds) in seconds; an ephemeral mark alone: no bound. */
function ttlSeconds(ttl: string | number | null | undefined): number | null {
  if (ttl === null || ttl === undefined) return null;
  if (typeof ttl === "number") return ttl;
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(ttl) as RegExpExecArray;
  return Number(m[1]) * (SECONDS_PER_UNIT[m[2] as string] as number);
}

function retentionHints(body: CommonBody): RetentionHints {
  const control = body.cache_control ?? body.nvext?.cache_control ?? null;
  return {
    ttlS: control ? ttlSeconds(control.ttl) : null,
    expectedToolS: body.expected_tool_duration_s ?? null,
  };
}

function booleanHeader(raw: string, name: string): boolean {
  const value = raw.trim().toLowerCase();
  if (value === "true" || value === "1" || value === "yes") return true;
  if (value === "false" || value === "0" || value === "no") return false;
  throw ApiError.badRequest(`header ${name} must be true or false, got ${JSON.stringify(raw)}`, name);
}

/** Turn fields from the body and the headers: `is_last_step` in the body wins over the `X-Last-Step` header. */
export function turnFields(body: CommonBody, header: HeaderReader): TurnFields {
  const headerLast = header("x-last-step");
  const hint = body.this_func_call?.trim();
  return {
    isLastStep:
      body.is_last_step ?? (headerLast === undefined ? false : booleanHeader(headerLast, "X-Last-Step")),
    toolHint: hint ? hint : null,
    retentionHints: retentionHints(body),
  };
}
