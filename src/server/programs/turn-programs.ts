/**
 * Which program a chat request is a turn of, beyond the id its client sent (program-identity.ts): the
 * server's one memory of programs. A client that sends no id gets the program of a reply its messages repeat
 * (conversation-programs.ts), else a new one (`implicit-` and 16 hex digits); its program's last step ends
 * that memory of it. A request without tools that names a program whose turns offer tools is a side request
 * of that program, such as opencode's title request under the session's `x-session-id`: it is served as a
 * one-off (not pinned, not a turn), unless it says it ends the program. One that arrives before the program's first turn with tools starts
 * as a turn; if a turn with tools arrives while it is still in flight, the engine is told it is a side
 * request (turns of one program follow each other; a request beside a turn is not one).
 */
import { randomUUID } from "node:crypto";
import type { GenerateRequest } from "../../engine/engine-api.js";
import type { ParsedToolCall } from "../output/tool-calls.js";
import type { ChatMessageInput } from "../schemas.js";
import { ConversationPrograms } from "./conversation-programs.js";
import { scopeToTenant } from "./program-identity.js";

/** What a chat request says about its turn. */
export interface ChatTurn {
  /** the model's answers its history carries */
  readonly priorTurns: number;
  readonly offersTools: boolean;
  /** its conversation, as the client sent it */
  readonly messages: readonly ChatMessageInput[];
}

/** The engine's program fields of a request, and whether the server found its program (its client named none). */
export type EngineProgram = Pick<GenerateRequest, "programId" | "cacheSalt"> & { readonly implicit: boolean };

/** the engine's word that a request in flight is a side request of its program */
type MarkSideRequest = (programId: string, requestId: string) => void;

/** tool-less requests remembered per program while it has no turn with tools (the latest ones) */
const TOOL_LESS_KEPT = 4;

export class TurnPrograms {
  /** tenant-scoped ids of programs seen with tools, least recently used first */
  private readonly withTools = new Set<string>();
  /** programs not seen with tools: their latest tool-less requests, least recently used first */
  private readonly toolLess = new Map<string, string[]>();
  /** the replies of programs whose clients name none, by the conversation they answered */
  private readonly conversations: ConversationPrograms;

  /** `maxPrograms`: programs remembered in each table */
  constructor(
    private readonly maxPrograms: number,
    private readonly markSideRequest: MarkSideRequest,
  ) {
    this.conversations = new ConversationPrograms(maxPrograms);
  }

  /**
   * The engine's program fields for a request of `tenant` naming `programId` (null: none). `chat`: what a
   * chat request says about its turn (null for raw prompts, which keep the id as sent).
   */
  programOf(
    tenant: string | null,
    programId: string | null,
    cacheSalt: string | null | undefined,
    isLastStep: boolean,
    chat: ChatTurn | null,
  ): EngineProgram {
    const scoped = { ...scopeToTenant(tenant, programId, cacheSalt), implicit: false };
    if (chat === null) return scoped;
    if (scoped.programId === null) {
      // a conversation continues within its tenant and cache salt, the scope its KV is shared in
      const known = this.conversations.programOf(scoped.cacheSalt, chat.messages);
      const fresh = () => `implicit-${randomUUID().replace(/-/g, "").slice(0, 16)}`;
      const id = known ?? (scopeToTenant(tenant, fresh(), null).programId as string);
      return { ...scoped, programId: id, implicit: true };
    }
    if (chat.offersTools) {
      this.sawTools(scoped.programId);
      return scoped;
    }
    return this.withTools.has(scoped.programId) && !isLastStep ? { ...scoped, programId: null } : scoped;
  }

  /**
   * A chat request is queued on the engine as `program` (what programOf gave): a tool-less turn of a program
   * not known to offer tools is remembered, so that a turn with tools arriving while it runs makes it a side
   * request; if such a turn came in the meantime, it is one now.
   */
  queued(program: EngineProgram, requestId: string, isLastStep: boolean, chat: ChatTurn | null): void {
    const id = program.programId;
    if (id === null || program.implicit || chat === null || chat.offersTools) return;
    if (isLastStep) return;
    if (this.withTools.has(id)) {
      this.markSideRequest(id, requestId);
      return;
    }
    const ids = this.toolLess.get(id) ?? [];
    this.toolLess.delete(id);
    this.toolLess.set(id, [...ids.slice(1 - TOOL_LESS_KEPT), requestId]);
    if (this.toolLess.size > this.maxPrograms)
      this.toolLess.delete(this.toolLess.keys().next().value as string);
  }

  /**
   * A turn of a program the server found for it (`programOf` gave `implicit`) ended with `reply` (null:
   * aborted): the conversation's next turn repeats it and goes on in the same program, unless this was its
   * last step.
   */
  answered(
    program: { readonly programId: string; readonly cacheSalt: string | null },
    messages: readonly ChatMessageInput[],
    isLastStep: boolean,
    reply: { readonly content: string | null; readonly calls: readonly ParsedToolCall[] } | null,
  ): void {
    const { programId, cacheSalt } = program;
    if (isLastStep) this.conversations.forget(programId);
    else if (reply !== null)
      this.conversations.answered(cacheSalt, messages, reply.content, reply.calls, programId);
  }

  private sawTools(programId: string): void {
    this.withTools.delete(programId);
    this.withTools.add(programId);
    if (this.withTools.size > this.maxPrograms) {
      this.withTools.delete(this.withTools.values().next().value as string);
    }
    // finished ones are no longer in flight: the engine leaves them as they were
    for (const requestId of this.toolLess.get(programId) ?? []) this.markSideRequest(programId, requestId);
    this.toolLess.delete(programId);
  }
}
