/**
 * What a backend's prefix cache holds, followed from its KV events: every block it stored and has not removed
 * (its GPU medium; blocks offloaded elsewhere are not counted), and which chain of blocks holds each program's
 * latest turn. A turn's blocks are the run of stored blocks, during its flight, whose chain is as deep as the
 * turn's KV (its prompt and output, less the last token, which is sampled and never computed): the one that
 * passes through the program's previous chain where several are that deep, none where the choice stays open.
 * From the chain, the program's prefix still resident is the leading blocks no event has removed.
 */
import type { KvEvent, KvEventBatch } from "./kv-event-decode.js";

interface BlockRecord {
  readonly parent: string | null;
  /** blocks from the sequence's start to this one, itself included; NaN when its parent was never seen */
  readonly depth: number;
  resident: boolean;
}

interface StoredRun {
  readonly atMs: number;
  readonly tail: string;
  readonly depth: number;
  /** a later run continued this one (its first block's parent is this tail) */
  extended: boolean;
}

/** Events arrive after the step that stored the blocks: a run this long after a turn's end may still be its own. */
const ATTRIBUTION_GRACE_MS = 1000;
/** Stored runs kept for attribution (the newest). */
const RUNS_KEPT = 4096;
/** Programs whose latest chain is kept (the least recently attributed forgotten first). */
const CHAINS_KEPT = 65536;

export interface KvIndexStats {
  storedBlocks: number;
  removedBlocks: number;
  clears: number;
  batches: number;
  /** batches missing from the sequence (a subscriber that joined late, or a dropped message) */
  missedBatches: number;
  /** turns whose chain was found, and those where none or several were candidates */
  attributed: number;
  unattributed: number;
}

export class BackendKvIndex {
  readonly stats: KvIndexStats = {
    storedBlocks: 0,
    removedBlocks: 0,
    clears: 0,
    batches: 0,
    missedBatches: 0,
    attributed: 0,
    unattributed: 0,
  };
  private readonly blocks = new Map<string, BlockRecord>();
  private numResident = 0;
  private readonly runs: StoredRun[] = [];
  private readonly runByTail = new Map<string, StoredRun>();
  private readonly chains = new Map<string, readonly string[]>();
  private nextSequence: bigint | null = null;

  /** `maxRecords`: blocks remembered (resident or removed) at most; `blockSizeTokens`: the backend's block */
  constructor(
    readonly blockSizeTokens: number,
    private readonly maxRecords: number,
  ) {}

  get residentBlocks(): number {
    return this.numResident;
  }

  apply(batch: KvEventBatch, nowMs: number): void {
    this.stats.batches++;
    if (this.nextSequence !== null && batch.sequence > this.nextSequence) {
      this.stats.missedBatches += Number(batch.sequence - this.nextSequence);
    }
    this.nextSequence = batch.sequence + 1n;
    for (const event of batch.events) this.applyEvent(event, nowMs);
  }

  private applyEvent(event: KvEvent, nowMs: number): void {
    if (event.type === "cleared") {
      this.stats.clears++;
      for (const record of this.blocks.values()) record.resident = false;
      this.numResident = 0;
      return;
    }
    if (event.medium !== "GPU") return;
    if (event.type === "removed") {
      for (const hash of event.hashes) {
        const record = this.blocks.get(hash);
        if (record?.resident) {
          record.resident = false;
          this.numResident--;
          this.stats.removedBlocks++;
        }
      }
      return;
    }
    if (event.parent !== null) {
      const continued = this.runByTail.get(event.parent);
      if (continued) continued.extended = true;
    }
    let parent = event.parent;
    let depth = parent === null ? 0 : (this.blocks.get(parent)?.depth ?? Number.NaN);
    for (const hash of event.hashes) {
      depth += 1;
      const known = this.blocks.get(hash);
      if (known) this.blocks.delete(hash);
      this.blocks.set(hash, { parent, depth, resident: true });
      if (!known?.resident) {
        this.numResident++;
        this.stats.storedBlocks++;
      }
      parent = hash;
    }
    if (parent !== null) {
      const run = { atMs: nowMs, tail: parent, depth, extended: false };
      this.runs.push(run);
      this.runByTail.set(parent, run);
      if (this.runs.length > RUNS_KEPT) {
        for (const old of this.runs.splice(0, this.runs.length - RUNS_KEPT)) {
          if (this.runByTail.get(old.tail) === old) this.runByTail.delete(old.tail);
        }
      }
    }
    this.trim();
  }

  /** Forgets the oldest removed blocks beyond the bound (resident ones are kept: the backend holds them). */
  private trim(): void {
    if (this.blocks.size <= this.maxRecords) return;
    for (const [hash, record] of this.blocks) {
      if (this.blocks.size <= this.maxRecords) return;
      if (!record.resident) this.blocks.delete(hash);
    }
  }

  private chainTo(tail: string): string[] {
    const chain: string[] = [];
    for (let hash: string | null = tail; hash !== null; ) {
      chain.push(hash);
      hash = this.blocks.get(hash)?.parent ?? null;
    }
    return chain.reverse();
  }

  private descendsFrom(tail: string, ancestor: string): boolean {
    for (let hash: string | null = tail; hash !== null; hash = this.blocks.get(hash)?.parent ?? null) {
      if (hash === ancestor) return true;
    }
    return false;
  }

  /**
   * The chain of a turn of `programId` that ran from `startedMs` to `endedMs` with `kvTokens` tokens of KV,
   * found among the runs stored meanwhile; false when none or several fit.
   */
  attribute(programId: string, startedMs: number, endedMs: number, kvTokens: number): boolean {
    const depth = Math.floor(kvTokens / this.blockSizeTokens);
    // a turn's blocks come in several runs (prefill chunks, then output blocks): its chain ends at the last one
    let candidates = this.runs.filter(
      (run) =>
        !run.extended &&
        run.atMs >= startedMs &&
        run.atMs <= endedMs + ATTRIBUTION_GRACE_MS &&
        Math.abs(run.depth - depth) <= 1,
    );
    const previous = this.chains.get(programId);
    const previousTail = previous?.at(-1);
    if (candidates.length > 1 && previousTail !== undefined) {
      const through = candidates.filter((run) => this.descendsFrom(run.tail, previousTail));
      if (through.length > 0) candidates = through;
    }
    const tails = new Set(candidates.map((run) => run.tail));
    if (tails.size !== 1) {
      this.stats.unattributed++;
      return false;
    }
    this.chains.delete(programId);
    this.chains.set(programId, this.chainTo(candidates[0]!.tail));
    if (this.chains.size > CHAINS_KEPT) this.chains.delete(this.chains.keys().next().value as string);
    this.stats.attributed++;
    return true;
  }

  /** Tokens of the program's latest turn the backend still holds from its start; null when no chain is known. */
  residentPrefixTokens(programId: string): number | null {
    const chain = this.chains.get(programId);
    if (chain === undefined) return null;
    let blocks = 0;
    while (blocks < chain.length && this.blocks.get(chain[blocks] as string)?.resident) blocks++;
    return blocks * this.blockSizeTokens;
  }

  /** Tokens of the program's latest turn's chain (null when none is known). */
  chainTokens(programId: string): number | null {
    const chain = this.chains.get(programId);
    return chain === undefined ? null : chain.length * this.blockSizeTokens;
  }
}
