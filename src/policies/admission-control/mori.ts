import type { PolicyContext, SchedulingPolicy } from "../../core/policy.js";
import type { Program } from "../../core/program.js";
import type { Request } from "../../core/request.js";
import { FREE } from "../../core/retention.js";
import { nowOf, Ticks } from "./ticks.js";

/**
 * MORI (Xia, Li, Li, Chen, Kang, Qiao, Xu, Stoica: "Idleness is Relative: Exploiting Tool-Call Idle Windows
 * for Offloading in Agentic Systems with MORI", arXiv 2606.00866, sec. 4). Each program has an idleness
 * score iota = T_acting / (T_reasoning + T_acting) over its last k inference / tool-call cycles (eq. 1; the
 * cycle in progress counts, so a tool call that runs long raises it as it runs; time spent queued by the
 * scheduler counts in neither). Programs are ranked by iota and placed in three tiers: the busiest in GPU
 * memory until it is full, the next in CPU memory until it is full, the rest in a waiting queue whose KV is
 * dropped; the boundary follows the tiers' capacities, not a busy/idle label. Every tick (and whenever a turn
 * ends or a program ends) the ranking is redone; programs beyond both tiers are demoted to the waiting queue,
 * the idlest first, and the waiting queue is promoted as room frees: programs whose tool call returned
 * first, then returning ones before new ones, the smallest first (admission control per tier). A waiting
 * program's turn does not start.
 *
 * Mapped onto this scheduler: a turn of a program placed in GPU memory ends in a pin that lasts until its
 * iota, rising with its tool call, would pass the GPU boundary's (the paper's demotion at a tick, computed
 * ahead), at most `maxPinS`; pins are sacrificed under memory pressure idlest first. A program placed in CPU
 * memory frees its KV, which the RAM tier keeps. The RAM tier here is inclusive (written through at every
 * turn's end): a GPU program's KV is in it too, so both tiers together hold max(GPU, RAM) of programs, and
 * that is the admission bound. Without a RAM tier the waiting queue starts at the GPU boundary. Deviations: the RAM tier evicts least recently used, not
 * idle programs last (the paper's typed eviction); pins are placed at turn ends and leave on expiry or under
 * pressure, never moved at a tick (a running turn is never demoted, as the paper's lazy demotion has it);
 * one engine (no cross-replica bin packing); a program without a finished turn counts as busiest (the paper
 * leaves cold start open).
 */
export interface MoriOptions {
  /** k, the cycles in the idleness window (paper: 5 in every experiment) */
  readonly windowCycles: number;
  /** the rebalancing tick (paper: 5 s, its ThunderAgent-based control loop's default) */
  readonly tickS: number;
  /** longest a GPU pin lasts (ThunderAgent's forced resume, the base MORI is built on: 1800 s) */
  readonly maxPinS: number;
}

export const MORI_PAPER: MoriOptions = { windowCycles: 5, tickS: 5, maxPinS: 1800 };

export type MoriTier = "gpu" | "cpu" | "waiting";

interface Cycle {
  reasoningS: number;
  actingS: number;
}

/** A program as MORI tracks it. */
interface Tracked {
  readonly program: Program;
  /** completed cycles, oldest first, at most k - 1 (the k-th is the one in progress) */
  readonly cycles: Cycle[];
  /** the cycle in progress: its turn's time on the engine, then its tool call since `actingSinceS` */
  reasoningS: number;
  actingSinceS: number | null;
  tier: MoriTier;
  /** has run no turn yet */
  fresh: boolean;
  /** KV tokens it holds or will hold: its context */
  tokens: number;
  /** a turn of it waits (arrived after its tool call) */
  waitingTurn: Request | null;
}

export class MoriScheduler {
  private readonly tracked = new Map<Program, Tracked>();
  private readonly ticks: Ticks;
  /** the iota of the busiest program beyond GPU memory at the latest ranking (a GPU pin's limit) */
  private gpuBoundaryIota = Number.POSITIVE_INFINITY;
  /** a program ended since the latest ranking */
  private rankDue = false;
  readonly counters = { demotions: 0, promotions: 0, gpuPins: 0, cpuPlacements: 0, rankings: 0 };

  constructor(readonly options: MoriOptions = MORI_PAPER) {
    if (!(Number.isInteger(options.windowCycles) && options.windowCycles >= 1))
      throw new Error(`MORI's window must be at least one cycle, got ${options.windowCycles}`);
    this.ticks = new Ticks(options.tickS);
  }

  tierOf(program: Program): MoriTier | null {
    return this.tracked.get(program)?.tier ?? null;
  }

  /** iota at `nowS` (0 for a program without history: it is about to reason). */
  idleness(program: Program, nowS: number): number {
    const t = this.tracked.get(program);
    return t ? this.iota(t, nowS) : 0;
  }

  advance(nowS: number, ctx: PolicyContext): void {
    this.ticks.catchUp(nowS, (atS) => this.rank(atS, ctx));
    if (this.rankDue) this.rank(nowS, ctx);
  }

  /** A turn arrived: the program's tool call (if any) ended; a new program waits for room. */
  arrived(request: Request, program: Program, nowS: number, ctx: PolicyContext): void {
    let t = this.tracked.get(program);
    if (!t) {
      t = {
        program,
        cycles: [],
        reasoningS: 0,
        actingSinceS: null,
        tier: "waiting",
        fresh: true,
        tokens: request.promptTokens,
        waitingTurn: null,
      };
      this.tracked.set(program, t);
    }
    if (t.actingSinceS !== null) {
      this.closeCycle(t, nowS - t.actingSinceS);
      t.actingSinceS = null;
    }
    t.tokens = Math.max(t.tokens, request.promptTokens);
    t.waitingTurn = request;
    if (t.tier === "waiting") this.rank(nowS, ctx);
  }

  /** May this turn start? Not while its program is in the waiting queue. */
  mayStart(program: Program): boolean {
    return this.tracked.get(program)?.tier !== "waiting";
  }

  /** Priority: preempted turns, then turns of placed programs (busiest first), then held ones in promotion order. */
  prioritize(request: Request, program: Program, nowS: number): void {
    const p = request.priority;
    const t = this.tracked.get(program);
    if (request.preempted || !t) {
      p[0] = 0;
      p[1] = 0;
      p[2] = request.arrivalS;
      return;
    }
    if (t.tier === "waiting") {
      p[0] = 2;
      p[1] = t.fresh ? 1 : 0;
      p[2] = t.tokens;
      return;
    }
    p[0] = 1;
    p[1] = this.iota(t, nowS);
    p[2] = request.arrivalS;
  }

  nextChangeS(): number {
    return this.ticks.nextS;
  }

  /**
   * A turn ended in a tool call: the program acts. Ranked with the others, it keeps its KV in GPU memory
   * (the returned pin TTL) or lets it go to CPU memory (null).
   */
  turnEnded(request: Request, program: Program, nowS: number, ctx: PolicyContext): number | null {
    const t = this.tracked.get(program);
    if (!t) return null;
    t.fresh = false;
    t.waitingTurn = null;
    t.reasoningS += Math.max(0, (request.finishS ?? nowS) - (request.admittedS ?? nowS));
    t.actingSinceS = nowS;
    t.tokens = request.numTokens;
    this.rank(nowS, ctx);
    if (t.tier !== "gpu") {
      this.counters.cpuPlacements++;
      return null;
    }
    this.counters.gpuPins++;
    return Math.min(this.options.maxPinS, this.secondsUntilIota(t, this.gpuBoundaryIota));
  }

  /** A program ended: its room goes to the waiting queue at the next hook (which brings the time). */
  ended(program: Program): void {
    if (this.tracked.delete(program)) this.rankDue = true;
  }

  /**
   * The ranking: running programs hold GPU memory; the others, busiest first (acting before one whose turn
   * waits at equal iota: the paper prefers demoting acting programs), fill GPU memory, then CPU memory; the
   * rest are demoted. Then the waiting queue is promoted into the room left.
   */
  private rank(nowS: number, ctx: PolicyContext): void {
    this.rankDue = false;
    this.counters.rankings++;
    // The RAM tier here is inclusive (written through at every turn's end, as LMCache and HiCache write):
    // a GPU program's KV is in it too, so the two tiers hold max(GPU, RAM) of programs between them.
    let gpuLeft = ctx.kvCapacityTokens;
    let bothLeft = Math.max(ctx.kvCapacityTokens, ctx.offloadCapacityTokens);
    const placed: Tracked[] = [];
    const queued: Tracked[] = [];
    for (const t of this.tracked.values()) {
      if (t.program.ended) continue;
      if (t.program.numRunning > 0) {
        gpuLeft -= t.tokens;
        bothLeft -= t.tokens;
        if (t.tier === "waiting") this.counters.promotions++;
        t.tier = "gpu";
      } else if (t.tier === "waiting") queued.push(t);
      else placed.push(t);
    }
    const iota = new Map<Tracked, number>();
    for (const t of placed) iota.set(t, this.iota(t, nowS));
    placed.sort(
      (a, b) =>
        (iota.get(a) as number) - (iota.get(b) as number) ||
        Number(a.waitingTurn === null) - Number(b.waitingTurn === null),
    );
    const place = (t: Tracked): MoriTier => {
      if (t.tokens > bothLeft) return "waiting";
      bothLeft -= t.tokens;
      if (t.tokens <= gpuLeft) {
        gpuLeft -= t.tokens;
        return "gpu";
      }
      return "cpu";
    };
    this.gpuBoundaryIota = Number.POSITIVE_INFINITY;
    for (const t of placed) {
      t.tier = place(t);
      if (t.tier !== "gpu") this.gpuBoundaryIota = Math.min(this.gpuBoundaryIota, iota.get(t) as number);
      if (t.tier === "waiting") this.counters.demotions++;
    }
    // promotion: tool call returned first, then returning before new, smallest first
    const group = (t: Tracked) => (t.waitingTurn !== null && !t.fresh ? 0 : t.fresh ? 2 : 1);
    queued.sort((a, b) => group(a) - group(b) || a.tokens - b.tokens);
    for (const t of queued) {
      t.tier = place(t);
      if (t.tier !== "waiting") this.counters.promotions++;
    }
  }

  private closeCycle(t: Tracked, actingS: number): void {
    t.cycles.push({ reasoningS: t.reasoningS, actingS });
    while (t.cycles.length > this.options.windowCycles - 1) t.cycles.shift();
    t.reasoningS = 0;
  }

  /** eq. 1 over the last k - 1 cycles and the one in progress. */
  private iota(t: Tracked, nowS: number): number {
    let reasoning = t.reasoningS;
    let acting = t.actingSinceS === null ? 0 : Math.max(0, nowS - t.actingSinceS);
    for (const c of t.cycles) {
      reasoning += c.reasoningS;
      acting += c.actingS;
    }
    const total = reasoning + acting;
    return total > 0 ? acting / total : 0;
  }

  /** Seconds more of the tool call in progress until iota reaches `target` (Infinity: never). */
  private secondsUntilIota(t: Tracked, target: number): number {
    if (!(target < 1)) return Number.POSITIVE_INFINITY;
    let reasoning = t.reasoningS;
    let acting = 0;
    for (const c of t.cycles) {
      reasoning += c.reasoningS;
      acting += c.actingS;
    }
    // (acting + x) / (reasoning + acting + x) = target
    return Math.max(0, (target * (reasoning + acting) - acting) / (1 - target));
  }
}

const DESCRIPTION =
  "MORI (arXiv 2606.00866): programs ranked by idleness (tool time over the last 5 cycles), the busiest kept in GPU memory (pinned until their idleness would pass the GPU boundary), the next in CPU memory (the RAM tier), the rest held in a waiting queue; rebalanced every 5 s and at each turn's end; promotion: returned tool calls, then returning programs, smallest first. Deviations: LRU (not typed) eviction in the RAM tier, pins not moved at ticks, one engine";

export function createMoriPolicy(
  options: MoriOptions = MORI_PAPER,
  name = "mori",
  description = DESCRIPTION,
): SchedulingPolicy & { readonly mori: MoriScheduler } {
  const mori = new MoriScheduler(options);
  const seen = new WeakSet<Request>();
  return {
    name,
    description,
    mori,
    needsOffload: false,
    toolParser: "paper",
    dynamicPriorities: true,
    prioritize(request, program, ctx) {
      const nowS = nowOf(ctx, request);
      mori.advance(nowS, ctx);
      if (!seen.has(request)) {
        seen.add(request);
        mori.arrived(request, program, nowS, ctx);
      }
      mori.prioritize(request, program, nowS);
    },
    nextPriorityChangeS: () => mori.nextChangeS(),
    admitsTurn(_request, program, ctx) {
      mori.advance(ctx.nowS, ctx);
      return mori.mayStart(program);
    },
    retain(request, program, _tool, ctx) {
      mori.advance(ctx.nowS, ctx);
      const ttlS = mori.turnEnded(request, program, ctx.nowS, ctx);
      return ttlS === null || !(ttlS > 0) ? FREE : { kind: "pin", ttlS };
    },
    // idlest first, as of the turn's end the pin follows
    pinVictimRank: (program) => mori.idleness(program, program.lastFinishS ?? 0),
    onProgramEnded: (program) => mori.ended(program),
  };
}
