import { ApiError } from "./errors.js";
import type { CommonBody } from "./schemas.js";

/** Which agent program a request belongs to, and what its client declares about this turn. */
export interface ProgramFields {
  /** null: a one-off request (no program, or `job_id: null` which crashed the authors' fork) */
  readonly programId: string | null;
  readonly isLastStep: boolean;
  readonly toolHint: string | null;
}

type HeaderReader = (name: string) => string | undefined;

function idOf(value: string | number | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  const id = String(value).trim();
  return id.length > 0 ? id : null;
}

function booleanHeader(raw: string, name: string): boolean {
  const value = raw.trim().toLowerCase();
  if (value === "true" || value === "1" || value === "yes") return true;
  if (value === "false" || value === "0" || value === "no") return false;
  throw ApiError.badRequest(`header ${name} must be true or false, got ${JSON.stringify(raw)}`, name);
}

/**
 * Program fields from the body (`job_id` as the fork's clients send it, or `program_id`) and the
 * headers `X-Program-Id` / `X-Last-Step`. The body wins over headers; `job_id` and `program_id` that
 * disagree are an error.
 */
export function programFields(body: CommonBody, header: HeaderReader): ProgramFields {
  const jobId = idOf(body.job_id);
  const programId = idOf(body.program_id);
  if (jobId !== null && programId !== null && jobId !== programId) {
    throw ApiError.badRequest(
      `job_id (${JSON.stringify(jobId)}) and program_id (${JSON.stringify(programId)}) disagree`,
      "program_id",
    );
  }
  const headerId = header("x-program-id");
  const headerLast = header("x-last-step");
  const hint = body.this_func_call?.trim();
  return {
    programId: jobId ?? programId ?? idOf(headerId),
    isLastStep:
      body.is_last_step ?? (headerLast === undefined ? false : booleanHeader(headerLast, "X-Last-Step")),
    toolHint: hint ? hint : null,
  };
}
