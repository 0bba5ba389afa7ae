import type { PolicyContext, SchedulingPolicy } from "../../core/policy.js";
import type { Program } from "../../core/program.js";
import type { Request } from "../../core/request.js";
import { FREE } from "../../core/retention.js";
import { latestProgramFirst } from "../priorities.js";
import { nowOf, Ticks } from "./ticks.js";

/**
 * CONCUR (Chen et al., arXiv 2601.22705, ICML 2026): agent-level admission control run as congestion control
 * against middle-phase thrashing. A window W bounds the active agents. An agent is admitted whole (all its
 * turns run) while fewer than W are active; otherwise it waits, and paused agents go before new ones. Each
 * control interval reads the engine's KV usage U (the most KV held by running requests / pool seen in the
 * interval) and prefix-cache hit rate H (hit / looked-up prompt tokens of the turns first scheduled in the
 * interval), then:
 * - thrashing (U >= usageHigh and H below (1 - hitDrop) x its reference): W = max(1, floor(decrease x active))
 *   (multiplicative decrease), once the previous decrease has taken effect (active <= W);
 * - underused (U < usageHigh) while agents wait for the window: W = W + increase (additive increase);
 * - else W holds (near saturation without thrash).
 * The reference hit rate is a moving average of H over intervals without thrash (`concur`), or the share of
 * the looked-up tokens the agents' own earlier turns computed (`concur:reusable`). When W falls below the
 * active agents, the latest admitted are paused at a step boundary: one in a tool call at once (its next turn
 * waits), one with a turn in flight when that turn ends. Agents resume, in the order they were paused, as the
 * window makes room. KV is never pinned: finished turns go to the engine's LRU prefix cache, as on SGLang.
 *
 * The paper's full text could not be read here (only its abstract and summaries of it); the structure above
 * (admit / pause / resume whole agents at step boundaries; AIMD on U and H) is the paper's, while every
 * constant is an assumption named in CONCUR_DEFAULTS: TCP's +1 / x0.5, a 5 s interval, saturation at 90%,
 * and no window until the first thrash (slow start without a threshold).
 */
export interface ConcurOptions {
  /** the control interval (assumed 5 s, ThunderAgent's and Prometheus-style polling) */
  readonly intervalS: number;
  /** usage at which the KV cache counts as saturated (assumed 0.9) */
  readonly usageHigh: number;
  /** thrashing: the hit rate fell by more than this fraction of its reference (assumed 0.1) */
  readonly hitDrop: number;
  /** weight of the latest interval in the reference hit rate's moving average (assumed 0.2) */
  readonly hitReferenceWeight: number;
  /** agents added to the window per underused interval while agents wait (TCP: 1) */
  readonly increase: number;
  /** window multiplier on thrashing (TCP: 0.5) */
  readonly decrease: number;
  readonly minWindow: number;
  /** an active agent silent this long (no turn) is released: clients that never end their agents */
  readonly idleReleaseS: number;
  /**
   * what the hit rate is held against: its moving average over intervals without thrash, or the share of
   * the looked-up tokens the agents' own earlier turns left (what the cache would give if it kept them)
   */
  readonly hitReference: "moving-average" | "reusable";
}

export const CONCUR_DEFAULTS: ConcurOptions = {
  intervalS: 5,
  usageHigh: 0.9,
  hitDrop: 0.1,
  hitReferenceWeight: 0.2,
  increase: 1,
  decrease: 0.5,
  minWindow: 1,
  idleReleaseS: 600,
  hitReference: "moving-average",
};

const DESCRIPTION =
  "CONCUR: a window of active agents, admitted whole (paused agents first, then new ones); every 5 s, +1 agent while KV usage stayed under 90% and agents wait, x0.5 when usage reached 90% and the prefix hit rate fell 10% below its average; excess agents pause at their next step boundary; KV to the LRU cache. Deviations: the paper's constants were not available (TCP's +1/x0.5, 5 s, 90% assumed), no window until the first thrash, a held agent starts when nothing runs (no stall), vLLM-like engine (paper: SGLang)";

/** What the controller reads each interval. */
export interface ConcurSignal {
  /** the most KV held by running requests in the interval / the pool */
  readonly usage: number;
  /** hit / looked-up prompt tokens of the turns first scheduled in the interval; null if none */
  readonly hitRate: number | null;
  /** the share of those tokens the agents' own earlier turns computed (reusable if kept); null if none */
  readonly reusableRate: number | null;
  /** agents admitted and not ended (those about to pause included) */
  readonly active: number;
  /** agents with a turn held for the window */
  readonly waiting: number;
}

export type ConcurAction = "decrease" | "increase" | "hold";

/** The AIMD window on cache signals. */
export class ConcurWindow {
  /** active agents allowed; no limit until the first thrash */
  window = Number.POSITIVE_INFINITY;
  /** moving average of the hit rate over intervals without thrash (kept with the moving-average reference) */
  hitReference: number | null = null;

  constructor(readonly options: ConcurOptions = CONCUR_DEFAULTS) {}

  observe(s: ConcurSignal): ConcurAction {
    const o = this.options;
    const reference = o.hitReference === "reusable" ? s.reusableRate : this.hitReference;
    const thrashing =
      s.hitRate !== null &&
      reference !== null &&
      s.usage >= o.usageHigh &&
      s.hitRate < (1 - o.hitDrop) * reference;
    if (thrashing) {
      // The previous decrease takes effect as agents reach a step boundary; another waits for it.
      if (s.active > this.window) return "hold";
      this.window = Math.max(o.minWindow, Math.floor(o.decrease * Math.min(this.window, s.active)));
      return "decrease";
    }
    if (s.hitRate !== null && o.hitReference === "moving-average") {
      this.hitReference =
        this.hitReference === null
          ? s.hitRate
          : this.hitReference + o.hitReferenceWeight * (s.hitRate - this.hitReference);
    }
    if (s.usage < o.usageHigh && s.waiting > 0 && Number.isFinite(this.window)) {
      this.window += o.increase;
      return "increase";
    }
    return "hold";
  }
}

type AgentState = "waiting" | "active" | "paused";

interface Agent {
  readonly program: Program;
  request: Request | null;
  state: AgentState;
  marked: boolean;
  admittedSeq: number;
  pausedSeq: number;
  lastTurnEndS: number;
  /** the program's served prompt / cached tokens when last counted */
  countedQuery: number;
  countedHit: number;
  /** tokens its previous turn left (prompt and output): what its next prompt could find cached */
  lastContextTokens: number;
  /** the reusable part of its turns that arrived and were not yet counted in an interval */
  uncountedReusable: number;
}

/** CONCUR's agent table and controller; the SchedulingPolicy is a thin shell around it. */
export class ConcurScheduler {
  readonly aimd: ConcurWindow;
  private readonly agents = new Map<Program, Agent>();
  private readonly ticks: Ticks;
  private capacityTokens = 0;
  private seq = 0;
  /** served tokens of agents that ended since the last interval */
  private endedQuery = 0;
  private endedHit = 0;
  private endedReusable = 0;
  /** the most KV running requests held in the current interval, sampled at every hook call */
  private peakRunningTokens = 0;
  /** every interval's signal and action, for tests and reports */
  readonly history: { atS: number; signal: ConcurSignal; action: ConcurAction; window: number }[] = [];
  readonly counters = { pauses: 0, resumes: 0, admissions: 0 };

  constructor(readonly options: ConcurOptions = CONCUR_DEFAULTS) {
    this.aimd = new ConcurWindow(options);
    this.ticks = new Ticks(options.intervalS);
  }

  get window(): number {
    return this.aimd.window;
  }

  get numActive(): number {
    let n = 0;
    for (const a of this.agents.values()) if (a.state === "active") n++;
    return n;
  }

  /** Runs the intervals that ended by nowS, then samples the KV running requests hold now. */
  advance(nowS: number, ctx: PolicyContext): void {
    this.capacityTokens = ctx.kvCapacityTokens;
    this.ticks.catchUp(nowS, (atS) => this.tick(atS));
    let running = 0;
    for (const a of this.agents.values()) {
      if (a.request?.status === "running") running += a.request.numComputedTokens;
    }
    this.peakRunningTokens = Math.max(this.peakRunningTokens, running);
  }

  arrived(request: Request, program: Program, nowS: number): void {
    let a = this.agents.get(program);
    if (!a) {
      const returning = request.turnIndex !== 0 || request.continuesProgram;
      a = {
        program,
        request: null,
        state: returning ? "active" : "waiting",
        marked: false,
        admittedSeq: this.seq++,
        pausedSeq: 0,
        lastTurnEndS: nowS,
        countedQuery: program.promptTokensServed,
        countedHit: program.cachedTokensServed,
        lastContextTokens: 0,
        uncountedReusable: 0,
      };
      this.agents.set(program, a);
    }
    a.request = request;
    a.uncountedReusable += Math.min(request.promptTokens, a.lastContextTokens);
    // Admitted at once only when no agent is held ahead of it and the window has room.
    if (a.state !== "active" && !this.anyHeld(a) && this.numActive < this.window) this.activate(a);
  }

  mayStart(program: Program): boolean {
    const a = this.agents.get(program);
    if (!a || a.state === "active") return true;
    if (this.numActive >= this.window) return false;
    this.activate(a);
    return true;
  }

  rank(request: Request, program: Program): void {
    const p = request.priority;
    const a = this.agents.get(program);
    p[1] = 0;
    p[2] = request.arrivalS;
    if (request.preempted) p[0] = 0;
    else if (!a || a.state === "active") p[0] = 1;
    else if (a.state === "paused") {
      p[0] = 2;
      p[1] = a.pausedSeq;
    } else p[0] = 3;
  }

  turnEnded(request: Request, program: Program, nowS: number): void {
    const a = this.agents.get(program);
    if (!a) return;
    a.lastTurnEndS = nowS;
    a.lastContextTokens = request.numTokens;
    // A held turn that ran because nothing else did: the agent is active.
    if (a.state !== "active") this.activate(a);
    if (a.marked) {
      a.marked = false;
      this.pause(a);
    }
  }

  ended(program: Program): void {
    const a = this.agents.get(program);
    if (!a) return;
    this.endedQuery += program.promptTokensServed - a.countedQuery;
    this.endedHit += program.cachedTokensServed - a.countedHit;
    this.endedReusable += a.uncountedReusable;
    this.agents.delete(program);
  }

  private tick(atS: number): void {
    let query = this.endedQuery;
    let hit = this.endedHit;
    let reusable = this.endedReusable;
    this.endedQuery = 0;
    this.endedHit = 0;
    this.endedReusable = 0;
    let waiting = 0;
    for (const a of this.agents.values()) {
      const request = a.request;
      if (request?.status === "running" && a.state !== "active") this.activate(a);
      // a turn's reusable part counts in the interval its prompt was first scheduled, with its hits
      if (a.program.promptTokensServed > a.countedQuery && a.request?.status !== "waiting") {
        reusable += a.uncountedReusable;
        a.uncountedReusable = 0;
      }
      query += a.program.promptTokensServed - a.countedQuery;
      hit += a.program.cachedTokensServed - a.countedHit;
      a.countedQuery = a.program.promptTokensServed;
      a.countedHit = a.program.cachedTokensServed;
      const inTurn = request !== null && (request.status === "waiting" || request.status === "running");
      if (a.state !== "active" && request?.status === "waiting") waiting++;
      if (
        a.program.ended ||
        (a.state === "active" && !inTurn && atS - a.lastTurnEndS >= this.options.idleReleaseS)
      ) {
        this.agents.delete(a.program);
      }
    }
    const signal: ConcurSignal = {
      usage: this.capacityTokens > 0 ? this.peakRunningTokens / this.capacityTokens : 0,
      hitRate: query > 0 ? hit / query : null,
      reusableRate: query > 0 ? reusable / query : null,
      active: this.numActive,
      waiting,
    };
    this.peakRunningTokens = 0;
    const action = this.aimd.observe(signal);
    this.history.push({ atS, signal, action, window: this.window });
    if (this.history.length > MAX_HISTORY) this.history.splice(0, this.history.length - MAX_HISTORY);
    this.pauseExcess();
  }

  /** Active agents beyond the window pause at their next step boundary, the latest admitted first. */
  private pauseExcess(): void {
    const active = [...this.agents.values()].filter((a) => a.state === "active");
    let leaving = active.filter((a) => a.marked).length;
    const excess = active.length - this.window;
    if (excess <= leaving) return;
    active.sort((x, y) => y.admittedSeq - x.admittedSeq);
    for (const a of active) {
      if (excess <= leaving) break;
      if (a.marked) continue;
      const inTurn = a.request !== null && (a.request.status === "waiting" || a.request.status === "running");
      if (inTurn) a.marked = true;
      else this.pause(a);
      leaving++;
    }
  }

  private activate(a: Agent): void {
    if (a.state === "paused") this.counters.resumes++;
    else if (a.state === "waiting") this.counters.admissions++;
    a.state = "active";
    a.admittedSeq = this.seq++;
  }

  private pause(a: Agent): void {
    if (a.state !== "active") return;
    a.state = "paused";
    a.pausedSeq = this.seq++;
    this.counters.pauses++;
  }

  /** Another agent's turn is held for the window (so a newcomer queues behind it). */
  private anyHeld(except: Agent): boolean {
    for (const a of this.agents.values()) {
      if (a !== except && a.state !== "active" && a.request?.status === "waiting") return true;
    }
    return false;
  }
}

const MAX_HISTORY = 100_000;

/**
 * CONCUR judging thrash against what the cache could give instead of against its own recent past: a batch
 * that thrashes from its first interval (more agents than the pool holds, all started at once: the paper's
 * batch inference) never had a healthy hit rate to fall from, so the moving average never sees it.
 */
export const CONCUR_REUSABLE: ConcurOptions = { ...CONCUR_DEFAULTS, hitReference: "reusable" };

export function createConcurPolicy(
  options: ConcurOptions = CONCUR_DEFAULTS,
  name = "concur",
  description = DESCRIPTION,
): SchedulingPolicy & { readonly concur: ConcurScheduler } {
  const concur = new ConcurScheduler(options);
  const seen = new WeakSet<Request>();
  return {
    name,
    description,
    concur,
    needsOffload: false,
    toolParser: "paper",
    dynamicPriorities: false,
    prioritize(request, program, ctx) {
      const nowS = nowOf(ctx, request);
      concur.advance(nowS, ctx);
      if (!seen.has(request)) {
        seen.add(request);
        concur.arrived(request, program, nowS);
      }
      concur.rank(request, program);
    },
    admitsTurn(_request, program, ctx) {
      concur.advance(ctx.nowS, ctx);
      return concur.mayStart(program);
    },
    retain(request, program, _tool, ctx) {
      concur.advance(ctx.nowS, ctx);
      concur.turnEnded(request, program, ctx.nowS);
      return FREE;
    },
    pinVictimRank: latestProgramFirst,
    onProgramEnded: (program) => concur.ended(program),
  };
}
