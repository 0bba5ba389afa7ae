/**
 * What an executor's KV memory is, which decides how the scheduler places KV in it. The scheduler plans
 * against the spec; the executor carries the plan out.
 */

/** vLLM's paged attention at GPU scale: blocks are the memory, a prefix is shared by block table. */
export interface PagedKvSpec {
  readonly kind: "paged";
}

/**
 * How llama.cpp lays out its KV cells. `unified`: one pool every sequence draws from, a prefix shared by
 * `seq_cp`; `streams`: a stream of cells / numSeqs cells per sequence, a prefix moved as a copy of its data.
 */
export type KvLayout = "unified" | "streams";

export const KV_LAYOUTS: readonly KvLayout[] = ["unified", "streams"];

/** llama.cpp's sequences (docs/engine.md, "KV mapping onto llama.cpp"). */
export interface LlamaSeqKvSpec {
  readonly kind: "llama-seq";
  /** sequence ids 0..numSeqs-1 */
  readonly numSeqs: number;
  /** KV cells over every sequence (one pool, or numSeqs streams) */
  readonly cells: number;
  readonly layout: KvLayout;
  /**
   * Tokens a sliding-window layer attends to (0: no such layers). llama.cpp keeps only each sequence's last
   * window of those layers, so a sequence is continued only at its end, and a prefix is copied (by saved
   * state) only from a sequence ending exactly there.
   */
  readonly slidingWindow: number;
  /**
   * Only running sequences stay in the pool (a model on the CPU with a RAM tier, the same memory): the rest
   * wait in the tier, and an emptied pool places KV from its first cell again.
   */
  readonly runningOnly: boolean;
}

export type KvSpec = PagedKvSpec | LlamaSeqKvSpec;

export const PAGED_KV: PagedKvSpec = { kind: "paged" };

/** A sequence's prefix given to another is a copy of its data (its own cells), not the same cells. */
export function copiesPrefixData(spec: LlamaSeqKvSpec): boolean {
  return spec.layout === "streams" || spec.slidingWindow > 0;
}

/**
 * Each copy of a prefix is counted in the pool's blocks (fresh blocks, not the source's): one unified pool
 * whose copies are data copies (a sliding-window model). With streams each sequence has its own cells.
 */
export function copiesTakeBlocks(spec: KvSpec): boolean {
  return spec.kind === "llama-seq" && spec.layout === "unified" && spec.slidingWindow > 0;
}
