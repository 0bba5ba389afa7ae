import type { KvBlockObserver, StoredBlocks } from "../core/kv/block-events.js";

/**
 * Hears the scheduler's block pool hand cached blocks to new content (KvBlockObserver.blocksRemoved) and
 * keeps their hashes until the engine's KV mapping takes them (KvSlots.followPool, at the start of each
 * step: the pool hands blocks out inside schedule(), and cutting a slot may save it to a tier, which is
 * asynchronous). Everything it hears is passed on to `next` (the `--kv-events-endpoint` publisher), if any.
 */
export class PoolFollower implements KvBlockObserver {
  private removed: number[] = [];

  /** it needs hashes only; the tokens go to `next` when it asks for them */
  readonly needsTokenIds: boolean;

  constructor(private readonly next: KvBlockObserver | null = null) {
    this.needsTokenIds = next?.needsTokenIds ?? false;
  }

  blocksStored(stored: StoredBlocks): void {
    // a hash cached again before the engine took its removal names a block the pool holds: nothing to cut
    if (this.removed.length > 0) this.removed = this.removed.filter((h) => !stored.hashes.includes(h));
    this.next?.blocksStored(stored);
  }

  blocksRemoved(hashes: readonly number[]): void {
    for (const hash of hashes) this.removed.push(hash);
    this.next?.blocksRemoved(hashes);
  }

  /** The hashes removed since the last call, oldest first. */
  take(): readonly number[] {
    if (this.removed.length === 0) return EMPTY;
    const out = this.removed;
    this.removed = [];
    return out;
  }
}

const EMPTY: readonly number[] = [];
