/**
 * Which program a chat request is a turn of, beyond the id its client sent. A client that sends no id gets
 * a program proposed by the server: the engine makes the request a turn of the program whose recent turn its
 * prompt continues, else the first turn of this one (src/engine/implicit-programs.ts). A request without
 * tools that names a program whose turns offer tools is a side request of that program, such as opencode's
 * title request under the session's `x-session-id`: it is served as a one-off (not pinned, not a turn),
 * unless it says it ends the program.
 */
import { randomUUID } from "node:crypto";
import type { GenerateRequest } from "../engine/engine-api.js";
import { scopeToTenant } from "./program-fields.js";

/** What a chat request says about its turn. */
export interface ChatTurn {
  /** the model's answers its history carries */
  readonly priorTurns: number;
  readonly offersTools: boolean;
}

type EngineProgram = Pick<GenerateRequest, "programId" | "cacheSalt" | "implicitProgramId">;

export class TurnPrograms {
  /** tenant-scoped ids of programs seen with tools, least recently used first */
  private readonly withTools = new Set<string>();

  /** `maxPrograms`: programs with tools remembered */
  constructor(private readonly maxPrograms: number) {}

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
    const scoped = scopeToTenant(tenant, programId, cacheSalt);
    if (chat === null) return scoped;
    if (scoped.programId === null) {
      const proposed = `implicit-${randomUUID().replace(/-/g, "").slice(0, 16)}`;
      return { ...scoped, implicitProgramId: scopeToTenant(tenant, proposed, null).programId as string };
    }
    if (chat.offersTools) {
      this.withTools.delete(scoped.programId);
      this.withTools.add(scoped.programId);
      if (this.withTools.size > this.maxPrograms) {
        this.withTools.delete(this.withTools.values().next().value as string);
      }
      return scoped;
    }
    return this.withTools.has(scoped.programId) && !isLastStep ? { ...scoped, programId: null } : scoped;
  }
}
