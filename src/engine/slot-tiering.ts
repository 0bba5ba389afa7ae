import type { TokenIdContent } from "../core/kv/token-content.js";
import type { KvSlot, RestoreListener } from "./kv-slot.js";
import type { KvTierStore, TierEntry } from "./kv-tier-store.js";
import { heldPast, type SlotCells } from "./slot-cells.js";

/**
 * Slots' KV to and from the RAM/disk tier store: a slot's state saved before the engine drops it (unless
 * another slot or a saved state already holds all its blocks), and a saved state restored into an empty slot.
 */
export class SlotTiering {
  constructor(
    private readonly tiers: KvTierStore,
    private readonly cells: SlotCells,
    private readonly onRestore: RestoreListener | null,
  ) {}

  get enabled(): boolean {
    return this.tiers.enabled;
  }

  /** The saved state sharing the most leading blocks with `content` (at most limitBlocks), if any. */
  best(content: TokenIdContent, needTokens: number, limitBlocks: number) {
    return this.tiers.best(content, needTokens, limitBlocks);
  }

  /** Saves a slot about to be dropped when that keeps something new; the tier it went to, or null. */
  async save(slot: KvSlot): Promise<"cpu" | "disk" | null> {
    const content = slot.content;
    if (!this.tiers.enabled || content === null || slot.length < this.cells.index.blockSizeTokens)
      return null;
    if (this.cells.index.heldElsewhere(slot) || this.tiers.covers(content, slot.length)) return null;
    try {
      const savedTo = await this.tiers.put(
        content,
        slot.length,
        (take) => this.cells.runner.saveSeq(slot.seqId, take),
        slot.programId || null,
      );
      if (savedTo) this.cells.stats.savedToTier++;
      return savedTo;
    } catch {
      // a tier that cannot take it (disk error) only costs a recompute later
      return null;
    }
  }

  /**
   * Restores a tier entry into an empty slot and trims it to `tokens`; the leading `sharedTokens` (held
   * by the resident slot `shared`) are then swapped for that slot's cells so they are not held twice. Any
   * failure leaves the slot empty: the request then recomputes.
   */
  async restore(
    slot: KvSlot,
    content: TokenIdContent,
    entry: TierEntry,
    tokens: number,
    shared: KvSlot | null,
    sharedTokens: number,
  ): Promise<void> {
    const { cells } = this;
    // with streams the entry lands in the empty slot's own stream
    if (cells.sharesCells && !(await cells.makeRoom(entry.length, shared ? [slot, shared] : [slot]))) return;
    let held: number;
    const tier = entry.tier;
    const t0 = performance.now();
    try {
      const state = await this.tiers.load(entry);
      held = await cells.runner.restoreSeq(slot.seqId, state);
    } catch {
      cells.runner.removeSeq(slot.seqId, 0, -1);
      return;
    }
    this.onRestore?.(tier, held, (performance.now() - t0) / 1000);
    cells.extend(slot, held);
    cells.truncate(slot, heldPast(entry.content, slot.length, content, tokens));
    // indexed by the admitted request's hashes only now: what the entry held past its tokens is cut
    if (slot.length > 0) slot.content = content;
    cells.index.sync(slot);
    // with streams nothing is shared: the slot keeps its own copy; nor for a windowed model (slot-cells.ts)
    const swaps = shared !== null && cells.sharesCells && !cells.windowed;
    const swapped = swaps ? Math.min(sharedTokens, slot.length) : 0;
    if (swaps && sharedTokens > 0 && slot.length >= sharedTokens)
      cells.swapPrefix(slot, shared, sharedTokens);
    this.cells.stats.restoredTokens += slot.length - swapped;
  }
}
