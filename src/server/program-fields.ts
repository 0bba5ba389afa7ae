import type { RetentionHints } from "../core/client-hints.js";
import { ApiError } from "./errors.js";
import { type CommonBody, MAX_ID_CHARS } from "./schemas.js";

/** Which agent program a request belongs to, and what its client declares about this turn. */
export interface ProgramFields {
  /** null: a one-off request (no program, or `job_id: null` which crashed the authors' fork) */
  readonly programId: string | null;
  readonly isLastStep: boolean;
  readonly toolHint: string | null;
  readonly retentionHints: RetentionHints;
  /** the program that spawned this one as a subagent, as the client says (docs/agents-apis.md); null: none said */
  readonly parentProgramId: string | null;
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
 * Where a program id may come from, in precedence order: the body's `job_id` (the authors' fork),
 * `program_id`, `session_id` and `session_params.session_id` (the vLLM router), then the headers
 * `X-Program-Id` and `X-Session-ID` (vLLM router, llm-d). The HAProxy configuration of
 * `continuum cluster` hashes on the same order.
 */
function programIdSources(body: CommonBody, header: HeaderReader): [string, string | null][] {
  return [
    ["job_id", idOf(body.job_id)],
    ["program_id", idOf(body.program_id)],
    ["session_id", idOf(body.session_id)],
    ["session_params.session_id", idOf(body.session_params?.session_id)],
    ["X-Program-Id", idOf(header("x-program-id"))],
    ["X-Session-ID", idOf(header("x-session-id"))],
  ];
}

/**
 * Program fields from the body and the headers (see programIdSources); any two sources that name
 * different programs are an error. `is_last_step` in the body wins over the `X-Last-Step` header.
 */
export function programFields(body: CommonBody, header: HeaderReader): ProgramFields {
  const given = programIdSources(body, header).filter((s): s is [string, string] => s[1] !== null);
  const tooLong = given.find(([, id]) => id.length > MAX_ID_CHARS);
  if (tooLong) {
    throw ApiError.badRequest(
      `${tooLong[0]} has ${tooLong[1].length} characters; program ids may have at most ${MAX_ID_CHARS}`,
      tooLong[0],
    );
  }
  const first = given[0];
  const conflict = given.find(([, id]) => id !== first?.[1]);
  if (first && conflict) {
    throw ApiError.badRequest(
      `${first[0]} (${JSON.stringify(first[1])}) and ${conflict[0]} (${JSON.stringify(conflict[1])}) name different programs`,
      "program_id",
    );
  }
  const headerLast = header("x-last-step");
  const hint = body.this_func_call?.trim();
  const parent =
    idOf(body.parent_program_id) ??
    idOf(header("x-parent-program-id")) ??
    idOf(header("x-parent-session-id"));
  if (parent !== null && parent.length > MAX_ID_CHARS) {
    throw ApiError.badRequest(
      `the parent program id has ${parent.length} characters; program ids may have at most ${MAX_ID_CHARS}`,
      "parent_program_id",
    );
  }
  return {
    programId: first?.[1] ?? null,
    parentProgramId: parent,
    isLastStep:
      body.is_last_step ?? (headerLast === undefined ? false : booleanHeader(headerLast, "X-Last-Step")),
    toolHint: hint ? hint : null,
    retentionHints: retentionHints(body),
  };
}

/**
 * Tenants never share programs or cached KV: the engine sees a program id and a prefix-cache salt scoped
 * by the tenant (the API key the request came with), and the client's `cache_salt` scopes reuse further
 * inside a tenant. An open server (no API keys) is one tenant and keeps ids as sent.
 */
export function scopeToTenant(
  tenant: string | null,
  programId: string | null,
  cacheSalt: string | null | undefined,
): { programId: string | null; cacheSalt: string | null } {
  const salt = [tenant, cacheSalt].filter((part) => part !== null && part !== undefined).join("\u0000");
  return {
    programId: programId === null || tenant === null ? programId : `${tenant}/${programId}`,
    cacheSalt: salt === "" ? null : salt,
  };
}

/**
 * A Claude Code subagent (the Task / Agent tool) as a program of its own: its requests carry
 * `x-claude-code-agent-id` (stable for the subagent's life, absent on the main conversation's turns) beside
 * the session's `x-claude-code-session-id`, and `x-claude-code-parent-agent-id` when a subagent spawned it.
 * Its program is `<session>/agent-<id>`, its parent the session's program or the parent agent's. Null
 * without an agent id (the main conversation, Claude Code before these headers, its Workflow tool's agents).
 */
export function claudeCodeAgentProgram(
  header: HeaderReader,
  sessionId: string | null,
): { programId: string; parentProgramId: string } | null {
  const agentId = idOf(header("x-claude-code-agent-id"));
  if (agentId === null || sessionId === null) return null;
  const parentAgentId = idOf(header("x-claude-code-parent-agent-id"));
  return {
    programId: `${sessionId}/agent-${agentId}`,
    parentProgramId: parentAgentId === null ? sessionId : `${sessionId}/agent-${parentAgentId}`,
  };
}

/**
 * Claude Code's session, so every turn of one session is one program: its `x-claude-code-session-id`
 * header, else the Messages API's `metadata.user_id` when it is a JSON string holding `session_id`,
 * or the plain string itself.
 */
export function claudeCodeSessionId(
  header: HeaderReader,
  metadataUserId: string | null | undefined,
): string | null {
  const fromHeader = idOf(header("x-claude-code-session-id"));
  if (fromHeader !== null || metadataUserId === null || metadataUserId === undefined) return fromHeader;
  let parsed: unknown;
  try {
    parsed = JSON.parse(metadataUserId);
  } catch {
    return idOf(metadataUserId);
  }
  if (typeof parsed !== "object" || parsed === null) return idOf(metadataUserId);
  const session = (parsed as Record<string, unknown>)["session_id"];
  return typeof session === "string" ? idOf(session) : null;
}
