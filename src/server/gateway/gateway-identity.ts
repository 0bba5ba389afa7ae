/**
 * Which program a request through the gateway is a turn of, read as `continuum serve` reads it: the program a
 * request names (program-identity.ts: body fields, each harness's headers, Claude Code's session on
 * Messages, a Responses conversation or Codex session), scoped to the request's tenant, with its turn fields
 * (turn-fields.ts); a chat request naming none joins the program of a reply its messages repeat
 * (conversation-programs.ts), else starts one. The one place the gateway's routes call program identity from.
 */
import { randomUUID } from "node:crypto";
import type { Context } from "hono";
import type { RetentionHints } from "../../core/client-hints.js";
import type { AppEnv } from "../generation/generation.js";
import { type ProgramApi, requestProgramOf, scopeToTenant } from "../programs/program-identity.js";
import { turnFields } from "../programs/turn-fields.js";
import type { ChatMessageInput, CommonBody } from "../schemas.js";
import type { GatewayContext } from "./gateway-context.js";

export interface TurnIdentity {
  /** tenant-scoped; null: a one-off */
  readonly programId: string | null;
  /** the gateway proposed the program (its client named none): its reply is remembered for the next turn */
  readonly implicit: boolean;
  readonly isLastStep: boolean;
  readonly toolHint: string | null;
  readonly retentionHints: RetentionHints;
  readonly cacheSalt: string | null;
  readonly tenant: string | null;
}

/**
 * `raw`: the request's JSON body as sent (where its program is named); `fields`: the OpenAI-style body its
 * turn fields are read from (a Messages request has none of its own: `{}`); `messages`: a chat
 * conversation, which joins or starts an implicit program when no id is named.
 */
export function turnIdentity(
  ctx: GatewayContext,
  c: Context<AppEnv>,
  api: ProgramApi,
  raw: unknown,
  fields: CommonBody,
  messages?: readonly ChatMessageInput[],
): TurnIdentity {
  const header = (name: string) => c.req.header(name);
  const turn = turnFields(fields, header);
  const tenant = c.get("tenant") ?? null;
  const scoped = scopeToTenant(tenant, requestProgramOf(api, raw, header).id, fields.cache_salt);
  let programId = scoped.programId;
  let implicit = false;
  if (programId === null && messages !== undefined) {
    programId =
      ctx.conversations.programOf(tenant, messages) ??
      (scopeToTenant(tenant, `implicit-${randomUUID().replace(/-/g, "").slice(0, 16)}`, null)
        .programId as string);
    implicit = true;
  }
  return {
    programId,
    implicit,
    isLastStep: turn.isLastStep,
    toolHint: turn.toolHint,
    retentionHints: turn.retentionHints,
    cacheSalt: scoped.cacheSalt,
    tenant,
  };
}
