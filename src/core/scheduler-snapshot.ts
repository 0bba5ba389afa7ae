import type { BlockPool } from "./kv/block-pool.js";
import type { OffloadTiers } from "./kv/offload-tiers.js";
import type { Program } from "./program.js";
import type { Request } from "./request.js";

/**
 * A program's state as an operator sees it: a turn running, a turn waiting (`evicted`: waiting, and its
 * context was not resident when the turn came: it is recomputed or reloaded), between turns with its KV
 * pinned, or between turns without a pin (in a tool call, or done without saying so).
 */
export type ProgramState = "running" | "waiting" | "evicted" | "pinned" | "tool";

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
}

const STATE_ORDER: Record<ProgramState, number> = { running: 0, waiting: 1, evicted: 1, pinned: 2, tool: 3 };

function programState(program: Program, evictedWaiting: ReadonlySet<Program>): ProgramState {
  if (program.numRunning > 0) return "running";
  if (program.numWaiting > 0) return evictedWaiting.has(program) ? "evicted" : "waiting";
  return program.pin !== null ? "pinned" : "tool";
}

export function buildSnapshot(
  nowS: number,
  pool: BlockPool,
  tiers: OffloadTiers | null,
  programs: Iterable<Program>,
  live: Iterable<Request>,
  maxPrograms: number,
): SchedulerSnapshot {
  const evictedWaiting = new Set<Program>();
  let numRunning = 0;
  let numWaiting = 0;
  const runningBlocks = new Set<number>();
  for (const request of live) {
    if (request.status === "running") {
      numRunning++;
      for (const b of request.blockIds) runningBlocks.add(b);
    } else if (request.status === "waiting") {
      numWaiting++;
      if (request.arrivedEvicted && request.numAdmissions === 0) evictedWaiting.add(request.program);
    }
  }
  const pinnedOnly = new Set<number>();
  const all: ProgramSnapshot[] = [];
  for (const program of programs) {
    for (const b of program.pin?.blockIds ?? []) if (!runningBlocks.has(b)) pinnedOnly.add(b);
    const state = programState(program, evictedWaiting);
    all.push({
      id: program.id,
      state,
      pinTtlLeftS: program.pin ? Math.max(0, program.pin.expiresS - nowS) : null,
      contextTokens: program.contextTokens,
      turns: program.numFinished,
      ageS: nowS - program.firstArrivalS,
      cachedShare:
        program.promptTokensServed > 0 ? program.cachedTokensServed / program.promptTokensServed : null,
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
  };
}
