import type { TokenIdContent } from "../core/kv/token-content.js";
import type { Request } from "../core/request.js";
import type { KvChanges } from "../core/step-plan.js";
import { commonBlocks, type KvTierStore, type TierEntry } from "./kv-tier-store.js";
import type { ModelRunner } from "./model-runner.js";

/**
 * The runner's KV cells as the engine accounts for them: which cells each slot holds, with a reference
 * count per cell (copySeq shares cells; a cell is free when no slot holds it). It mirrors llama.cpp's own
 * bookkeeping, so the engine knows before a decode whether the pool has room. With the streams layout no
 * cell is shared and each slot's cells lie in its own stream; counting them over all streams is exact
 * because no slot outgrows its stream (the engine caps a sequence at the runner's maxContextTokens).
 */
export class CellLedger {
  private readonly refs: Uint16Array;
  private readonly free: Int32Array;
  private numFreeCells: number;

  constructor(readonly numCells: number) {
    this.refs = new Uint16Array(numCells);
    this.free = new Int32Array(numCells);
    for (let i = 0; i < numCells; i++) this.free[i] = numCells - 1 - i;
    this.numFreeCells = numCells;
  }

  get numFree(): number {
    return this.numFreeCells;
  }

  get numUsed(): number {
    return this.numCells - this.numFreeCells;
  }

  /** Appends n fresh cells to a slot's cell list. */
  alloc(cells: number[], n: number): void {
    if (n > this.numFreeCells) throw new Error(`cell ledger: ${n} cells wanted, ${this.numFreeCells} free`);
    for (let i = 0; i < n; i++) {
      const cell = this.free[--this.numFreeCells] as number;
      this.refs[cell] = 1;
      cells.push(cell);
    }
  }

  /** Releases the slot's cells at positions [from, to) and removes them from its list. */
  release(cells: number[], from: number, to = cells.length): void {
    for (let i = from; i < to; i++) this.unref(cells[i] as number);
    cells.splice(from, to - from);
  }

  /** dst (holding positions >= n, or nothing) takes src's cells for positions [0, n). */
  sharePrefix(src: readonly number[], dst: number[], n: number): void {
    const rest = dst.splice(0);
    for (let i = 0; i < n; i++) {
      const cell = src[i] as number;
      this.refs[cell] = (this.refs[cell] as number) + 1;
      dst.push(cell);
    }
    for (const cell of rest) dst.push(cell);
  }

  /** Cells only this slot holds (what dropping it would free). */
  exclusive(cells: readonly number[]): number {
    let n = 0;
    for (const cell of cells) if (this.refs[cell] === 1) n++;
    return n;
  }

  private unref(cell: number): void {
    const r = (this.refs[cell] as number) - 1;
    if (r < 0) throw new Error(`cell ledger: cell ${cell} released twice`);
    this.refs[cell] = r;
    if (r === 0) this.free[this.numFreeCells++] = cell;
  }
}

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
}

/** How the engine uses the pool beside the RAM/disk tier. */
export interface KvSlotsOptions {
  /**
   * Keep only running sequences in the pool (a CPU engine with a RAM tier, where the pool and the tier are
   * the same memory): pinned KV waits in the tier and is restored when its program returns, and a pool
   * emptied that way starts again from its first cell before an admission, so a step's attention checks no
   * cells but the running sequences'. On llama.cpp's unified pool every cell below the high-water mark costs
   * each step's attention: in a heavy serving run, 1423 cells on average against 613 of the computed
   * sequence, ~19% of prefill time (docs/benchmarks.md).
   */
  readonly runningOnly: boolean;
  /** a tier entry of `tokens` tokens was brought back into the pool in `seconds` (loading and restoring) */
  readonly onRestore?: (tier: "cpu" | "disk", tokens: number, seconds: number) => void;
}

/** What happened to an evicted slot's KV: dropped, or saved to a tier first. */
export type EvictionListener = (slot: KvSlot, savedTo: "cpu" | "disk" | null) => void;

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
  /** resident slots dropped (for cells or for a slot) */
  evictions: number;
  /** of which pinned ones dropped without a copy in a tier (the scheduler still counts them; their program will recompute) */
  pinnedEvictions: number;
  /** sequence states written to a tier */
  savedToTier: number;
}

/** A slot given to an admitted request, and how much of its admitted prefix had to be computed again. */
export interface SlotAdmission {
  readonly slot: KvSlot;
  readonly recomputedTokens: number;
}

/**
 * Maps the scheduler's requests and pins onto the runner's sequence slots (see docs/engine.md, "Engine:
 * KV mapping"), following the KV ownership changes each step plan carries. Running requests own a slot;
 * finished ones stay resident while pinned and, after that, as an LRU cache until the runner needs the
 * cells or the slot; admissions materialise their prefix from the resident slot with the longest common
 * prefix (cells shared, no copy) or from the tier store.
 */
export class KvSlots {
  readonly slots: KvSlot[];
  readonly ledger: CellLedger;
  readonly stats: KvSlotStats = {
    sharedTokens: 0,
    copiedTokens: 0,
    takenOverTokens: 0,
    restoredTokens: 0,
    recomputedTokens: 0,
    evictions: 0,
    pinnedEvictions: 0,
    savedToTier: 0,
  };
  /** slots of running requests, by request id */
  private readonly byRequest = new Map<string, KvSlot>();
  /** pinned slots, by program id (a program has one pin at most) */
  private readonly byPin = new Map<string, KvSlot>();
  private useCounter = 0;
  /** unified pool: slots share a prefix's cells (copySeq); streams: each slot holds its own copy */
  private readonly sharesCells: boolean;
  /** saved states go into the tier store's reusable buffers */
  private readonly takeStateBuffer: ((bytes: number) => Buffer) | undefined;

  constructor(
    private readonly runner: ModelRunner,
    private readonly tiers: KvTierStore | null,
    private readonly blockSizeTokens: number,
    private readonly onEvict: EvictionListener | null = null,
    private readonly options: KvSlotsOptions = { runningOnly: false },
  ) {
    this.slots = Array.from({ length: runner.maxSeqs }, (_, i) => new KvSlot(i));
    this.sharesCells = runner.kvLayout === "unified";
    const buffers = tiers?.buffers;
    this.takeStateBuffer = buffers ? (bytes) => buffers.take(bytes) : undefined;
    this.ledger = new CellLedger(runner.kvCells);
  }

  slotOf(request: Request): KvSlot | undefined {
    const slot = this.byRequest.get(request.id);
    return slot?.owner === request ? slot : undefined;
  }

  /** Resident slots: not running, holding KV (pinned or cached). */
  get numResident(): number {
    let n = 0;
    for (const s of this.slots) if (s.owner === null && s.length > 0) n++;
    return n;
  }

  /**
   * Follows the scheduler's KV ownership changes: a request's sequence that its program pinned stays
   * resident for the pin; a released request's or pin's sequence becomes plain cache (LRU, evictable).
   * Changes about sequences the engine already dropped are ignored.
   */
  apply(changes: KvChanges): void {
    for (const pin of changes.pinned) {
      const slot = this.byRequest.get(pin.requestId);
      if (!slot) continue;
      this.disown(slot);
      const previous = this.byPin.get(pin.programId);
      if (previous) this.unpin(previous);
      slot.pinnedFor = pin.programId;
      this.byPin.set(pin.programId, slot);
    }
    for (const release of changes.released) {
      if (release.holder === "request") {
        const slot = this.byRequest.get(release.requestId);
        if (slot) this.disown(slot);
      } else {
        const slot = this.byPin.get(release.programId);
        if (slot && slot.requestId === release.requestId) this.unpin(slot);
      }
    }
  }

  /**
   * Gives an admitted request a slot holding as much as the engine has of the first `needTokens` tokens of
   * its sequence (the scheduler's hit + reload); the caller computes [slot.length, needTokens) again.
   */
  async admit(request: Request, needTokens: number): Promise<SlotAdmission> {
    const own = this.byRequest.get(request.id);
    if (own) this.disown(own);
    if (this.options.runningOnly && this.tiers?.enabled) {
      await this.spillCache();
      if (this.ledger.numUsed === 0) this.runner.clearPool();
    }
    const b = this.blockSizeTokens;
    const content = request.content as TokenIdContent;
    const limitBlocks = Math.floor(needTokens / b);
    let source: KvSlot | null = null;
    let sourceBlocks = 0;
    if (limitBlocks > 0) {
      for (const slot of this.slots) {
        if (slot.content === null || slot.length < b) continue;
        const blocks = commonBlocks(slot.content, slot.length, content, needTokens, limitBlocks, b);
        if (blocks === 0) continue;
        const better =
          blocks > sourceBlocks ||
          (source !== null &&
            blocks === sourceBlocks &&
            (slot.referenced === source.referenced ? slot.lastUse > source.lastUse : !slot.referenced));
        if (better) {
          source = slot;
          sourceBlocks = blocks;
        }
      }
    }
    const tierMatch =
      limitBlocks > 0 && this.tiers ? this.tiers.best(content, needTokens, limitBlocks) : null;

    let slot: KvSlot;
    if (tierMatch && tierMatch.blocks > sourceBlocks) {
      slot = await this.freshSlot(source);
      await this.restore(slot, content, tierMatch.entry, tierMatch.blocks * b, source, sourceBlocks * b);
      // a restore that found no room still takes what a resident slot holds: the scheduler counts those
      // blocks once, so computing them again would hold more cells than it allows
      if (slot.length === 0 && source !== null) await this.sharePrefix(source, slot, sourceBlocks * b);
    } else if (source !== null) {
      const tokens = sourceBlocks * b;
      const takeOver = !source.referenced && (source.length - tokens < b || !this.hasEmptySlot());
      if (takeOver) {
        slot = source;
        this.truncate(slot, tokens);
        this.unpin(slot);
        this.stats.takenOverTokens += tokens;
      } else {
        slot = await this.freshSlot(source);
        await this.sharePrefix(source, slot, tokens);
      }
    } else {
      slot = await this.freshSlot(null);
    }
    slot.content = content;
    slot.owner = request;
    slot.requestId = request.id;
    slot.programId = request.programId;
    slot.lastUse = ++this.useCounter;
    this.byRequest.set(request.id, slot);
    const recomputedTokens = Math.max(0, needTokens - slot.length);
    this.stats.recomputedTokens += recomputedTokens;
    return { slot, recomputedTokens };
  }

  /**
   * The empty `slot` takes the first `tokens` positions of `source`: their cells, in one unified pool; a copy
   * of their data into its own stream, with streams. A copy that finds no room leaves the slot empty (the
   * request then recomputes).
   */
  private async sharePrefix(source: KvSlot, slot: KvSlot, tokens: number): Promise<void> {
    source.lastUse = ++this.useCounter;
    if (this.sharesCells) {
      this.runner.copySeq(source.seqId, slot.seqId, tokens);
      this.ledger.sharePrefix(source.cells, slot.cells, tokens);
      this.stats.sharedTokens += tokens;
      return;
    }
    // the copy lands in the empty slot's own stream, which holds any sequence
    let held: number;
    try {
      const state = await this.runner.saveSeq(source.seqId, this.takeStateBuffer);
      try {
        held = await this.runner.restoreSeq(slot.seqId, state);
      } finally {
        this.tiers?.buffers.give(state);
      }
    } catch {
      this.runner.removeSeq(slot.seqId, 0, -1);
      return;
    }
    this.ledger.alloc(slot.cells, held);
    this.truncate(slot, tokens);
    this.stats.copiedTokens += slot.length;
  }

  /** Drops positions >= length of a slot. */
  truncate(slot: KvSlot, length: number): void {
    if (slot.length <= length) return;
    this.runner.removeSeq(slot.seqId, length, -1);
    this.ledger.release(slot.cells, length);
    if (length === 0) slot.content = null;
  }

  /** Records n positions computed into a slot by a successful execute(). */
  extend(slot: KvSlot, n: number): void {
    this.ledger.alloc(slot.cells, n);
  }

  /** Forgets everything a slot holds (after a failed step, its KV is not trusted). */
  drop(slot: KvSlot): void {
    if (slot.owner && this.byRequest.get(slot.owner.id) === slot) this.byRequest.delete(slot.owner.id);
    slot.owner = null;
    this.unpin(slot);
    this.truncate(slot, 0);
  }

  /**
   * Makes sure the pool has `cells` free cells by evicting resident slots: unreferenced (cache) ones
   * first, LRU, then pinned ones. Returns false (optional) or throws when running slots alone leave too
   * little room, which the scheduler's block accounting rules out.
   */
  async ensureFree(cells: number, protect: readonly KvSlot[] = [], optional = false): Promise<boolean> {
    while (this.ledger.numFree < cells) {
      const victim = this.victim(protect, true);
      if (!victim) {
        if (optional) return false;
        throw new Error(
          `KV pool exhausted: ${cells} cells needed, ${this.ledger.numFree} free of ${this.ledger.numCells} with nothing left to evict`,
        );
      }
      await this.evict(victim);
    }
    return true;
  }

  /**
   * With a RAM/disk tier, moves every unreferenced (cache) slot out of the pool into the tier, and with
   * runningOnly the pinned ones too. On llama.cpp's unified pool each resident cell below the high-water mark
   * costs every later step's attention, so KV the scheduler no longer counts is cheaper reloaded (a copy) than
   * kept. Without a tier the pool is the only prefix cache there is, and it stays.
   */
  async spillCache(): Promise<void> {
    if (!this.tiers?.enabled) return;
    for (const slot of this.slots) {
      const idle = slot.owner === null && slot.length > 0;
      if (idle && (!slot.pinned || this.options.runningOnly)) await this.evict(slot);
    }
  }

  /** The fraction of the runner's pool in use, cached KV included. */
  usage(): number {
    return this.ledger.numUsed / this.ledger.numCells;
  }

  /** Drops every resident slot (shutdown). */
  clear(): void {
    for (const slot of this.slots) this.drop(slot);
  }

  /** A running request's slot becomes resident (cache unless a pin then claims it). */
  private disown(slot: KvSlot): void {
    const request = slot.owner;
    if (!request) return;
    if (this.byRequest.get(request.id) === slot) this.byRequest.delete(request.id);
    slot.owner = null;
    slot.lastUse = ++this.useCounter;
    if (slot.length === 0) slot.content = null;
  }

  private unpin(slot: KvSlot): void {
    if (slot.pinnedFor === null) return;
    if (this.byPin.get(slot.pinnedFor) === slot) this.byPin.delete(slot.pinnedFor);
    slot.pinnedFor = null;
  }

  private hasEmptySlot(): boolean {
    return this.slots.some((s) => s.owner === null && s.length === 0);
  }

  /** An empty slot, evicting the LRU resident one (never `keep`) when there is none. */
  private async freshSlot(keep: KvSlot | null): Promise<KvSlot> {
    for (const slot of this.slots) if (slot.owner === null && slot.length === 0) return slot;
    const victim = this.victim(keep ? [keep] : [], false);
    if (!victim) throw new Error(`no free sequence slot: all ${this.slots.length} are running`);
    await this.evict(victim);
    return victim;
  }

  /** LRU resident slot, unreferenced before pinned; with needCells, only slots whose eviction frees cells. */
  private victim(protect: readonly KvSlot[], needCells: boolean): KvSlot | null {
    let best: KvSlot | null = null;
    for (const slot of this.slots) {
      if (slot.owner !== null || slot.length === 0 || protect.includes(slot)) continue;
      if (best && (slot.pinned ? 1 : 0) > (best.pinned ? 1 : 0)) continue;
      if (best && slot.pinned === best.pinned && slot.lastUse >= best.lastUse) continue;
      if (needCells && this.ledger.exclusive(slot.cells) === 0) continue;
      best = slot;
    }
    return best;
  }

  /** Drops a resident slot's KV, saving it to the tier store first when that keeps something new. */
  private async evict(slot: KvSlot): Promise<void> {
    const content = slot.content;
    let savedTo: "cpu" | "disk" | null = null;
    if (this.tiers?.enabled && content && slot.length >= this.blockSizeTokens && !this.heldElsewhere(slot)) {
      try {
        savedTo = await this.tiers.put(
          content,
          slot.length,
          (take) => this.runner.saveSeq(slot.seqId, take),
          slot.programId || null,
        );
        if (savedTo) this.stats.savedToTier++;
      } catch {
        // a tier that cannot take it (disk error) only costs a recompute later
      }
    }
    this.stats.evictions++;
    if (slot.pinned && savedTo === null) this.stats.pinnedEvictions++;
    this.onEvict?.(slot, savedTo);
    this.drop(slot);
  }

  /** Whether another slot or the tier store already holds every full block of this slot. */
  private heldElsewhere(slot: KvSlot): boolean {
    const content = slot.content as TokenIdContent;
    const b = this.blockSizeTokens;
    const blocks = Math.floor(slot.length / b);
    for (const other of this.slots) {
      if (other === slot || other.content === null || other.length < blocks * b) continue;
      if (commonBlocks(other.content, other.length, content, slot.length, blocks, b) === blocks) return true;
    }
    return this.tiers?.covers(content, slot.length) ?? false;
  }

  /**
   * Restores a tier entry into an empty slot and trims it to `tokens`; the leading `sharedTokens` (held
   * by a resident slot) are then swapped for that slot's cells so they are not held twice. Any failure
   * leaves the slot empty: the request then recomputes.
   */
  private async restore(
    slot: KvSlot,
    content: TokenIdContent,
    entry: TierEntry,
    tokens: number,
    shared: KvSlot | null,
    sharedTokens: number,
  ): Promise<void> {
    const tiers = this.tiers as KvTierStore;
    const protect = shared ? [slot, shared] : [slot];
    // with streams the entry lands in the empty slot's own stream
    if (this.sharesCells && !(await this.ensureFree(entry.length, protect, true))) return;
    let held: number;
    const tier = entry.tier;
    const t0 = performance.now();
    try {
      const state = await tiers.load(entry);
      held = await this.runner.restoreSeq(slot.seqId, state);
    } catch {
      this.runner.removeSeq(slot.seqId, 0, -1);
      return;
    }
    this.options.onRestore?.(tier, held, (performance.now() - t0) / 1000);
    this.ledger.alloc(slot.cells, held);
    slot.content = content;
    this.truncate(slot, tokens);
    // with streams nothing is shared: the slot keeps its own copy
    if (shared && sharedTokens > 0 && slot.length >= sharedTokens && this.sharesCells) {
      this.runner.removeSeq(slot.seqId, 0, sharedTokens);
      this.ledger.release(slot.cells, 0, sharedTokens);
      this.runner.copySeq(shared.seqId, slot.seqId, sharedTokens);
      this.ledger.sharePrefix(shared.cells, slot.cells, sharedTokens);
      this.stats.sharedTokens += sharedTokens;
    }
    const swapped = shared && this.sharesCells ? Math.min(sharedTokens, slot.length) : 0;
    this.stats.restoredTokens += slot.length - swapped;
  }
}
