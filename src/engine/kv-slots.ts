import type { TokenIdContent } from "../core/kv/token-content.js";
import type { Request } from "../core/request.js";
import type { KvChanges } from "../core/step-plan.js";
import { CellLedger } from "./cell-ledger.js";
import {
  type EvictionListener,
  emptyKvSlotStats,
  KvSlot,
  type KvSlotStats,
  type KvSlotsOptions,
  type SlotAdmission,
} from "./kv-slot.js";
import type { KvTierStore } from "./kv-tier-store.js";
import type { ModelRunner } from "./model-runner.js";
import { heldPast, SlotCells } from "./slot-cells.js";
import { SlotHashIndex } from "./slot-hash-index.js";
import { SlotOwners } from "./slot-owners.js";
import { SlotTiering } from "./slot-tiering.js";

export { KvSlot, type KvSlotStats } from "./kv-slot.js";

/**
 * Maps the scheduler's requests and pins onto the runner's sequence slots (docs/engine.md, "KV mapping onto
 * llama.cpp"), following the scheduler: a plan's pins keep a finished request's slot, its releases make a
 * slot cache, and the pool handing a cached block to new content cuts it from the cache slots holding it.
 * Admissions find their prefix by the pool's block hashes, in a resident slot (cells shared, no copy) or the
 * tier store. The one eviction the pool does not order is `reclaim`.
 */
export class KvSlots {
  readonly slots: KvSlot[];
  readonly ledger: CellLedger;
  readonly stats: KvSlotStats = emptyKvSlotStats();
  private readonly owners = new SlotOwners();
  private readonly index: SlotHashIndex;
  private readonly cells: SlotCells;
  private readonly tiering: SlotTiering | null;

  constructor(
    runner: ModelRunner,
    tiers: KvTierStore | null,
    private readonly blockSizeTokens: number,
    private readonly onEvict: EvictionListener | null = null,
    private readonly options: KvSlotsOptions = { runningOnly: false },
  ) {
    this.slots = Array.from({ length: runner.maxSeqs }, (_, i) => new KvSlot(i));
    this.ledger = new CellLedger(runner.kvCells);
    this.index = new SlotHashIndex(runner.maxSeqs, blockSizeTokens);
    const makeRoom = (n: number, keep: readonly KvSlot[]) => this.ensureFree(n, keep, true);
    const buffers = tiers?.buffers ?? null;
    this.cells = new SlotCells(runner, this.ledger, this.index, this.stats, buffers, makeRoom);
    this.tiering = tiers ? new SlotTiering(tiers, this.cells, options.onRestore ?? null) : null;
  }

  slotOf(request: Request): KvSlot | undefined {
    return this.owners.slotOf(request);
  }

  /** Resident slots: not running, holding KV (pinned or cached). */
  get numResident(): number {
    let n = 0;
    for (const s of this.slots) if (s.resident) n++;
    return n;
  }

  /** Follows a plan's KV ownership changes (pins keep a slot resident, releases make it cache). */
  apply(changes: KvChanges): void {
    this.owners.apply(changes);
  }

  /**
   * Cuts what the pool handed to new content since the last call from the cache slots holding it: from
   * that block on (a slot holds a contiguous prefix, and later blocks chain through it), the whole slot when
   * it is the first block or when a tier is configured (saved first, as spillCache would). Running and
   * pinned slots keep theirs: the pool counts their blocks as used, so the block it reused was a copy.
   */
  async followPool(): Promise<void> {
    const removed = this.options.pool?.take() ?? [];
    if (removed.length === 0) return;
    const cutAt = new Map<KvSlot, number>();
    for (const hash of removed) {
      const holders = this.index.holders(hash);
      if (holders === null) continue;
      for (const slot of holders.slots) {
        if (!slot.referenced && !(holders.block >= (cutAt.get(slot) ?? Number.POSITIVE_INFINITY)))
          cutAt.set(slot, holders.block);
      }
    }
    for (const [slot, block] of cutAt) {
      this.stats.poolCuts++;
      if (block === 0 || this.tiering?.enabled) await this.evict(slot);
      else this.cells.truncate(slot, block * this.blockSizeTokens);
    }
  }

  /**
   * Gives an admitted request a slot holding as much as the engine has of the first `needTokens` tokens of
   * its sequence (the scheduler's hit + reload); the caller computes [slot.length, needTokens) again.
   */
  async admit(request: Request, needTokens: number): Promise<SlotAdmission> {
    const own = this.owners.slotOfId(request.id);
    if (own) this.owners.disown(own);
    if (this.options.runningOnly && this.tiering?.enabled) {
      await this.spillCache();
      if (this.ledger.numUsed === 0) this.cells.runner.clearPool();
    }
    const b = this.blockSizeTokens;
    const content = request.content as TokenIdContent;
    const limitBlocks = Math.floor(needTokens / b);
    const longest = limitBlocks > 0 ? this.index.longest(content, limitBlocks) : NO_SOURCE;
    const { blocks } = longest;
    const tokens = blocks * b;
    const source = longest.slot && this.copyableSource(longest.slot, content, tokens);
    const tierMatch = limitBlocks > 0 ? (this.tiering?.best(content, needTokens, limitBlocks) ?? null) : null;
    let slot: KvSlot;
    if (this.tiering && tierMatch && tierMatch.blocks > blocks) {
      slot = await this.freshSlot(source);
      await this.tiering.restore(slot, content, tierMatch.entry, tierMatch.blocks * b, source, tokens);
      // a restore that found no room still takes what a resident slot holds: the scheduler counts those
      // blocks once, so computing them again would hold more cells than it allows
      if (slot.length === 0 && source !== null) await this.sharePrefix(source, slot, tokens);
    } else if (
      source !== null &&
      !source.referenced &&
      !source.holdsPrefix &&
      (source.length - tokens < b || !this.hasEmptySlot())
    ) {
      // a cache slot the request covers to within a block (a returning turn): taken over, no copy
      slot = source;
      this.cells.truncate(slot, heldPast(slot.content, slot.length, content, tokens));
      this.owners.unpin(slot);
      this.stats.takenOverTokens += slot.length;
    } else {
      slot = await this.freshSlot(source);
      if (source !== null) await this.sharePrefix(source, slot, tokens);
    }
    slot.content = content;
    this.owners.own(slot, request);
    this.index.sync(slot);
    const recomputedTokens = Math.max(0, needTokens - slot.length);
    this.stats.recomputedTokens += recomputedTokens;
    // a windowed model's prefix another slot holds, computed again: kept for the next request when it can be
    const checkpointAt =
      this.keepsCheckpoints && source !== null && slot.length < tokens ? tokens : undefined;
    return { slot, recomputedTokens, ...(checkpointAt === undefined ? {} : { checkpointAt }) };
  }

  /**
   * A sliding-window model's checkpoint (slot-cells.ts): an empty slot takes a copy of the request's slot,
   * which holds exactly `tokens` positions now (its end has the window before it), and keeps it for later requests with
   * that prefix. Made only into a slot nobody uses and cells already free (it evicts nothing), and where no
   * checkpoint holds that prefix yet. Whether one was made.
   */
  async checkpoint(request: Request, tokens: number): Promise<boolean> {
    const slot = this.slotOf(request);
    const content = slot?.content ?? null;
    if (!slot || !this.keepsCheckpoints || content === null || slot.length !== tokens || tokens === 0)
      return false;
    if (this.checkpointOf(content, tokens) !== null) return false;
    const holder = this.slots.find((s) => s.owner === null && s.length === 0);
    // in one unified pool only into cells already free: a checkpoint is worth no other sequence's KV
    if (!holder || (this.cells.sharesCells && this.ledger.numFree < tokens)) return false;
    holder.content = content;
    await this.cells.sharePrefix(slot, holder, tokens, true);
    if (holder.length === 0) {
      holder.content = null;
      return false;
    }
    holder.holdsPrefix = true;
    holder.requestId = slot.requestId;
    holder.programId = "";
    this.owners.touch(holder);
    return true;
  }

  /** Drops positions >= length of a slot. */
  truncate(slot: KvSlot, length: number): void {
    this.cells.truncate(slot, length);
  }

  /** Records n positions computed into a slot by a successful execute(). */
  extend(slot: KvSlot, n: number): void {
    this.cells.extend(slot, n);
  }

  /** Forgets everything a slot holds (after a failed step, its KV is not trusted). */
  drop(slot: KvSlot): void {
    this.owners.release(slot);
    this.cells.truncate(slot, 0);
  }

  /**
   * Makes sure the pool has `cells` free cells, by `reclaim` where following the pool left too few. Returns
   * false (optional) or throws when running slots alone leave too little room, which the scheduler's block
   * accounting rules out.
   */
  async ensureFree(cells: number, protect: readonly KvSlot[] = [], optional = false): Promise<boolean> {
    while (this.ledger.numFree < cells) {
      if (await this.reclaim(protect, true)) continue;
      if (optional) return false;
      throw new Error(
        `KV pool exhausted: ${cells} cells needed, ${this.ledger.numFree} free of ${this.ledger.numCells} with nothing left to evict`,
      );
    }
    return true;
  }

  /**
   * With a RAM/disk tier, moves every unreferenced (cache) slot out of the pool into the tier, and with
   * runningOnly the pinned ones too: each resident cell below llama.cpp's high-water mark costs every later
   * step's attention, so KV the scheduler no longer counts is cheaper reloaded (a copy) than kept. Without a
   * tier the pool is the only prefix cache there is, and it stays.
   */
  async spillCache(): Promise<void> {
    if (!this.tiering?.enabled) return;
    for (const slot of this.slots) {
      if (slot.resident && (!slot.pinned || this.options.runningOnly)) await this.evict(slot);
    }
  }

  /**
   * Saves every resident slot's KV to the tier store and drops it, least recently used first, so the store's
   * order is theirs (a persistent tier's shutdown).
   */
  async saveResident(): Promise<void> {
    if (!this.tiering?.enabled) return;
    const resident = this.slots.filter((s) => s.resident).sort((a, b) => a.lastUse - b.lastUse);
    for (const slot of resident) await this.evict(slot);
  }

  /** The fraction of the runner's pool in use, cached KV included. */
  usage(): number {
    return this.ledger.numUsed / this.ledger.numCells;
  }

  /** Drops every resident slot (shutdown). */
  clear(): void {
    for (const slot of this.slots) this.drop(slot);
  }

  private sharePrefix(source: KvSlot, slot: KvSlot, tokens: number): Promise<void> {
    this.owners.touch(source);
    return this.cells.sharePrefix(source, slot, tokens);
  }

  /** Checkpoints are kept for a sliding-window model (slot-cells.ts). */
  private get keepsCheckpoints(): boolean {
    return this.cells.windowed;
  }

  /** The checkpoint ending exactly at `tokens` of this content, if one is resident. */
  private checkpointOf(content: TokenIdContent, tokens: number): KvSlot | null {
    const blocks = tokens / this.blockSizeTokens;
    if (!Number.isInteger(blocks) || blocks === 0) return null;
    const holders = this.index.holders(content.blockHash(blocks - 1))?.slots ?? [];
    return holders.find((h) => h.holdsPrefix && h.length === tokens) ?? null;
  }

  /**
   * The slot to take a prefix of `tokens` from: `found` (the longest match), or for a sliding-window model,
   * which copies only a slot ending where the prefix ends, a checkpoint of that prefix.
   */
  private copyableSource(found: KvSlot, content: TokenIdContent, tokens: number): KvSlot {
    if (this.cells.canShare(found, tokens)) return found;
    return this.checkpointOf(content, tokens) ?? found;
  }

  private hasEmptySlot(): boolean {
    return this.slots.some((s) => s.owner === null && s.length === 0);
  }

  /** An empty slot, by `reclaim` (never `keep`) when there is none. */
  private async freshSlot(keep: KvSlot | null): Promise<KvSlot> {
    for (const slot of this.slots) if (slot.owner === null && slot.length === 0) return slot;
    const victim = await this.reclaim(keep ? [keep] : [], false);
    if (!victim) throw new Error(`no free sequence slot: all ${this.slots.length} are running`);
    return victim;
  }

  /**
   * THE ONE EXCEPTION to following the pool (docs/engine.md, "The one eviction the pool does not order"):
   * llama.cpp runs short where the scheduler's pool does not. An admission finds no empty sequence slot (the
   * pool knows no slots), or a batch or a restore finds fewer free cells than it needs (cells the pool counts
   * once held twice: a prefix two requests computed side by side, copies between streams; cache slots'
   * partial last blocks, which the pool frees unhashed). Then the least recently used resident slot goes,
   * cache before pinned, with needCells only one whose eviction frees cells. Returns it, emptied, or null.
   */
  private async reclaim(protect: readonly KvSlot[], needCells: boolean): Promise<KvSlot | null> {
    let victim: KvSlot | null = null;
    for (const slot of this.slots) {
      if (!slot.resident || protect.includes(slot)) continue;
      if (victim && (slot.pinned ? 1 : 0) > (victim.pinned ? 1 : 0)) continue;
      if (victim && slot.pinned === victim.pinned && slot.lastUse >= victim.lastUse) continue;
      if (needCells && this.ledger.exclusive(slot.cells) === 0) continue;
      victim = slot;
    }
    if (victim === null) return null;
    this.stats.fallbackEvictions++;
    await this.evict(victim);
    return victim;
  }

  /** Drops a resident slot's KV, saving it to the tier store first when that keeps something new. */
  private async evict(slot: KvSlot): Promise<void> {
    const savedTo = this.tiering ? await this.tiering.save(slot) : null;
    this.stats.evictions++;
    if (slot.pinned && savedTo === null) this.stats.pinnedEvictions++;
    this.onEvict?.(slot, savedTo);
    this.drop(slot);
  }
}

const NO_SOURCE = { slot: null, blocks: 0 } as const;
