import type { TokenIdContent } from "../core/kv/token-content.js";
import type { KvSlot } from "./kv-slot.js";

/** The slots holding one block hash, and the block's position (a chained hash has one position). */
interface Holders {
  readonly block: number;
  readonly slots: KvSlot[];
}

/**
 * Which slots hold which full blocks, by the scheduler's own chained block hashes (the ones its pool caches
 * under): admission finds the longest resident prefix by looking up the admitted request's hashes, and a
 * block the pool hands to new content names the slots to cut. A slot holding block i's hash holds blocks
 * 0..i too, since each hash covers every token before it.
 */
export class SlotHashIndex {
  private readonly byHash = new Map<number, Holders>();
  /** per slot (by seqId): the content its indexed hashes came from, and those hashes in block order */
  private readonly indexed: { content: TokenIdContent | null; hashes: number[] }[];

  constructor(
    numSlots: number,
    readonly blockSizeTokens: number,
  ) {
    this.indexed = Array.from({ length: numSlots }, () => ({ content: null, hashes: [] }));
  }

  /** Brings a slot's entries in line with its content and length (after any change to either). */
  sync(slot: KvSlot): void {
    const own = this.indexed[slot.seqId] as { content: TokenIdContent | null; hashes: number[] };
    const target = slot.content === null ? 0 : Math.floor(slot.length / this.blockSizeTokens);
    if (own.content !== slot.content) {
      // another content (a take-over, a restore): the blocks it shares with the old one stay
      let kept = 0;
      const content = slot.content;
      const shared = Math.min(own.hashes.length, target);
      while (kept < shared && content?.blockHash(kept) === own.hashes[kept]) kept++;
      while (own.hashes.length > kept) this.unlink(own.hashes.pop() as number, slot);
      own.content = content;
    }
    while (own.hashes.length > target) this.unlink(own.hashes.pop() as number, slot);
    const content = slot.content;
    while (content !== null && own.hashes.length < target) {
      const block = own.hashes.length;
      const hash = content.blockHash(block);
      const holders = this.byHash.get(hash);
      if (holders) holders.slots.push(slot);
      else this.byHash.set(hash, { block, slots: [slot] });
      own.hashes.push(hash);
    }
  }

  /**
   * The slot sharing the most leading full blocks with `content`, at most `limitBlocks`, and how many blocks
   * that is; among equals a cache slot before a running or pinned one, then the most recently used.
   */
  longest(content: TokenIdContent, limitBlocks: number): { slot: KvSlot | null; blocks: number } {
    let blocks = 0;
    let slots: readonly KvSlot[] = [];
    for (let i = 0; i < limitBlocks; i++) {
      const holders = this.byHash.get(content.blockHash(i));
      if (!holders) break;
      blocks = i + 1;
      slots = holders.slots;
    }
    let best: KvSlot | null = null;
    for (const slot of slots) {
      const better =
        best === null ||
        (slot.referenced === best.referenced ? slot.lastUse > best.lastUse : !slot.referenced);
      if (better) best = slot;
    }
    return { slot: best, blocks };
  }

  /** The slots holding this hash and the block it is, or null. */
  holders(hash: number): Holders | null {
    return this.byHash.get(hash) ?? null;
  }

  /** Whether a slot other than this one holds every full block it holds. */
  heldElsewhere(slot: KvSlot): boolean {
    const hashes = (this.indexed[slot.seqId] as { hashes: number[] }).hashes;
    const last = hashes[hashes.length - 1];
    if (last === undefined) return false;
    return (this.byHash.get(last)?.slots.length ?? 0) > 1;
  }

  private unlink(hash: number, slot: KvSlot): void {
    const holders = this.byHash.get(hash);
    if (!holders) return;
    const i = holders.slots.indexOf(slot);
    if (i >= 0) holders.slots.splice(i, 1);
    if (holders.slots.length === 0) this.byHash.delete(hash);
  }
}
