/**
 * A request's agent program: every place a client may name it (body fields, each harness's headers,
 * Anthropic's metadata, Codex's conversation ids), their precedence, and how a tenant scopes the id. The
 * replica reads a request's program here, and `continuum cluster` generates its HAProxy configuration from
 * the same tables (src/cluster/haproxy-config.ts), so the balancer sends a program's turns to the replica
 * that holds its KV. What a request names no program of is settled by the replica alone (implicit programs
 * and side requests: turn-programs.ts).
 */
import { ApiError } from "../errors.js";
import { MAX_ID_CHARS } from "../schemas.js";

/** The APIs whose requests are turns of a program. */
export type ProgramApi = "chat" | "completions" | "messages" | "responses";

/** Where each API's requests are posted. */
export const PROGRAM_API_PATHS: Readonly<Record<ProgramApi, string>> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  messages: "/v1/messages",
  responses: "/v1/responses",
};

const ALL_APIS: readonly ProgramApi[] = ["chat", "completions", "messages", "responses"];
/** the APIs whose body carries the OpenAI-style program fields (a Messages body has Anthropic's own) */
const OPENAI_BODIES: readonly ProgramApi[] = ["chat", "completions", "responses"];

/** The endpoint naming a program in its path, `DELETE /v1/programs/{id}` (a router's finish-session). */
export const PROGRAM_PATH_PREFIX = "/v1/programs/";

/** A field of the JSON body (its path), or a header (lower case). */
export type ProgramIdLocation = { readonly body: readonly string[] } | { readonly header: string };

/**
 * How a source's value becomes a program id: `id`, a string or number, trimmed; `conversation`, a
 * conversation id alone or as `{ id }`; `claude-user-id`, Anthropic's `metadata.user_id` as Claude Code
 * writes it: a JSON object holding `session_id` (an object without one names no program), else the plain
 * string.
 */
export type ProgramIdForm = "id" | "conversation" | "claude-user-id";

export interface ProgramIdSource {
  /** as a 400 names it */
  readonly name: string;
  readonly at: ProgramIdLocation;
  readonly form: ProgramIdForm;
  /** the APIs whose requests it is read on */
  readonly apis: readonly ProgramApi[];
  /**
   * `names`: every such source a request gives must name the same program (else a 400 naming both), the
   * first one's id is the program; `stands-in`: read only when no `names` source is given, the first one
   * given is the program
   */
  readonly rank: "names" | "stands-in";
  /** read only when the source of this name is absent (its fallback) */
  readonly unless?: string;
}

/**
 * Where a program id comes from, in precedence order: the body's `job_id` (the authors' fork), `program_id`,
 * `session_id` and `session_params.session_id` (the vLLM router); Claude Code's `x-claude-code-session-id`
 * header, else its `metadata.user_id`; the headers `X-Program-Id` and `X-Session-ID` (vLLM router, llm-d,
 * opencode). On the Responses API, when none of those is given: the conversation of the Conversations API,
 * then Codex's `session-id` header, `thread-id` header, `client_metadata.session_id` and `prompt_cache_key`,
 * so every turn of one conversation or Codex session is one program.
 */
export const PROGRAM_ID_SOURCES: readonly ProgramIdSource[] = [
  { name: "job_id", at: { body: ["job_id"] }, form: "id", apis: OPENAI_BODIES, rank: "names" },
  { name: "program_id", at: { body: ["program_id"] }, form: "id", apis: OPENAI_BODIES, rank: "names" },
  { name: "session_id", at: { body: ["session_id"] }, form: "id", apis: OPENAI_BODIES, rank: "names" },
  {
    name: "session_params.session_id",
    at: { body: ["session_params", "session_id"] },
    form: "id",
    apis: OPENAI_BODIES,
    rank: "names",
  },
  {
    name: "x-claude-code-session-id",
    at: { header: "x-claude-code-session-id" },
    form: "id",
    apis: ["messages"],
    rank: "names",
  },
  {
    name: "metadata.user_id",
    at: { body: ["metadata", "user_id"] },
    form: "claude-user-id",
    apis: ["messages"],
    rank: "names",
    unless: "x-claude-code-session-id",
  },
  { name: "X-Program-Id", at: { header: "x-program-id" }, form: "id", apis: ALL_APIS, rank: "names" },
  { name: "X-Session-ID", at: { header: "x-session-id" }, form: "id", apis: ALL_APIS, rank: "names" },
  {
    name: "conversation",
    at: { body: ["conversation"] },
    form: "conversation",
    apis: ["responses"],
    rank: "stands-in",
  },
  { name: "session-id", at: { header: "session-id" }, form: "id", apis: ["responses"], rank: "stands-in" },
  { name: "thread-id", at: { header: "thread-id" }, form: "id", apis: ["responses"], rank: "stands-in" },
  {
    name: "client_metadata.session_id",
    at: { body: ["client_metadata", "session_id"] },
    form: "id",
    apis: ["responses"],
    rank: "stands-in",
  },
  {
    name: "prompt_cache_key",
    at: { body: ["prompt_cache_key"] },
    form: "id",
    apis: ["responses"],
    rank: "stands-in",
  },
];

/**
 * Response headers naming state a replica keeps for later requests (a stored response, a conversation), so
 * a balancer can remember where it is.
 */
export const RESPONSE_ID_HEADER = "X-Continuum-Response-Id";
export const CONVERSATION_ID_HEADER = "X-Continuum-Conversation-Id";

/**
 * Where a request names kept state: the id in the path of these endpoints (its fourth `/` field: `GET`,
 * `DELETE`, `cancel`, `input_items`, a conversation's items), or on the Responses API the response or the
 * conversation (an id, or `{ id }`) it goes on from. A stored response's and a conversation's ids never
 * collide (`resp_...`, `conv_...`).
 */
export const KEPT_STATE_PATH_PREFIXES: readonly string[] = ["/v1/responses/", "/v1/conversations/"];
export const KEPT_STATE_FIELDS: readonly {
  readonly path: readonly string[];
  readonly form: ProgramIdForm;
}[] = [
  { path: ["previous_response_id"], form: "id" },
  { path: ["conversation"], form: "conversation" },
];

/** A request's header by its (case-insensitive) name. */
export type HeaderReader = (name: string) => string | undefined;

/** The program a request names, and the source it was read from. */
export interface NamedProgram {
  readonly id: string;
  readonly source: string;
}

function idOf(value: unknown): string | null {
  if (typeof value !== "string" && typeof value !== "number") return null;
  const id = String(value).trim();
  return id.length > 0 ? id : null;
}

function claudeUserId(value: unknown): string | null {
  if (typeof value !== "string") return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return idOf(value);
  }
  if (typeof parsed !== "object" || parsed === null) return idOf(value);
  return idOf((parsed as Record<string, unknown>)["session_id"]);
}

/** A source's raw value as a program id (null: it names none). */
function idInForm(form: ProgramIdForm, value: unknown): string | null {
  switch (form) {
    case "id":
      return idOf(value);
    case "conversation":
      return typeof value === "object" && value !== null
        ? idOf((value as Record<string, unknown>)["id"])
        : idOf(value);
    case "claude-user-id":
      return claudeUserId(value);
  }
}

function fieldAt(body: unknown, path: readonly string[]): unknown {
  let value = body;
  for (const key of path) {
    if (typeof value !== "object" || value === null) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

function valueAt(at: ProgramIdLocation, body: unknown, header: HeaderReader): unknown {
  return "header" in at ? header(at.header) : fieldAt(body, at.body);
}

/**
 * The program a request of `api` names (null: none), read from its JSON body and headers as
 * PROGRAM_ID_SOURCES says. A 400 names the source of an id longer than MAX_ID_CHARS, and both sources when
 * two `names` sources name different programs.
 */
export function programIdOf(api: ProgramApi, body: unknown, header: HeaderReader): NamedProgram | null {
  const read = (source: ProgramIdSource): NamedProgram | null => {
    const id = idInForm(source.form, valueAt(source.at, body, header));
    if (id === null) return null;
    if (id.length > MAX_ID_CHARS) {
      throw ApiError.badRequest(
        `${source.name} has ${id.length} characters; program ids may have at most ${MAX_ID_CHARS}`,
        source.name,
      );
    }
    return { id, source: source.name };
  };
  const sources = PROGRAM_ID_SOURCES.filter((source) => source.apis.includes(api));
  const naming: NamedProgram[] = [];
  for (const source of sources) {
    if (source.rank !== "names" || naming.some((p) => p.source === source.unless)) continue;
    const named = read(source);
    if (named !== null) naming.push(named);
  }
  const first = naming[0];
  const conflict = naming.find((p) => p.id !== first?.id);
  if (first && conflict) {
    throw ApiError.badRequest(
      `${first.source} (${JSON.stringify(first.id)}) and ${conflict.source} (${JSON.stringify(conflict.id)}) name different programs`,
      "program_id",
    );
  }
  if (first) return first;
  for (const source of sources) {
    const standIn = source.rank === "stands-in" ? read(source) : null;
    if (standIn !== null) return standIn;
  }
  return null;
}

/** A request's program and, for a subagent, the program that spawned it (null: none named). */
export interface RequestProgram {
  readonly id: string | null;
  readonly parentId: string | null;
}

/**
 * Where a client names the program that spawned this one as a subagent, in precedence order: the body's
 * `parent_program_id`, the `X-Parent-Program-Id` header, opencode's `X-Parent-Session-Id`.
 */
const PARENT_SOURCES: readonly { readonly name: string; readonly at: ProgramIdLocation }[] = [
  { name: "parent_program_id", at: { body: ["parent_program_id"] } },
  { name: "X-Parent-Program-Id", at: { header: "x-parent-program-id" } },
  { name: "X-Parent-Session-Id", at: { header: "x-parent-session-id" } },
];

/**
 * A request's program and its parent. A Claude Code subagent (the Task / Agent tool) is a program of its
 * own: its requests carry `x-claude-code-agent-id` (stable for the subagent's life, absent on the main
 * conversation's turns) beside the session, and `x-claude-code-parent-agent-id` when a subagent spawned
 * it; its program is `<session>/agent-<id>`, its parent the session's program or the parent agent's. The
 * balancer, which reads the session alone, keeps a session's subagents on its replica, beside the prefix
 * they share.
 */
export function requestProgramOf(api: ProgramApi, body: unknown, header: HeaderReader): RequestProgram {
  const named = programIdOf(api, body, header);
  const agentId = idOf(header("x-claude-code-agent-id"));
  const fromClaudeCode = named?.source === "x-claude-code-session-id" || named?.source === "metadata.user_id";
  if (named !== null && fromClaudeCode && agentId !== null) {
    const parentAgentId = idOf(header("x-claude-code-parent-agent-id"));
    return {
      id: `${named.id}/agent-${agentId}`,
      parentId: parentAgentId === null ? named.id : `${named.id}/agent-${parentAgentId}`,
    };
  }
  for (const source of PARENT_SOURCES) {
    const parent = idOf(valueAt(source.at, body, header));
    if (parent === null) continue;
    if (parent.length > MAX_ID_CHARS) {
      throw ApiError.badRequest(
        `${source.name} has ${parent.length} characters; program ids may have at most ${MAX_ID_CHARS}`,
        source.name,
      );
    }
    return { id: named?.id ?? null, parentId: parent };
  }
  return { id: named?.id ?? null, parentId: null };
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
