/**
 * Which programs are subagents of which, as their clients say (a request's `parentProgramId`: Claude Code's
 * agent-id headers, OpenCode's parent session, our `parent_program_id`): a parent whose turn ended in the
 * call that spawned them waits on them, so its tool time is theirs, and the server serves them.
 */
export class SubagentLinks {
  private readonly parentOf = new Map<string, string>();
  private readonly childrenOf = new Map<string, Set<string>>();

  /** `childId` was spawned by `parentId` (the first word holds: a program has one parent). */
  link(childId: string, parentId: string): void {
    if (childId === parentId || this.parentOf.has(childId)) return;
    this.parentOf.set(childId, parentId);
    let children = this.childrenOf.get(parentId);
    if (!children) {
      children = new Set();
      this.childrenOf.set(parentId, children);
    }
    children.add(childId);
  }

  /** Ids of the programs `parentId` spawned that are still known. */
  children(parentId: string): ReadonlySet<string> {
    return this.childrenOf.get(parentId) ?? EMPTY;
  }

  parent(childId: string): string | null {
    return this.parentOf.get(childId) ?? null;
  }

  /** The program is forgotten: its links go (its children keep theirs to each other). */
  forget(programId: string): void {
    const parent = this.parentOf.get(programId);
    if (parent !== undefined) {
      this.parentOf.delete(programId);
      const siblings = this.childrenOf.get(parent);
      siblings?.delete(programId);
      if (siblings?.size === 0) this.childrenOf.delete(parent);
    }
    for (const child of this.childrenOf.get(programId) ?? []) this.parentOf.delete(child);
    this.childrenOf.delete(programId);
  }

  get size(): number {
    return this.parentOf.size;
  }
}

const EMPTY: ReadonlySet<string> = new Set();
