/**
 * Which program a request through the gateway is a turn of, read as `continuum serve` reads it: the body's and
 * headers' program fields (program-fields.ts), Claude Code's session on Messages, a Responses conversation
 * (responses-program.ts), scoped to the request's tenant; a chat request naming none joins the program of a
 * reply its messages repeat (conversation-programs.ts), else starts one. The one place the gateway's routes
 * call program identity from.
 */
import { randomUUID } from "node:crypto";
import type { Context } from "hono";
import type { RetentionHints } from "../../core/client-hints.js";
import type { AppEnv } from "../generation.js";
import { claudeCodeSessionId, programFields, scopeToTenant } from "../program-fields.js";
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

export interface IdentitySources {
  /** a chat conversation: joins or starts an implicit program when no id is named */
  readonly messages?: readonly ChatMessageInput[];
  /** Messages API: Claude Code's session header or metadata.user_id */
  readonly metadataUserId?: string | null;
}

export function turnIdentity(
  ctx: GatewayContext,
  c: Context<AppEnv>,
  body: CommonBody,
  sources: IdentitySources = {},
): TurnIdentity {
  const header = (name: string) => c.req.header(name);
  const fields = programFields(body, header);
  const tenant = c.get("tenant") ?? null;
  const named =
    fields.programId ??
    (sources.metadataUserId === undefined ? null : claudeCodeSessionId(header, sources.metadataUserId));
  const scoped = scopeToTenant(tenant, named, body.cache_salt);
  let programId = scoped.programId;
  let implicit = false;
  if (programId === null && sources.messages !== undefined) {
    programId =
      ctx.conversations.programOf(tenant, sources.messages) ??
      (scopeToTenant(tenant, `implicit-${randomUUID().replace(/-/g, "").slice(0, 16)}`, null)
        .programId as string);
    implicit = true;
  }
  return {
    programId,
    implicit,
    isLastStep: fields.isLastStep,
    toolHint: fields.toolHint,
    retentionHints: fields.retentionHints,
    cacheSalt: scoped.cacheSalt,
    tenant,
  };
}
