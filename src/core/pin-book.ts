import { MinHeap } from "./heaps/min-heap.js";
import type { KvCacheManager } from "./kv/kv-cache-manager.js";
import type { SchedulingPolicy } from "./policy.js";
import type { Pin, Program } from "./program.js";
import type { ProgramRegistry } from "./program-registry.js";
import type { EventRecorder } from "./recorder/recorder.js";
import type { Request } from "./request.js";
import type { KvPinned, KvRelease } from "./step-plan.js";

export type PinReleaseReason = "expired" | "reused" | "last_step" | "victim";

/** The scheduler's pin counters this book keeps up to date. */
export interface PinCounters {
  pinsCreated: number;
  pinsExpired: number;
  pinsSacrificed: number;
}

export interface PinBookDeps {
  readonly kv: KvCacheManager;
  readonly policy: SchedulingPolicy;
  readonly programs: ProgramRegistry;
  readonly counters: PinCounters;
  readonly record: (event: Parameters<EventRecorder["record"]>[0]) => void;
  /** KV ownership changes for the executor */
  readonly onPinned: (change: KvPinned) => void;
  readonly onReleased: (change: KvRelease) => void;
  /** a program's pin came or went (its waiting turns may rank differently; it may now be idle) */
  readonly onPinChanged: (program: Program, released: boolean, nowS: number) => void;
}

/**
 * The pins of finished turns whose program is expected back: creating one (its blocks written through to the
 * prefix cache and held), expiry, reuse by the program's next turn, and sacrifice in the policy's victim
 * order when an admission needs the memory. Pins are kept in a heap by sacrifice rank; entries of released
 * pins are skipped lazily and compacted away.
 */
export class PinBook {
  private readonly pinned = new Set<Program>();
  /** pins by sacrifice order (key = -rank) */
  private victims = new MinHeap<Pin>();

  constructor(private readonly deps: PinBookDeps) {}

  get size(): number {
    return this.pinned.size;
  }

  get tokens(): number {
    let tokens = 0;
    for (const program of this.pinned) tokens += program.pin?.tokens ?? 0;
    return tokens;
  }

  programs(): IterableIterator<Program> {
    return this.pinned.values();
  }

  /** Earliest pin expiry, so an event loop knows when the scheduler next has something to do. */
  nextExpiryS(): number | null {
    let earliest: number | null = null;
    for (const program of this.pinned) {
      const expiresS = program.pin?.expiresS ?? Number.POSITIVE_INFINITY;
      if (earliest === null || expiresS < earliest) earliest = expiresS;
    }
    return earliest;
  }

  /** Pins past their TTL whose program has no waiting request. */
  overdue(nowS: number): Program[] {
    return [...this.pinned].filter((p) => p.pin !== null && p.pin.expiresS <= nowS && p.numWaiting === 0);
  }

  /** The finished `request`'s KV stays for its program for `ttlS` (replacing the program's older pin). */
  pin(request: Request, program: Program, ttlS: number, nowS: number): void {
    if (program.pin) this.release(program, "reused", nowS);
    const pin: Pin = {
      programId: program.id,
      requestId: request.id,
      blockIds: request.blockIds,
      tokens: request.numComputedTokens,
      pinnedS: nowS,
      ttlS,
      expiresS: nowS + ttlS,
    };
    this.deps.kv.pin(request, pin);
    request.blockIds = [];
    request.numCachedBlocks = 0;
    program.pin = pin;
    this.deps.onPinned({
      requestId: request.id,
      programId: program.id,
      tokens: pin.tokens,
      expiresS: pin.expiresS,
    });
    this.pinned.add(program);
    this.victims.push(-this.deps.policy.pinVictimRank(program), pin);
    this.deps.counters.pinsCreated++;
    this.deps.record({ kind: "pinned", programId: program.id, requestId: request.id, timeS: nowS, ttlS });
    this.deps.onPinChanged(program, false, nowS);
  }

  /** The program's pin goes: its blocks return to the pool (as reusable prefix cache). */
  release(program: Program, reason: PinReleaseReason, nowS: number): void {
    const pin = program.pin;
    if (!pin) return;
    program.pin = null;
    this.pinned.delete(program);
    this.deps.kv.releasePin(pin);
    this.deps.onReleased({
      requestId: pin.requestId,
      programId: program.id,
      holder: "pin",
      reason,
      tokens: pin.tokens,
    });
    this.deps.record({
      kind: "unpinned",
      programId: program.id,
      requestId: pin.requestId,
      timeS: nowS,
      reason,
    });
    this.deps.onPinChanged(program, true, nowS);
  }

  /** Releases the pins due at `nowS` whose program has no turn waiting (one waiting reuses it instead). */
  expireDue(nowS: number): void {
    if (this.pinned.size === 0) return;
    for (const program of this.pinned) {
      const pin = program.pin as Pin;
      if (pin.expiresS <= nowS && program.numWaiting === 0) {
        this.deps.counters.pinsExpired++;
        this.release(program, "expired", nowS);
      }
    }
  }

  /**
   * Unpins the policy's preferred victim for `requester`'s turn (never `sparedProgramId` while others
   * exist). Under the policy's "ranked-after" rule, while others run, only a pin ranked as a victim ahead
   * of the requester's program may go.
   */
  sacrifice(sparedProgramId: string | null, requester: Program, othersRun: boolean, nowS: number): boolean {
    const policy = this.deps.policy;
    const rankFloor =
      policy.pinSacrifice === "ranked-after" && othersRun
        ? policy.pinVictimRank(requester)
        : Number.NEGATIVE_INFINITY;
    let spared: { key: number; pin: Pin } | null = null;
    let chosen: Pin | null = null;
    while (this.victims.size > 0) {
      const key = this.victims.peekKey() as number;
      const pin = this.victims.pop() as Pin;
      const program = this.deps.programs.get(pin.programId);
      if (!program || program.pin !== pin) continue;
      if (program.id === sparedProgramId) {
        spared = { key, pin };
        continue;
      }
      // The heap pops the largest rank first: once one is not ahead of the requester, none is.
      if (-key <= rankFloor) {
        this.victims.push(key, pin);
        break;
      }
      chosen = pin;
      break;
    }
    if (spared) {
      if (chosen || rankFloor > Number.NEGATIVE_INFINITY) this.victims.push(spared.key, spared.pin);
      else chosen = spared.pin;
    }
    if (!chosen) return false;
    this.deps.counters.pinsSacrificed++;
    this.release(this.deps.programs.get(chosen.programId) as Program, "victim", nowS);
    return true;
  }

  /** Drops heap entries of pins released by expiry or reuse, so the heap stays O(live pins). */
  compact(): void {
    if (this.victims.size <= 2 * this.pinned.size + 64) return;
    const fresh = new MinHeap<Pin>();
    for (const program of this.pinned) {
      if (program.pin) fresh.push(-this.deps.policy.pinVictimRank(program), program.pin);
    }
    this.victims = fresh;
  }
}
