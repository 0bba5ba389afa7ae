/**
 * What a BlockPool's prefix cache gains and loses, told as it happens, for whoever mirrors it outside the
 * scheduler (`serve --kv-events-endpoint` publishes it as vLLM's KV events). A hash is in the cache from the
 * blocksStored that names it until the blocksRemoved that names it.
 */
export interface KvBlockObserver {
  /** whether blocksStored needs the blocks' tokens (StoredBlocks.tokenIds); without it they are left empty */
  readonly needsTokenIds: boolean;
  /** Full blocks of one sequence became reusable prefix cache. */
  blocksStored(stored: StoredBlocks): void;
  /** Cached blocks were handed out for new content: their hashes name nothing any more. */
  blocksRemoved(hashes: readonly number[]): void;
}

/** A run of consecutive full blocks of one sequence, in order. */
export interface StoredBlocks {
  readonly hashes: readonly number[];
  /** the hash of the block before the first; null when the first is the sequence's first block */
  readonly parentHash: number | null;
  /** the blocks' tokens, block after block (empty for content without token ids, the simulator's, and for an
   * observer that does not need them) */
  readonly tokenIds: readonly number[];
  readonly blockSizeTokens: number;
}
