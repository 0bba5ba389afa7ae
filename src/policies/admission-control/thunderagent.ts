import type { PolicyContext, SchedulingPolicy } from "../../core/policy.js";
import type { Program } from "../../core/program.js";
import type { Request } from "../../core/request.js";
import { FREE } from "../../core/retention.js";
import { latestProgramFirst } from "../priorities.js";
import { nowOf, Ticks } from "./ticks.js";

/**
 * ThunderAgent (Kang et al., arXiv 2602.13692 sec. 4.3; code HaoKang-Timmy/ThunderAgent, scheduler/router.py;
 * NVIDIA Dynamo's port, components/src/dynamo/thunderagent_router/router.py). A program is REASONING (a turn
 * waiting or running) or ACTING (in a tool call), and ACTIVE or PAUSED. Its size c is its context: a reasoning
 * program's prompt and output so far, an acting one's context when its turn ended. The demand of the active
 * programs is sum(c + buffer) (eq. 6). Every tick (Delta t):
 * - resume: while the paused programs fit under the resume ceiling beside the demand, in which an acting
 *   program counts c x 2^(-t/tau) after t seconds in its tool call (eq. 7's f(t), applied on this side as in
 *   the authors' code), resume them in the order of S_restore (eq. 10): programs with a turn waiting first,
 *   then new programs, then acting ones, each group smallest first. A resumed program's turn may start.
 * - pause: while the demand exceeds lambda_max of the pool, pause acting programs smallest first (S_pause,
 *   eq. 11) down to the pause target, then mark reasoning programs smallest first to pause when their turn
 *   ends, until the marked ones cover the rest (Delta C).
 * A new program starts at once only if nothing is paused and its c + buffer fits the pool beside the demand;
 * else it waits paused. A paused program's next turn waits until a tick resumes it, or 1800 s at most.
 * Pausing is logical, as on vLLM in both implementations: KV is never pinned; a finished turn's KV goes to the
 * LRU prefix cache, and keeping the active programs within the pool is what keeps theirs there.
 * THUNDERAGENT_DYNAMO is Dynamo's variant: thresholds 0.95 / 0.80 / 0.85, no decay, every reasoning program
 * marked, soft demotion.
 */
export interface ThunderAgentOptions {
  /** Delta t, the scheduler loop's period (paper 5 s; code 5 s; Dynamo 5 s) */
  readonly tickS: number;
  /** lambda_max: pause when the active programs exceed this fraction of the pool (paper 1; Dynamo 0.95) */
  readonly pauseThreshold: number;
  /** pause down to this fraction (paper 1, lambda_max; Dynamo 0.80) */
  readonly pauseTarget: number;
  /** resume only below pauseThreshold minus this (paper 0: lambda_min = lambda_max = 1; Dynamo 0.10) */
  readonly resumeHysteresis: number;
  /** an acting program's weight on the pause side (code and Dynamo 1.0) */
  readonly actingWeight: number;
  /** tau of the 2^(-t/tau) decay of an acting program's tokens over its t seconds of acting (paper f(t) = 2^-t) */
  readonly decayHalfLifeS: number;
  /**
   * where acting programs count decayed: on the resume side (the authors' code, use_acting_token_decay: the
   * pause check stays eq. 6), everywhere (eq. 7 read literally as the thrashing check, restores keeping the
   * same total), or nowhere (Dynamo passes decayed=False to its resume and pause checks)
   */
  readonly decay: "resume" | "everywhere" | "none";
  /**
   * once pausing acting programs does not suffice, mark reasoning programs smallest first until the marked
   * tokens cover the overflow (paper: free Delta C), or mark every one (code and Dynamo: their loop never
   * counts the marked tokens as freed)
   */
  readonly markAll: boolean;
  /** tokens reserved per active program for its decode (code BUFFER_PER_PROGRAM; Dynamo 100) */
  readonly bufferPerProgram: number;
  /** a paused program's turn starts after waiting this long whatever the memory (code and Dynamo 1800 s) */
  readonly resumeTimeoutS: number;
  /** an acting program silent this long is released (Dynamo's program_idle_ttl 600 s; code: never) */
  readonly idleReleaseS: number;
  /**
   * Dynamo only: at a tick with usage in [threshold, pauseThreshold), active programs' turns for the next
   * 1.5 ticks rank `jumpS` seconds later (a negative priority jump); null: off (paper, code)
   */
  readonly softDemote: { readonly threshold: number; readonly jumpS: number } | null;
  /** Dynamo only: a resumed program's turn ranks this many seconds earlier (paper and code 0; Dynamo 1) */
  readonly resumeBoostS: number;
}

/** The paper's rules, with the reference code's (and Dynamo's) values where the paper gives none. */
export const THUNDERAGENT_PAPER: ThunderAgentOptions = {
  tickS: 5,
  pauseThreshold: 1,
  pauseTarget: 1,
  resumeHysteresis: 0,
  actingWeight: 1,
  decayHalfLifeS: 1,
  decay: "resume",
  markAll: false,
  bufferPerProgram: 100,
  resumeTimeoutS: 1800,
  idleReleaseS: 600,
  softDemote: null,
  resumeBoostS: 0,
};

/** NVIDIA Dynamo's defaults (thunderagent_router/args.py). */
export const THUNDERAGENT_DYNAMO: ThunderAgentOptions = {
  ...THUNDERAGENT_PAPER,
  pauseThreshold: 0.95,
  pauseTarget: 0.8,
  resumeHysteresis: 0.1,
  decay: "none",
  markAll: true,
  softDemote: { threshold: 0.8, jumpS: -2 },
  resumeBoostS: 1,
};

const DESCRIPTION =
  "ThunderAgent (paper; its code's values where it gives none): every 5 s, resume paused programs (waiting turns, then new, then acting; smallest first) while they fit the pool, then pause acting programs smallest first, then mark reasoning ones, while the programs exceed it; on the resume side acting programs count 2^-t after t s in a tool call (eq. 7, as in the authors' code); a new program waits while any is paused; KV goes to the LRU cache. Deviations: one engine (no global queue or migration), no tool environments, exact token counts, ticks at the scheduler's first call after each boundary, a held turn starts when nothing runs (no stall)";

/** A program as the ThunderAgent scheduler tracks it. */
interface Tracked {
  readonly program: Program;
  /** its latest turn */
  request: Request | null;
  /** turns seen (the code's step_count: 1 = a new program) */
  steps: number;
  acting: boolean;
  actingSinceS: number;
  /** context at the end of its latest turn */
  tokens: number;
  paused: boolean;
  /** order of pausing, so equal sizes resume oldest-paused first */
  pausedSeq: number;
  marked: boolean;
  softDemotedUntilS: number;
}

/** How a waiting turn ranks, fixed when it may go (its arrival, or the tick that resumed its program). */
interface Admission {
  readonly sinceS: number;
  readonly jumpS: number;
}

/** ThunderAgent's state and rules; the SchedulingPolicy is a thin shell around it (see createThunderAgentPolicy). */
export class ThunderAgentScheduler {
  private readonly tracked = new Map<Program, Tracked>();
  private readonly admissions = new WeakMap<Request, Admission>();
  /** when a held turn began to wait (for the forced resume) */
  private readonly heldSinceS = new WeakMap<Request, number>();
  private readonly ticks: Ticks;
  private pauseCounter = 0;
  /** the pool in tokens (the scheduler's, once a hook told it) */
  private capacityTokens = 0;
  readonly counters = { pauses: 0, resumes: 0, forcedResumes: 0, marks: 0 };

  constructor(readonly options: ThunderAgentOptions = THUNDERAGENT_PAPER) {
    this.ticks = new Ticks(options.tickS);
  }

  /** the programs now paused */
  pausedPrograms(): Program[] {
    return [...this.tracked.values()].filter((t) => t.paused).map((t) => t.program);
  }

  isPaused(program: Program): boolean {
    return this.tracked.get(program)?.paused ?? false;
  }

  /** Runs the ticks due by nowS. */
  advance(nowS: number, ctx: PolicyContext): void {
    this.capacityTokens = ctx.kvCapacityTokens;
    this.ticks.catchUp(nowS, (atS) => this.tick(atS));
  }

  /** A turn arrived (first sight of the request). */
  arrived(request: Request, program: Program, nowS: number): void {
    let t = this.tracked.get(program);
    if (!t) {
      t = {
        program,
        request: null,
        steps: 0,
        acting: false,
        actingSinceS: nowS,
        tokens: 0,
        paused: false,
        pausedSeq: 0,
        marked: false,
        softDemotedUntilS: 0,
      };
      this.tracked.set(program, t);
    }
    t.steps++;
    t.request = request;
    t.acting = false;
    const isNew = t.steps === 1 && request.turnIndex === 0 && !request.continuesProgram;
    if (!t.paused && isNew && !this.admitsNew(t, nowS)) this.pause(t);
    if (t.paused) this.heldSinceS.set(request, nowS);
    else this.admissions.set(request, { sinceS: nowS, jumpS: this.demotionJumpS(t, nowS) });
  }

  /** The code's _select_backend_for_new_program: nothing paused, and c + buffer fits beside the active. */
  private admitsNew(t: Tracked, nowS: number): boolean {
    if (this.anyPaused()) return false;
    const used = this.demand(nowS, this.options.decay === "everywhere", t);
    return this.capacityTokens - used >= this.size(t) + this.options.bufferPerProgram;
  }

  /** May this waiting turn start? Resumes its program first if it has waited past the forced-resume time. */
  mayStart(request: Request, program: Program, nowS: number): boolean {
    const t = this.tracked.get(program);
    if (!t?.paused) return true;
    const since = this.heldSinceS.get(request);
    if (since !== undefined && nowS - since >= this.options.resumeTimeoutS) {
      this.counters.forcedResumes++;
      this.resume(t, nowS);
      return true;
    }
    return false;
  }

  /** Priority of a waiting turn: held turns after all others, in the order a tick would resume them. */
  rank(request: Request, program: Program, nowS: number): void {
    const p = request.priority;
    if (request.preempted) {
      p[0] = 0;
      p[1] = 0;
      p[2] = request.arrivalS;
      return;
    }
    const t = this.tracked.get(program);
    if (t && !this.mayStart(request, program, nowS)) {
      p[0] = 2;
      p[1] = t.steps <= 1 ? 1 : 0;
      p[2] = this.size(t);
      return;
    }
    const admission = this.admissions.get(request) ?? { sinceS: request.arrivalS, jumpS: 0 };
    p[0] = 1;
    p[1] = 0;
    p[2] = admission.sinceS - admission.jumpS;
  }

  /** When a held turn may next change rank: the next tick, or its forced resume. */
  nextChangeS(request: Request, program: Program): number {
    if (!this.tracked.get(program)?.paused) return Number.POSITIVE_INFINITY;
    const since = this.heldSinceS.get(request);
    const forcedS = since === undefined ? Number.POSITIVE_INFINITY : since + this.options.resumeTimeoutS;
    return Math.min(this.ticks.nextS, forcedS);
  }

  /** A non-last turn ended in a tool call: the program acts; marked, it is paused now. */
  turnEnded(request: Request, program: Program, nowS: number): void {
    const t = this.tracked.get(program);
    if (!t) return;
    t.acting = true;
    t.actingSinceS = nowS;
    t.tokens = request.numTokens;
    // A held turn that ran because nothing else did: its program is running again, not paused.
    if (t.paused) this.resume(t, nowS);
    if (t.marked) {
      t.marked = false;
      this.pause(t);
    }
  }

  ended(program: Program): void {
    this.tracked.delete(program);
  }

  /** One scheduler tick at atS: release idle programs, soft-demote (Dynamo), resume, then pause. */
  private tick(atS: number): void {
    const o = this.options;
    for (const t of this.tracked.values()) {
      this.reconcile(t, atS);
      const silentS = atS - t.actingSinceS;
      if (t.program.ended || (t.acting && !this.hasWaitingTurn(t) && silentS >= o.idleReleaseS)) {
        this.tracked.delete(t.program);
      }
    }
    const capacity = this.capacityTokens;
    if (capacity <= 0) return;
    if (o.softDemote) {
      const usage = this.demand(atS, false) / capacity;
      if (usage >= o.softDemote.threshold && usage < o.pauseThreshold) {
        for (const t of this.active()) if (!t.marked) t.softDemotedUntilS = atS + 1.5 * o.tickS;
      }
    }
    this.resumeFitting(atS, capacity);
    this.pauseUntilSafe(atS, capacity);
  }

  /** The code's _greedy_resume on one backend (BFD over one bin is the selection itself). */
  private resumeFitting(atS: number, capacity: number): void {
    const o = this.options;
    const paused = [...this.tracked.values()].filter((t) => t.paused);
    if (paused.length === 0) return;
    const ceiling = Math.max(0, o.pauseThreshold - o.resumeHysteresis);
    const room = Math.floor(capacity * ceiling) - this.demand(atS, o.decay !== "none");
    if (room <= o.bufferPerProgram) return;
    const group = (t: Tracked) => (t.steps <= 1 ? 1 : this.hasWaitingTurn(t) ? 0 : 2);
    paused.sort((a, b) => group(a) - group(b) || this.size(a) - this.size(b) || a.pausedSeq - b.pausedSeq);
    let cumulative = 0;
    for (const t of paused) {
      const required = this.size(t) + o.bufferPerProgram;
      if (cumulative + required > room) continue;
      cumulative += required;
      this.resume(t, atS);
    }
  }

  /**
   * Pause until the active programs fit: acting programs smallest first (S_pause), then reasoning ones,
   * smallest first, marked to pause when their turn ends; a marked program counts as freed (paper: free
   * Delta C) unless markAll (the code and Dynamo mark every reasoning program).
   */
  private pauseUntilSafe(atS: number, capacity: number): void {
    const o = this.options;
    const decayed = o.decay === "everywhere";
    let used = this.demand(atS, decayed);
    if (!o.markAll) {
      for (const t of this.active())
        if (t.marked) used -= this.contribution(t, atS, decayed) + o.bufferPerProgram;
    }
    if (used <= capacity * o.pauseThreshold) return;
    const target = capacity * Math.min(o.pauseTarget, o.pauseThreshold);
    const bySize = (a: Tracked, b: Tracked) => this.size(a) - this.size(b);
    for (const t of this.active()
      .filter((x) => x.acting && !x.marked)
      .sort(bySize)) {
      if (used <= target) return;
      used -= this.contribution(t, atS, decayed) + o.bufferPerProgram;
      this.pause(t);
    }
    if (used <= target) return;
    for (const t of this.active()
      .filter((x) => !x.acting && !x.marked)
      .sort(bySize)) {
      if (used <= target && !o.markAll) return;
      used -= this.contribution(t, atS, decayed) + o.bufferPerProgram;
      t.marked = true;
      this.counters.marks++;
    }
  }

  private pause(t: Tracked): void {
    if (t.paused) return;
    t.paused = true;
    t.pausedSeq = this.pauseCounter++;
    this.counters.pauses++;
    if (t.request && t.request.status === "waiting") this.heldSinceS.set(t.request, t.request.arrivalS);
  }

  private resume(t: Tracked, atS: number): void {
    if (!t.paused) return;
    t.paused = false;
    this.counters.resumes++;
    const request = t.request;
    if (request && request.status === "waiting") {
      this.admissions.set(request, {
        sinceS: atS,
        jumpS: this.options.resumeBoostS + this.demotionJumpS(t, atS),
      });
    }
  }

  /** A paused program whose turn runs anyway (no-stall admission) is active again; an aborted turn acts. */
  private reconcile(t: Tracked, atS: number): void {
    const request = t.request;
    if (!request) return;
    if (t.paused && request.status === "running") this.resume(t, atS);
    if (!t.acting && request.status === "aborted") {
      t.acting = true;
      t.actingSinceS = request.finishS ?? atS;
      t.tokens = request.numComputedTokens;
    }
  }

  private demotionJumpS(t: Tracked, nowS: number): number {
    const soft = this.options.softDemote;
    return soft && t.softDemotedUntilS > nowS ? soft.jumpS : 0;
  }

  private hasWaitingTurn(t: Tracked): boolean {
    return t.request !== null && t.request.status === "waiting";
  }

  private anyPaused(): boolean {
    for (const t of this.tracked.values()) if (t.paused) return true;
    return false;
  }

  private active(): Tracked[] {
    return [...this.tracked.values()].filter((t) => !t.paused && !t.program.ended);
  }

  /** c: a reasoning program's prompt plus output so far, an acting one's context when its turn ended. */
  private size(t: Tracked): number {
    return t.acting || !t.request ? t.tokens : t.request.numTokens;
  }

  /** What a program adds to the demand: c, or for an acting one c x weight, or decayed c x 2^(-t/tau). */
  private contribution(t: Tracked, atS: number, decayed: boolean): number {
    if (!t.acting) return this.size(t);
    if (!decayed) return this.size(t) * this.options.actingWeight;
    const idleS = Math.max(0, atS - t.actingSinceS);
    return this.size(t) * 2 ** -(idleS / Math.max(this.options.decayHalfLifeS, 1e-3));
  }

  /** Tokens the active programs account for (eq. 6, or eq. 7 decayed), a buffer each; `except` left out. */
  private demand(atS: number, decayed: boolean, except: Tracked | null = null): number {
    let used = 0;
    for (const t of this.tracked.values()) {
      if (t.paused || t === except || t.program.ended) continue;
      used += Math.floor(this.contribution(t, atS, decayed)) + this.options.bufferPerProgram;
    }
    return used;
  }
}

export function createThunderAgentPolicy(
  options: ThunderAgentOptions = THUNDERAGENT_PAPER,
  name = "thunderagent",
  description = DESCRIPTION,
): SchedulingPolicy & { readonly thunder: ThunderAgentScheduler } {
  const thunder = new ThunderAgentScheduler(options);
  const seen = new WeakSet<Request>();
  return {
    name,
    description,
    thunder,
    needsOffload: false,
    toolParser: "paper",
    dynamicPriorities: true,
    prioritize(request, program, ctx) {
      const nowS = nowOf(ctx, request);
      thunder.advance(nowS, ctx);
      if (!seen.has(request)) {
        seen.add(request);
        thunder.arrived(request, program, nowS);
      }
      thunder.rank(request, program, nowS);
    },
    nextPriorityChangeS: (request, program) => thunder.nextChangeS(request, program),
    admitsTurn(request, program, ctx) {
      thunder.advance(ctx.nowS, ctx);
      return thunder.mayStart(request, program, ctx.nowS);
    },
    retain(request, program, _tool, ctx) {
      thunder.advance(ctx.nowS, ctx);
      thunder.turnEnded(request, program, ctx.nowS);
      return FREE;
    },
    pinVictimRank: latestProgramFirst,
    onProgramEnded: (program) => thunder.ended(program),
  };
}
