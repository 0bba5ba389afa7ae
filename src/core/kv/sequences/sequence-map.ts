import type { Pin } from "../../program.js";
import type { Request } from "../../request.js";
import type { BlockPool } from "../block-pool.js";
import { copiesPrefixData, copiesTakeBlocks, type LlamaSeqKvSpec } from "../kv-spec.js";
import type { TierConfig, TierName } from "../offload-tiers.js";
import type { PrefixMatch } from "./prefix-match.js";
import { PrefixSources } from "./prefix-sources.js";
import type { SeqOp } from "./seq-ops.js";
import { Sequence } from "./sequence.js";
import { cellsHeld } from "./sequence-cells.js";
import { SequenceIndex } from "./sequence-index.js";
import { type AdoptedState, SequenceTiers, type TierEntry } from "./sequence-tiers.js";

/** What the map decided, in tokens and counts (the engine's KV counters). */
export interface SequenceMapStats {
  /** prefix tokens given to an admission by sharing a sequence's cells (one unified pool) */
  sharedTokens: number;
  /** prefix tokens given by copying a sequence's data (streams, a sliding-window model) */
  copiedTokens: number;
  /** prefix tokens given by taking over a sequence nobody held (a returning turn) */
  takenOverTokens: number;
  /** prefix tokens restored from the RAM/disk tier */
  restoredTokens: number;
  /** prefix tokens a sliding-window model's checkpoints keep for later requests (counted when made) */
  checkpointTokens: number;
  /** resident sequences dropped (the pool reused their blocks, a spill, a park, or a seat needed) */
  evictions: number;
  /** of which pinned sequences parked in the tier (their pin stays; its next turn restores them) */
  parkedPins: number;
  /** sequence states written to a tier */
  savedToTier: number;
  /** cached sequences cut (from a block on, or whole) because the pool handed that block to new content */
  poolCuts: number;
}

/** A resident sequence dropped, and where its KV went: nowhere, or a tier (the event log's offloaded/evicted). */
export type SequenceEvictionListener = (seq: Sequence, tokens: number, savedTo: TierName | null) => void;

/**
 * Where KV lives on a llama-seq executor, decided by the scheduler (docs/engine.md, "KV mapping onto
 * llama.cpp"): which sequence each running request computes into, how an admission's known prefix gets
 * there (taking a sequence over, copying a sequence's prefix, restoring a saved state), what stays resident
 * after a request or a pin lets go, what is cut when the pool hands its blocks out, what is saved to and
 * restored from the tiers. Every decision is a sequence op (seq-ops.ts) for the executor to apply.
 *
 * Every position a sequence holds is backed by a pool block: its holder's (a running request's, a pin's), or
 * for a sequence nobody holds the blocks its last holder freed, until the pool hands one of them out (then
 * the sequence is cut there). Sequences sharing cells share block ids, and a copy whose data is its own
 * (kv-spec.ts, copiesTakeBlocks) takes blocks of its own. So the cells in use never exceed the pool's blocks
 * times the block size: llama.cpp never runs out of cells the scheduler gave out.
 */
export class SequenceMap {
  readonly seqs: Sequence[];
  readonly tiers: SequenceTiers | null;
  readonly stats: SequenceMapStats = {
    sharedTokens: 0,
    copiedTokens: 0,
    takenOverTokens: 0,
    restoredTokens: 0,
    checkpointTokens: 0,
    evictions: 0,
    parkedPins: 0,
    savedToTier: 0,
    poolCuts: 0,
  };
  readonly blockSizeTokens: number;
  private ops: SeqOp[] = [];
  private readonly index: SequenceIndex;
  private readonly sources: PrefixSources;
  private readonly byRequest = new Map<string, Sequence>();
  private readonly byPin = new Map<string, Sequence>();
  /** per pool block: how many sequences nobody holds it backs (cut when the pool hands it out) */
  private readonly freeBackers: Uint16Array;
  /** per pool block: its index in the sequences it backs (a block backs one position range) */
  private readonly blockIndex: Int32Array;
  /** tier entries restored into sequences in this step, and the request each one is for */
  private restoredFor = new Map<number, { readonly request: Request; readonly tokens: number }>();
  private resetThisStep = false;
  /** the entry an admission is restoring: no save made meanwhile supersedes or pushes it out */
  private restoring: TierEntry | null = null;
  /** the sequence an admission takes a prefix from: a cut meanwhile keeps it (its prefix is held) */
  private source: Sequence | null = null;
  private useCounter = 0;
  private readonly windowed: boolean;
  private readonly takesBlocks: boolean;

  constructor(
    readonly spec: LlamaSeqKvSpec,
    private readonly pool: BlockPool,
    tiers: readonly TierConfig[],
    kvBytesPerToken: number,
    private readonly onEvict: SequenceEvictionListener | null = null,
  ) {
    if (!Number.isInteger(spec.numSeqs) || spec.numSeqs < 2)
      throw new Error(`a llama-seq executor needs at least 2 sequences, got ${spec.numSeqs}`);
    this.blockSizeTokens = pool.blockSizeTokens;
    this.seqs = Array.from({ length: spec.numSeqs }, (_, i) => new Sequence(i));
    this.index = new SequenceIndex(spec.numSeqs, this.blockSizeTokens);
    this.freeBackers = new Uint16Array(pool.numBlocks);
    this.blockIndex = new Int32Array(pool.numBlocks);
    this.windowed = spec.slidingWindow > 0;
    this.takesBlocks = copiesTakeBlocks(spec);
    this.tiers =
      tiers.length > 0
        ? new SequenceTiers(tiers, kvBytesPerToken, this.blockSizeTokens, (op) => this.ops.push(op))
        : null;
    this.sources = new PrefixSources(spec, this.seqs, this.index, this.tiers, this.blockSizeTokens);
    pool.setReuseListener((blockId) => this.blockReused(blockId));
  }

  /** The ops decided since the last call, in order. */
  takeOps(): SeqOp[] {
    const ops = this.ops;
    this.ops = [];
    return ops;
  }

  /** The sequence a running request computes into. */
  seqOf(request: Request): Sequence | undefined {
    const seq = this.byRequest.get(request.id);
    return seq?.running === request ? seq : undefined;
  }

  /** The most tokens a running request's next chunk may take (it stops where its checkpoint is to be kept). */
  chunkLimit(request: Request): number {
    const at = this.seqOf(request)?.checkpointAt ?? null;
    return at !== null && request.numComputedTokens < at
      ? at - request.numComputedTokens
      : Number.POSITIVE_INFINITY;
  }

  // -------------------------------------------------------------------------------------------------
  // admission

  /**
   * The longest known prefix of the request's sequence that a resident sequence or a saved state can
   * really give, leaving its last token to compute (its logits are needed).
   */
  findPrefix(request: Request): PrefixMatch {
    return this.sources.find(request);
  }

  /**
   * Whether the match can be placed now: a sequence for the request (an empty one, one dropped, a pin's
   * parked), and in one unified pool free cells for a saved state restored whole before it is cut (else the
   * request waits for them rather than computing the state again).
   */
  placeable(request: Request, match: PrefixMatch): boolean {
    const plan = match.sequence;
    if (plan?.kind === "take-over") return true;
    const restoring = plan?.kind === "restore" && this.spec.layout === "unified";
    if (restoring && !this.cellRoomFor(plan.entry.length, plan.shareFrom)) return false;
    const source = sourceOf(match);
    for (const seq of this.seqs) {
      if (seq === source || seq.running) continue;
      if (seq.holder === null) return true;
      const pin = seq.pin;
      if (pin && (this.tiers !== null || pin.programId === request.programId)) return true;
    }
    return false;
  }

  /**
   * The request runs in a sequence holding the matched prefix. `takeBlocks` sets its pool blocks and
   * computed tokens (KvCacheManager); the ops that fill the sequence come after it, so that cells the pool
   * freed for it are free when they run.
   */
  admit(request: Request, match: PrefixMatch, takeBlocks: () => void): void {
    const plan = match.sequence ?? null;
    this.restoring = plan?.kind === "restore" ? plan.entry : null;
    this.source = sourceOf(match);
    this.resetIfEmpty();
    const seat = plan?.kind === "take-over" ? plan.source : this.freeSeat(request, sourceOf(match));
    const previousLength = seat.length;
    if (seat.holder === null) this.back(seat, -1);
    if (plan?.kind === "restore" && this.spec.layout === "unified")
      this.makeCellRoom(plan.entry.length, plan.shareFrom);
    seat.holder = { kind: "request", request };
    seat.content = request.content;
    seat.checkpoint = false;
    seat.requestId = request.id;
    seat.programId = request.programId;
    seat.lastUse = ++this.useCounter;
    this.byRequest.set(request.id, seat);
    // a copy into fresh blocks: the source's blocks are held meanwhile, so taking the fresh ones cuts no
    // part of it
    const guard =
      plan?.kind === "copy" && match.copied
        ? plan.source.blocks.slice(0, match.gpuTokens / this.blockSizeTokens)
        : null;
    if (guard) this.pool.touch(guard);
    takeBlocks();
    if (guard) this.pool.free(guard);
    const held = request.numComputedTokens;
    if (plan?.kind === "take-over") {
      if (previousLength > held) this.ops.push({ op: "truncate", seq: seat.id, tokens: held });
      this.stats.takenOverTokens += held;
    } else if (plan?.kind === "copy") {
      plan.source.lastUse = ++this.useCounter;
      const data = copiesPrefixData(this.spec);
      this.ops.push({
        op: "copy",
        from: plan.source.id,
        to: seat.id,
        tokens: held,
        mode: data ? "data" : "share",
      });
      if (data) this.stats.copiedTokens += held;
      else this.stats.sharedTokens += held;
    } else if (plan?.kind === "restore") {
      const shared = plan.shareFrom === null ? 0 : match.gpuTokens;
      this.ops.push({
        op: "restore",
        entry: plan.entry.id,
        seq: seat.id,
        tokens: held,
        shareFrom:
          plan.shareFrom === null || shared === 0 ? null : { seq: plan.shareFrom.id, tokens: shared },
      });
      this.tiers?.touch(plan.entry);
      this.restoredFor.set(plan.entry.id, { request, tokens: held - shared });
      this.stats.restoredTokens += held - shared;
      this.stats.sharedTokens += shared;
    }
    this.restoring = null;
    this.source = null;
    this.ops.push({ op: "assign", seq: seat.id, requestId: request.id });
    this.index.sync(seat);
    seat.checkpointAt = match.checkpointAt ?? null;
  }

  // -------------------------------------------------------------------------------------------------
  // holders coming and going (KvCacheManager)

  /** New full blocks of a running request: indexed for the admissions after it. */
  grew(request: Request): void {
    const seq = this.seqOf(request);
    if (seq) this.index.sync(seq);
  }

  /** A finished request's sequence is held by its program's pin. */
  pinned(request: Request, pin: Pin): void {
    const seq = this.seqOf(request);
    if (!seq) return;
    this.byRequest.delete(request.id);
    seq.holder = { kind: "pin", pin };
    this.byPin.set(pin.programId, seq);
  }

  /** A request lets go of its sequence (finished, preempted, aborted): it stays resident as cache. */
  releasedRequest(request: Request): void {
    const seq = this.seqOf(request);
    if (!seq) return;
    this.byRequest.delete(request.id);
    this.letGo(seq, request.numComputedTokens, request.blockIds);
  }

  /** A pin goes: its sequence, when resident, stays as cache. */
  releasedPin(pin: Pin): void {
    const seq = this.byPin.get(pin.programId);
    if (!seq || seq.pin !== pin) return;
    this.byPin.delete(pin.programId);
    this.letGo(seq, pin.tokens, pin.blockIds);
  }

  /** A request whose KV is not to be trusted (a failed step): its sequence is dropped. */
  discard(request: Request): void {
    const seq = this.seqOf(request);
    if (!seq) return;
    this.byRequest.delete(request.id);
    seq.letGo(0, []);
    this.index.sync(seq);
    this.ops.push({ op: "drop", seq: seq.id });
  }

  /**
   * Tier entries the executor could not write or read: forgotten. Returns the requests admitted in this
   * step that were to be restored from one of them (their sequence is dropped; the scheduler recomputes them).
   */
  lostEntries(entries: Iterable<number>): Request[] {
    const lost: Request[] = [];
    for (const id of entries) {
      const entry = this.tiers?.get(id);
      if (entry) this.tiers?.forget(entry);
      const restore = this.restoredFor.get(id);
      if (restore && this.seqOf(restore.request)) {
        // planned, never restored: its tokens are computed instead
        this.stats.restoredTokens -= restore.tokens;
        this.discard(restore.request);
        lost.push(restore.request);
      }
    }
    return lost;
  }

  // -------------------------------------------------------------------------------------------------
  // the step around admissions

  /**
   * Before a step's admissions: with `runningOnly`, every sequence not running leaves the pool for the tier;
   * sliding-window prefixes computed up to their checkpoint are copied into a free sequence.
   */
  startStep(): void {
    this.resetThisStep = false;
    this.restoredFor = new Map();
    if (this.spec.runningOnly && this.tiers !== null) {
      for (const seq of this.seqs) if (!seq.running && !seq.empty) this.evict(seq);
    }
    for (const seq of this.seqs) this.keepCheckpoint(seq);
  }

  /**
   * After a step's admissions: with a tier, sequences nobody holds (and with `runningOnly` pinned ones) move
   * into it, since every resident cell below llama.cpp's high-water mark costs every later step's attention
   * on the CPU, while restoring a sequence is a copy. Without a tier the pool is the only prefix cache.
   */
  endStep(): void {
    if (this.tiers === null) return;
    for (const seq of this.seqs) {
      if (seq.cached || (this.spec.runningOnly && seq.pin !== null)) this.evict(seq);
    }
  }

  /**
   * At shutdown: with `keep`, every resident sequence is saved, least recently used first, and the tier
   * keeps the most recently used entries that fit on disk; then every sequence is dropped.
   */
  shutdown(keep: boolean): void {
    if (keep && this.tiers !== null) {
      const resident = this.seqs.filter((s) => !s.empty && !s.running).sort((a, b) => a.lastUse - b.lastUse);
      for (const seq of resident) this.evict(seq);
      this.tiers.keepOnDisk();
    }
    for (const seq of this.seqs) {
      if (seq.empty) continue;
      this.byRequest.delete(seq.running?.id ?? "");
      const pin = seq.pin;
      if (pin) this.byPin.delete(pin.programId);
      if (seq.holder === null) this.back(seq, -1);
      seq.letGo(0, []);
      this.index.sync(seq);
      this.ops.push({ op: "drop", seq: seq.id });
    }
  }

  /** States a persistent disk tier kept from an earlier run, least recently used first. */
  adopt(states: readonly AdoptedState[]): TierEntry[] {
    if (this.tiers === null) throw new Error("saved states need a tier");
    return this.tiers.adopt(states);
  }

  // -------------------------------------------------------------------------------------------------
  // reading

  /** Sequences not running that hold KV (pinned or cache). */
  get numResident(): number {
    let n = 0;
    for (const s of this.seqs) if (!s.running && !s.empty) n++;
    return n;
  }

  /** The cells the executor holds now: shared cells once (one unified pool), every copy in its own. */
  cellsUsed(): number {
    return cellsHeld(this.spec, this.seqs, this.blockSizeTokens);
  }

  /** Throws if sequences, holders and blocks disagree. O(sequences x blocks): tests only. */
  checkInvariants(): void {
    const b = this.blockSizeTokens;
    const backers = new Uint16Array(this.freeBackers.length);
    for (const seq of this.seqs) {
      if (seq.length > seq.blocks.length * b)
        throw new Error(`sequence ${seq.id} holds ${seq.length} tokens in ${seq.blocks.length} blocks`);
      const request = seq.running;
      if (request && this.byRequest.get(request.id) !== seq)
        throw new Error(`sequence ${seq.id} runs ${request.id}, which the map does not know`);
      if (request && request.status !== "running")
        throw new Error(`sequence ${seq.id} computes for a ${request.status} request`);
      const pin = seq.pin;
      if (pin && this.byPin.get(pin.programId) !== seq)
        throw new Error(`sequence ${seq.id} is pinned for ${pin.programId}, which the map does not know`);
      if (seq.holder === null) {
        for (let i = 0; i * b < seq.length; i++) {
          const block = seq.blocks[i] as number;
          backers[block] = (backers[block] as number) + 1;
          if (this.blockIndex[block] !== i)
            throw new Error(`block ${block} is at ${i} of sequence ${seq.id}`);
        }
      }
    }
    for (let block = 0; block < backers.length; block++) {
      if (backers[block] !== this.freeBackers[block])
        throw new Error(
          `block ${block} backs ${backers[block]} cached sequences, counted ${this.freeBackers[block]}`,
        );
    }
    if (this.spec.layout === "unified" && this.cellsUsed() > this.spec.cells)
      throw new Error(`${this.cellsUsed()} cells in use of ${this.spec.cells}`);
  }

  // -------------------------------------------------------------------------------------------------
  // seats, cells, cuts

  /**
   * An empty sequence for an admission: an empty one, else the least recently used one nobody holds
   * (dropped, saved first with a tier), else with a tier the least recently used pinned one (parked: saved
   * and dropped, its pin stays). Never `keep`.
   */
  private freeSeat(request: Request, keep: Sequence | null): Sequence {
    let victim: Sequence | null = null;
    for (const seq of this.seqs) {
      if (seq.empty) return seq;
      if (seq === keep || seq.running) continue;
      const free = seq.holder === null;
      if (!free && this.tiers === null && seq.pin?.programId !== request.programId) continue;
      const victimFree = victim?.holder === null;
      if (victim === null || (free && !victimFree) || (free === victimFree && seq.lastUse < victim.lastUse))
        victim = seq;
    }
    if (victim === null)
      throw new Error(`no free sequence: all ${this.seqs.length} are held (placeable was not asked)`);
    this.evict(victim);
    return victim;
  }

  /**
   * Whether `cells` cells are free for a state restored whole into one unified pool (before it is cut), or
   * can be made free by dropping sequences nobody holds (never `keep`). The ops run before the step's batch,
   * so the cells in use then are the positions the sequences hold now.
   */
  private cellRoomFor(cells: number, keep: Sequence | null): boolean {
    const { free, droppable } = this.cellRoom(keep);
    return free + droppable >= cells;
  }

  private cellRoom(keep: Sequence | null): { free: number; droppable: number } {
    const used = this.cellsUsed();
    const kept = this.seqs.some((s) => s.holder === null && s !== keep && !s.empty)
      ? cellsHeld(
          this.spec,
          this.seqs.filter((s) => s.holder !== null || s === keep),
          this.blockSizeTokens,
        )
      : used;
    return { free: this.spec.cells - used, droppable: used - kept };
  }

  /** Drops sequences nobody holds (least recently used first, never `keep`) until `cells` cells are free. */
  private makeCellRoom(cells: number, keep: Sequence | null): void {
    while (this.cellRoom(keep).free < cells) {
      let victim: Sequence | null = null;
      for (const seq of this.seqs) {
        if (seq.holder === null && !seq.empty && seq !== keep && (!victim || seq.lastUse < victim.lastUse))
          victim = seq;
      }
      if (victim === null) return;
      this.evict(victim);
    }
  }

  /** With `runningOnly`, an admission into a pool nothing is left in starts it from its first cell again. */
  private resetIfEmpty(): void {
    if (!this.spec.runningOnly || this.tiers === null || this.resetThisStep) return;
    if (this.seqs.some((s) => s.length > 0)) return;
    this.resetThisStep = true;
    this.ops.push({ op: "reset" });
  }

  /**
   * A sliding-window model's running sequence that has computed the prefix its chunks stopped at: copied
   * into an empty sequence nobody will hold (a checkpoint), where no checkpoint of that prefix exists yet.
   */
  private keepCheckpoint(seq: Sequence): void {
    const at = seq.checkpointAt;
    const content = seq.content;
    if (at === null || seq.running === null || content === null || seq.length < at) return;
    seq.checkpointAt = null;
    if (seq.length !== at) return;
    const b = this.blockSizeTokens;
    if (this.index.holders(content.blockHash(at / b - 1)).some((s) => s.checkpoint && s.length === at))
      return;
    const holder = this.seqs.find((s) => s.empty);
    if (!holder) return;
    let blocks: readonly number[];
    if (this.takesBlocks) {
      // its own cells: fresh blocks, at once free again, so the pool counts them and hands them out last
      const fresh = this.pool.allocate(Math.ceil(at / b));
      if (fresh === null) return;
      this.pool.free([...fresh].reverse());
      blocks = fresh;
    } else {
      blocks = seq.blocks.slice(0, Math.ceil(at / b));
    }
    this.ops.push({ op: "copy", from: seq.id, to: holder.id, tokens: at, mode: "data" });
    holder.content = content;
    holder.requestId = seq.requestId;
    holder.programId = "";
    holder.lastUse = ++this.useCounter;
    holder.letGo(at, blocks);
    holder.checkpoint = true;
    this.back(holder, 1);
    this.index.sync(holder);
    this.stats.checkpointTokens += at;
  }

  /** A sequence's holder let go: it stays resident, backed by the blocks the holder freed. */
  private letGo(seq: Sequence, length: number, blocks: readonly number[]): void {
    seq.lastUse = ++this.useCounter;
    seq.letGo(length, blocks);
    this.back(seq, 1);
    this.index.sync(seq);
  }

  /** Counts (+1) or uncounts (-1) a sequence nobody holds as backed by its blocks. */
  private back(seq: Sequence, delta: 1 | -1): void {
    const b = this.blockSizeTokens;
    const blocks = seq.blocks;
    for (let i = 0; i * b < seq.length; i++) {
      const block = blocks[i] as number;
      this.freeBackers[block] = (this.freeBackers[block] as number) + delta;
      if (delta > 0) this.blockIndex[block] = i;
    }
  }

  /** The pool hands a free block to new content: the sequences nobody holds that it backs are cut there. */
  private blockReused(block: number): void {
    if (this.freeBackers[block] === 0) return;
    const at = this.blockIndex[block] as number;
    for (const seq of this.seqs) {
      if (seq.holder === null && seq.blocks[at] === block && at * this.blockSizeTokens < seq.length)
        this.cut(seq, at * this.blockSizeTokens);
    }
  }

  /**
   * Cuts a sequence nobody holds to `tokens`: whole when nothing is left, for a sliding-window model (one cut
   * back at all is not continued), and with a tier (saved first, as the spill would); but an admission's
   * source keeps the prefix it gives (saved whole first, with a tier).
   */
  private cut(seq: Sequence, tokens: number): void {
    this.stats.poolCuts++;
    const giving = seq === this.source && tokens > 0 && !this.windowed;
    if (giving) this.save(seq);
    else if (tokens === 0 || this.windowed || this.tiers !== null) {
      this.evict(seq);
      return;
    }
    this.back(seq, -1);
    seq.cut(tokens, this.blockSizeTokens);
    this.back(seq, 1);
    this.index.sync(seq);
    this.ops.push({ op: "truncate", seq: seq.id, tokens });
  }

  /**
   * Saves a sequence to the tier when that keeps something new: no other sequence and no entry holds all
   * its blocks. The tier it went to, or null.
   */
  private save(seq: Sequence): TierName | null {
    const tokens = seq.length;
    const content = seq.content;
    const tiers = this.tiers;
    if (
      tiers === null ||
      content === null ||
      tokens < this.blockSizeTokens ||
      this.index.heldElsewhere(seq) ||
      tiers.covers(content, tokens)
    )
      return null;
    const entry = tiers.put(content, tokens, seq.programId || null, this.restoring);
    if (entry === null) return null;
    this.ops.push({ op: "save", seq: seq.id, tokens, entry: entry.id, tier: entry.tier });
    this.stats.savedToTier++;
    return entry.tier;
  }

  /** Drops a resident sequence (nobody's, or a pin's: parked, the pin stays), saved first when worth it. */
  private evict(seq: Sequence): void {
    const tokens = seq.length;
    const savedTo = this.save(seq);
    this.stats.evictions++;
    const pin = seq.pin;
    if (pin) {
      this.stats.parkedPins++;
      this.byPin.delete(pin.programId);
    }
    this.onEvict?.(seq, tokens, savedTo);
    if (seq.holder === null) this.back(seq, -1);
    seq.letGo(0, []);
    this.index.sync(seq);
    this.ops.push({ op: "drop", seq: seq.id });
  }
}

function sourceOf(match: PrefixMatch): Sequence | null {
  const plan = match.sequence;
  if (!plan) return null;
  return plan.kind === "restore" ? plan.shareFrom : plan.source;
}
