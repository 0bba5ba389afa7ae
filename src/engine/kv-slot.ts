import type { TokenIdContent } from "../core/kv/token-content.js";
import type { Request } from "../core/request.js";
import type { PoolFollower } from "./pool-follower.js";

/** One sequence slot of the runner. */
export class KvSlot {
  /** the tokens whose KV the slot holds are positions [0, length) of this content */
  content: TokenIdContent | null = null;
  /** ledger cells, one per position held */
  readonly cells: number[] = [];
  /** the running request computing into this slot */
  owner: Request | null = null;
  /** the program whose pin holds this slot's KV (a finished request's sequence), until the pin goes */
  pinnedFor: string | null = null;
  /**
   * a sliding-window model's checkpoint: a prefix two requests computed, kept ending exactly where it ends
   * so later requests can copy it (slot-cells.ts); cache, never taken over, until it is emptied
   */
  holdsPrefix = false;
  /** the request (and program) whose sequence this is, for the event log */
  requestId = "";
  programId = "";
  lastUse = 0;

  constructor(readonly seqId: number) {}

  get length(): number {
    return this.cells.length;
  }

  get pinned(): boolean {
    return this.pinnedFor !== null;
  }

  /** Held by a running request or a live pin: the scheduler counts its blocks as used. */
  get referenced(): boolean {
    return this.owner !== null || this.pinned;
  }

  /** Not running and holding KV: pinned, or cache the scheduler's pool may still hand out. */
  get resident(): boolean {
    return this.owner === null && this.cells.length > 0;
  }
}

/** How the engine uses the pool beside the RAM/disk tier, and what it follows. */
export interface KvSlotsOptions {
  /**
   * Keep only running sequences in the pool (a CPU engine with a RAM tier, where the pool and the tier are
   * the same memory): pinned KV waits in the tier and is restored when its program returns, and a pool
   * emptied that way starts again from its first cell before an admission, so a step's attention checks no
   * cells but the running sequences' (docs/engine.md, "Only running sequences in the pool").
   */
  readonly runningOnly: boolean;
  readonly onRestore?: RestoreListener;
  /** the scheduler's block pool handing cached blocks to new content (the engine's observer on it) */
  readonly pool?: PoolFollower;
}

/** What happened to an evicted slot's KV: dropped, or saved to a tier first. */
export type EvictionListener = (slot: KvSlot, savedTo: "cpu" | "disk" | null) => void;

/** A slot given to an admitted request, and how much of its admitted prefix had to be computed again. */
export interface SlotAdmission {
  readonly slot: KvSlot;
  readonly recomputedTokens: number;
  /**
   * a sliding-window model's prefix found resident but not copyable, computed again: once the slot holds
   * exactly this many positions, `checkpoint` keeps them for the requests after it
   */
  readonly checkpointAt?: number;
}

/** A tier entry of `tokens` tokens was brought back into the pool in `seconds` (loading and restoring). */
export type RestoreListener = (tier: "cpu" | "disk", tokens: number, seconds: number) => void;

export interface KvSlotStats {
  /** prefix tokens materialised at admission by sharing a resident slot's cells (unified layout) */
  sharedTokens: number;
  /** prefix tokens materialised by copying a resident slot's KV into the admitted slot's stream (streams) */
  copiedTokens: number;
  /** prefix tokens materialised by taking over a resident slot */
  takenOverTokens: number;
  /** prefix tokens restored from the RAM/disk tier */
  restoredTokens: number;
  /** admitted prefix tokens (the scheduler's hits and reloads) the engine no longer held, recomputed */
  recomputedTokens: number;
  /** prefix tokens a sliding-window model's checkpoints keep for later requests (counted when made) */
  checkpointTokens: number;
  /** resident slots dropped (the pool reused their first block, a spill, or the fallback) */
  evictions: number;
  /** of which pinned ones dropped without a copy in a tier (the scheduler still counts them; their program will recompute) */
  pinnedEvictions: number;
  /** sequence states written to a tier */
  savedToTier: number;
  /** cache slots cut (from a block on, or whole) because the scheduler's pool handed that block to new content */
  poolCuts: number;
  /**
   * evictions llama.cpp forced where the pool had freed nothing (the one exception: no empty sequence slot,
   * or cells the pool counts once held twice); see KvSlots.reclaim
   */
  fallbackEvictions: number;
}

export function emptyKvSlotStats(): KvSlotStats {
  return {
    sharedTokens: 0,
    copiedTokens: 0,
    takenOverTokens: 0,
    restoredTokens: 0,
    recomputedTokens: 0,
    checkpointTokens: 0,
    evictions: 0,
    pinnedEvictions: 0,
    savedToTier: 0,
    poolCuts: 0,
    fallbackEvictions: 0,
  };
}
