import type { TokenIdContent } from "../core/kv/token-content.js";
import type { CellLedger } from "./cell-ledger.js";
import type { KvSlot, KvSlotStats } from "./kv-slot.js";
import type { ModelRunner } from "./model-runner.js";
import type { SlotHashIndex } from "./slot-hash-index.js";
import type { StateBufferPool } from "./state-buffer-pool.js";

/** Frees `cells` cells for a copy or a restore, never evicting `protect`; false when it cannot. */
export type MakeRoom = (cells: number, protect: readonly KvSlot[]) => Promise<boolean>;

/**
 * How much of a sequence a request going on from it keeps: the blocks it matched, and past them the
 * sequence's positions while they hold the request's tokens (up to, not with, its last token, computed for
 * its logits). The executor goes on from there rather than computing them again; for a sliding-window model
 * this is what lets a program's next turn continue its sequence whole (below). Nothing past a match of no
 * blocks: a match is what says the sequence's tokens are this tenant's.
 */
export function heldPast(
  previous: TokenIdContent | null,
  length: number,
  content: TokenIdContent,
  matched: number,
): number {
  if (matched === 0 || previous === null) return matched;
  const end = Math.min(length, content.length - 1);
  let held = matched;
  while (held < end && previous.tokenAt(held) === content.tokenAt(held)) held++;
  return held;
}

/**
 * A slot's KV in the runner's pool, changed in step with the cell ledger and the hash index: positions
 * dropped, computed, or taken from another slot (its cells shared in one unified pool, its data copied into
 * the slot's own stream with the streams layout).
 *
 * A model with sliding-window layers (`runner.slidingWindow`) keeps, for those layers, only each sequence's
 * last window: llama.cpp hands a cell to any sequence needing room once the next position of the one
 * sequence holding it no longer attends to it, so a slot continued at position p needs the window before p,
 * and only its end has it for sure (one position back needs one cell more than its end kept). Cutting such
 * a slot back at all empties it (the request recomputes, and is counted so), and only a slot ending exactly
 * where a prefix ends (a checkpoint, kv-slots.ts) gives that prefix to another, as a copy by its saved state,
 * which holds just the window: `seq_cp` would also share the sliding-window cache's older cells, which a
 * cell held by two sequences never gives back, and that cache is sized for windows only.
 */
export class SlotCells {
  /** unified pool: slots share a prefix's cells (copySeq); streams: each slot holds its own copy */
  readonly sharesCells: boolean;
  /** the model has sliding-window layers: slots are continued whole or not at all (above) */
  readonly windowed: boolean;

  constructor(
    readonly runner: ModelRunner,
    readonly ledger: CellLedger,
    readonly index: SlotHashIndex,
    readonly stats: KvSlotStats,
    /** saved states' reusable buffers (the tier store's), for copies between streams */
    private readonly buffers: StateBufferPool | null,
    /** room in one unified pool for a state restored into it (the tier's, a windowed model's copy) */
    readonly makeRoom: MakeRoom,
  ) {
    this.sharesCells = runner.kvLayout === "unified";
    this.windowed = runner.slidingWindow > 0;
  }

  /** Drops positions >= length of a slot (every position, for a windowed model). */
  truncate(slot: KvSlot, keep: number): void {
    if (slot.length <= keep) return;
    const length = this.windowed ? 0 : keep;
    this.runner.removeSeq(slot.seqId, length, -1);
    this.ledger.release(slot.cells, length);
    if (length === 0) {
      slot.content = null;
      slot.holdsPrefix = false;
    }
    this.index.sync(slot);
  }

  /** Records n positions computed (or restored) into a slot. */
  extend(slot: KvSlot, n: number): void {
    this.ledger.alloc(slot.cells, n);
    this.index.sync(slot);
  }

  /** Whether `sharePrefix` can give another slot the first `tokens` positions of `source`. */
  canShare(source: KvSlot, tokens: number): boolean {
    return !this.windowed || source.length === tokens;
  }

  /** A prefix taken from another slot is a copy of its data (cells of its own), not the same cells. */
  get copiesPrefixes(): boolean {
    return !this.sharesCells || this.windowed;
  }

  /**
   * The empty `slot` takes the first `tokens` positions of `source`: their cells, in one unified pool; a copy
   * of their data (`copiesPrefixes`: into its own stream with streams, into cells of its own for a windowed
   * model). A copy that finds no room (in one pool, after `makeRoom`), or a source that cannot give them
   * (`canShare`), leaves the slot empty (the request then recomputes). `checkpoint`: the copy is a
   * checkpoint's, not a request's prefix (counted apart).
   */
  async sharePrefix(source: KvSlot, slot: KvSlot, tokens: number, checkpoint = false): Promise<void> {
    if (!this.canShare(source, tokens)) return;
    if (!this.copiesPrefixes) {
      this.runner.copySeq(source.seqId, slot.seqId, tokens);
      this.ledger.sharePrefix(source.cells, slot.cells, tokens);
      this.index.sync(slot);
      this.stats.sharedTokens += tokens;
      return;
    }
    // the copy lands in the empty slot's own stream, or in free cells of the one pool
    if (this.sharesCells && !(await this.makeRoom(tokens, [source, slot]))) return;
    const buffers = this.buffers;
    let held: number;
    try {
      const state = await this.runner.saveSeq(source.seqId, buffers ? (n) => buffers.take(n) : undefined);
      try {
        held = await this.runner.restoreSeq(slot.seqId, state);
      } finally {
        buffers?.give(state);
      }
    } catch {
      this.runner.removeSeq(slot.seqId, 0, -1);
      return;
    }
    this.extend(slot, held);
    this.truncate(slot, tokens);
    if (checkpoint) this.stats.checkpointTokens += slot.length;
    else this.stats.copiedTokens += slot.length;
  }

  /** In one unified pool, the slot's first `tokens` positions (its own copy) become `shared`'s cells. */
  swapPrefix(slot: KvSlot, shared: KvSlot, tokens: number): void {
    this.runner.removeSeq(slot.seqId, 0, tokens);
    this.ledger.release(slot.cells, 0, tokens);
    this.runner.copySeq(shared.seqId, slot.seqId, tokens);
    this.ledger.sharePrefix(shared.cells, slot.cells, tokens);
    this.index.sync(slot);
    this.stats.sharedTokens += tokens;
  }
}
