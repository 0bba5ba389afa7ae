import type { BlockPool } from "./kv/block-pool.js";
import type { TierIndex } from "./kv/kv-cache-manager.js";
import type { Program } from "./program.js";
import type { Request } from "./request.js";

/**
 * A program's state as an operator sees it: a turn running, a turn waiting, between turns with its KV
 * pinned, between turns without a pin in a tool call (its last turn called one), or idle (its last turn
 * called none: an answer, perhaps its last, from a client that never says so). Where its KV is meanwhile
 * (the pool, a tier, or nowhere) is the engine's to say.
 */
export type ProgramState = "running" | "waiting" | "pinned" | "tool" | "idle";

export interface ProgramSnapshot {
  readonly id: string;
  readonly state: ProgramState;
  /** seconds left of the pin's TTL (pinned only; Infinity for a pin without expiry) */
  readonly pinTtlLeftS: number | null;
  readonly contextTokens: number;
  /** turns finished so far */
  readonly turns: number;
  readonly ageS: number;
  /** prompt tokens of its turns whose KV was reused, over all their prompt tokens (null before a turn ran) */
  readonly cachedShare: number | null;
}

/** A program that left the scheduler, as it was when it left. */
export interface DepartedProgram {
  readonly id: string;
  /** ended by its last step or its client; false: forgotten after idling */
  readonly ended: boolean;
  readonly contextTokens: number;
  /** turns finished */
  readonly turns: number;
  /** seconds from its first turn's arrival to when it left */
  readonly lifeS: number;
  readonly cachedShare: number | null;
  /** seconds since it left */
  readonly leftAgoS: number;
}

/** Programs that left the scheduler, newest last, recorded as they leave: at most `capacity`. */
export class DepartedPrograms {
  private readonly departed: { program: Program; leftS: number }[] = [];

  constructor(private readonly capacity: number) {}

  add(program: Program, nowS: number): void {
    this.departed.push({ program, leftS: nowS });
    if (this.departed.length > this.capacity) this.departed.shift();
  }

  list(nowS: number): DepartedProgram[] {
    return this.departed.map(({ program, leftS }) => ({
      id: program.id,
      ended: program.ended,
      contextTokens: program.contextTokens,
      turns: program.numFinished,
      lifeS: leftS - program.firstArrivalS,
      cachedShare: cachedShareOf(program),
      leftAgoS: nowS - leftS,
    }));
  }
}

export interface KvPoolSnapshot {
  readonly blockSizeTokens: number;
  readonly totalBlocks: number;
  /** held by running requests (and shared with pins where a running turn extends a pinned prefix) */
  readonly runningBlocks: number;
  /** held only by pins */
  readonly pinnedBlocks: number;
  /** free, still holding a prefix a later request may reuse */
  readonly cachedBlocks: number;
  readonly freeBlocks: number;
}

export interface SchedulerSnapshot {
  readonly timeS: number;
  readonly pool: KvPoolSnapshot;
  readonly tiers: readonly { name: string; usedBlocks: number; capacityBlocks: number }[];
  readonly numRunning: number;
  readonly numWaiting: number;
  readonly numPrograms: number;
  /** the programs, busiest first (running, waiting, pinned, then between turns), at most `maxPrograms` */
  readonly programs: readonly ProgramSnapshot[];
  /** the latest programs to leave the scheduler, newest last */
  readonly departed: readonly DepartedProgram[];
}

const STATE_ORDER: Record<ProgramState, number> = { running: 0, waiting: 1, pinned: 2, tool: 3, idle: 4 };

function programState(program: Program): ProgramState {
  if (program.numRunning > 0) return "running";
  if (program.numWaiting > 0) return "waiting";
  if (program.pin !== null) return "pinned";
  return program.numFinished > 0 && program.lastTurnTool === null ? "idle" : "tool";
}

function cachedShareOf(program: Program): number | null {
  return program.promptTokensServed > 0 ? program.cachedTokensServed / program.promptTokensServed : null;
}

export function buildSnapshot(
  nowS: number,
  pool: BlockPool,
  tiers: TierIndex | null,
  programs: Iterable<Program>,
  live: Iterable<Request>,
  departed: DepartedPrograms,
  maxPrograms: number,
): SchedulerSnapshot {
  let numRunning = 0;
  let numWaiting = 0;
  const runningBlocks = new Set<number>();
  for (const request of live) {
    if (request.status === "running") {
      numRunning++;
      for (const b of request.blockIds) runningBlocks.add(b);
    } else if (request.status === "waiting") {
      numWaiting++;
    }
  }
  const pinnedOnly = new Set<number>();
  const all: ProgramSnapshot[] = [];
  for (const program of programs) {
    for (const b of program.pin?.blockIds ?? []) if (!runningBlocks.has(b)) pinnedOnly.add(b);
    const state = programState(program);
    all.push({
      id: program.id,
      state,
      pinTtlLeftS: program.pin ? Math.max(0, program.pin.expiresS - nowS) : null,
      contextTokens: program.contextTokens,
      turns: program.numFinished,
      ageS: nowS - program.firstArrivalS,
      cachedShare: cachedShareOf(program),
    });
  }
  all.sort((a, b) => STATE_ORDER[a.state] - STATE_ORDER[b.state] || a.ageS - b.ageS);
  const cachedBlocks = pool.countFreeCachedBlocks();
  return {
    timeS: nowS,
    pool: {
      blockSizeTokens: pool.blockSizeTokens,
      totalBlocks: pool.numBlocks,
      runningBlocks: runningBlocks.size,
      pinnedBlocks: pinnedOnly.size,
      cachedBlocks,
      freeBlocks: pool.numFreeBlocks - cachedBlocks,
    },
    tiers: tiers?.usage() ?? [],
    numRunning,
    numWaiting,
    numPrograms: all.length,
    programs: all.slice(0, maxPrograms),
    departed: departed.list(nowS),
  };
}
