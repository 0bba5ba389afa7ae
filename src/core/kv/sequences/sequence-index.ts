import type { TokenContent } from "../token-content.js";
import type { Sequence } from "./sequence.js";

/**
 * Which sequences hold which full blocks, by the scheduler's chained block hashes: admission finds the
 * sequences holding the longest prefix of a request. A sequence holding block i's hash holds blocks 0..i
 * too, since each hash covers every token before it.
 */
export class SequenceIndex {
  private readonly byHash = new Map<number, Sequence[]>();
  /** per sequence id: the content its indexed hashes came from, and those hashes in block order */
  private readonly indexed: { content: TokenContent | null; hashes: number[] }[];

  constructor(
    numSeqs: number,
    private readonly blockSizeTokens: number,
  ) {
    this.indexed = Array.from({ length: numSeqs }, () => ({ content: null, hashes: [] }));
  }

  /** Brings a sequence's entries in line with its content and length (after any change to either). */
  sync(seq: Sequence): void {
    const own = this.indexed[seq.id] as { content: TokenContent | null; hashes: number[] };
    const content = seq.content;
    const target = content === null ? 0 : Math.floor(seq.length / this.blockSizeTokens);
    if (own.content !== content) {
      // another content (a take-over, a restore): the blocks it shares with the old one stay
      let kept = 0;
      const shared = Math.min(own.hashes.length, target);
      while (kept < shared && content?.blockHash(kept) === own.hashes[kept]) kept++;
      while (own.hashes.length > kept) this.unlink(own.hashes.pop() as number, seq);
      own.content = content;
    }
    while (own.hashes.length > target) this.unlink(own.hashes.pop() as number, seq);
    while (content !== null && own.hashes.length < target) {
      const hash = content.blockHash(own.hashes.length);
      const holders = this.byHash.get(hash);
      if (holders) holders.push(seq);
      else this.byHash.set(hash, [seq]);
      own.hashes.push(hash);
    }
  }

  /** The sequences holding this block hash (a chained hash names one block position). */
  holders(hash: number): readonly Sequence[] {
    return this.byHash.get(hash) ?? NONE;
  }

  /**
   * Walks `content`'s leading blocks while some sequence holds them, at most `limitBlocks`; `visit` sees
   * each depth (blocks matched) and the sequences holding that many. Returns the deepest depth reached.
   */
  walk(
    content: TokenContent,
    limitBlocks: number,
    visit: (depth: number, holders: readonly Sequence[]) => void,
  ): number {
    let depth = 0;
    for (let i = 0; i < limitBlocks; i++) {
      const holders = this.byHash.get(content.blockHash(i));
      if (!holders) break;
      depth = i + 1;
      visit(depth, holders);
    }
    return depth;
  }

  /** Whether a sequence other than this one holds every full block it holds. */
  heldElsewhere(seq: Sequence): boolean {
    const hashes = (this.indexed[seq.id] as { hashes: number[] }).hashes;
    const last = hashes[hashes.length - 1];
    if (last === undefined) return false;
    return (this.byHash.get(last)?.length ?? 0) > 1;
  }

  private unlink(hash: number, seq: Sequence): void {
    const holders = this.byHash.get(hash);
    if (!holders) return;
    const i = holders.indexOf(seq);
    if (i >= 0) holders.splice(i, 1);
    if (holders.length === 0) this.byHash.delete(hash);
  }
}

const NONE: readonly Sequence[] = [];
