import type { PolicyContext, SchedulingPolicy } from "../core/policy.js";
import type { Program } from "../core/program.js";
import type { Request } from "../core/request.js";
import { FREE } from "../core/retention.js";
import { CongestionHeadroom } from "./congestion-headroom.js";
import { prefillReloadS } from "./context-cost.js";
import { latestProgramFirst, pinnedThenProgramFcfs, programFcfs } from "./priorities.js";

/**
 * cachettl-adaptive: CacheTTL (program-level FCFS, pins sacrificed before anything else under memory
 * pressure; a pinned program's turn waits in program order, not first as in the paper, since here a waiting
 * turn's pin never runs out; a pin lasts the cost model's eq. 2 TTL where an expired pin's KV would be
 * reloaded from an offload tier, and the tool's 90th-percentile duration where it would be recomputed, which
 * leave-one-workload-out chose: docs/simulator.md) plus working-set admission, and two rules for who waits
 * when memory runs short: a later program waits rather than take an earlier program's pin while other
 * turns run, and a turn starts once its whole prompt fits, so it never runs out of memory halfway through
 * its prefill and preempts another (each would otherwise cost somebody a recompute of a whole context).
 *
 * A new program's first turn starts only while the programs already started (and not ended) fit the KV
 * pool at the memory they are expected to hold over the rest of their lives. Agent contexts grow every
 * turn: a pool filled by programs' early turns runs out later, and then pins are sacrificed, running
 * requests preempted and whole contexts re-prefilled, so every program slows down together and throughput
 * falls past the load cliff. A program at context c is counted at
 *   held share x (c + E[F | F >= c]) / 2:
 * (c + E[F | F >= c]) / 2 is its mean footprint over the rest of its life if it grows linearly to the mean
 * final context of finished programs that got at least as far (F: a finished program's final context);
 * the held share is the fraction of finished programs' lifetimes during which their KV was held (a turn
 * in flight or a pin): a program off in a long tool call without a pin needs no memory meanwhile. A
 * program between turns also counts only with the share of such programs whose next turn came back here
 * (ReturnShare).
 * The working set must fit the KV pool even with an offload tier behind it: KV spilled there comes back by
 * a reload, not a recompute, but programs whose contexts the pool cannot hold at once take each other's
 * memory (pins given up, turns preempted, contexts reloaded) and every step carries fewer of them.
 *
 * The ablation variants (`cachettl-adaptive:...` in the registry) change one choice each.
 */
export interface AdaptiveOptions {
  /**
   * how admission sizes a program at context c: its mean remaining footprint (c + E[F|F>=c]) / 2, its
   * expected final context E[F|F>=c], its current context c, or no admission control
   */
  readonly admission: "lifetime-mean" | "expected-final" | "current" | "off";
  /**
   * which started programs count: every one that has not ended, weighted by the held share; every one,
   * unweighted; or only those whose KV is held right now
   */
  readonly counts: "duty-weighted" | "every-active" | "holding-memory";
  /**
   * pin for CacheTTL's cost-model TTL (eq. 2), until the tool's 90th-percentile duration, or until the
   * longest tool call seen (a pin then ends when its program returns or when memory is needed: pins are
   * sacrificed before anything else, so holding one costs nothing while nobody waits for memory), or never;
   * or the p90 where an expired pin's KV is recomputed (no offload tier) and eq. 2 where it is reloaded
   */
  readonly ttl: "cachettl" | "tool-p90" | "p90-where-recomputed" | "until-pressure" | "none";
  /**
   * waiting turns by their program's arrival (program-level FCFS), with bounded overtaking: a turn
   * ranks at max(program arrival, its own arrival - the longest tool call seen), so a returning turn goes
   * ahead only of turns that arrived less than that long before it, or by their own arrival (vLLM's FCFS)
   */
  readonly order: "program-fcfs" | "bounded-overtaking" | "request-fcfs";
  /**
   * pinned programs' turns in the order above with the others, or first (the paper's tuple). The paper puts
   * them first so that a pin does not run out while its turn waits; here a waiting turn's pin never runs out
   * (PinBook), so first would only let a younger program's turn start before an older one's
   */
  readonly pinned: "in-order" | "first";
  /**
   * which pins a turn short of memory may give up while other turns run: only later programs' (a later
   * program waits for memory rather than make an earlier one recompute its context), or any (the paper)
   */
  readonly sacrifice: "later-programs" | "any";
  /** a waiting turn starts once its whole prompt fits beside the running turns, or its first chunk (vLLM) */
  readonly room: "whole-prompt" | "first-chunk";
  /**
   * how the new program itself counts: at its prompt (its own later growth is its own to wait for: under
   * the memory rules a later program's turns wait for memory and its pins go first), or at its forecast
   * footprint like the programs already started
   */
  readonly newcomer: "forecast" | "prompt";
  /** how long admission may hold a new program: until the working set fits, or at most the longest tool call seen */
  readonly hold: "until-fits" | "longest-tool";
  /**
   * how an offload tier enters admission: not at all (the pool alone); as memory beside the KV pool (the
   * working set may fill both); or as where growth overflows: programs must fit the pool at their current
   * context plus their expected growth priced at what overflowing costs, a reload from the tier over a
   * recompute (the cost model's reloadS / prefillS of the context: about 0 on a fast tier, 1 without one)
   */
  readonly tier: "pool-only" | "counts" | "overflow";
  /**
   * how much memory admission may fill: the forecast working set up to the memory, or up to a factor of it
   * learned by CONCUR's congestion control from what returning turns had to recompute or reload
   * (congestion-headroom.ts)
   */
  readonly headroom: "forecast" | "congestion";
}

/**
 * The true future of each program, which only a simulator replaying a trace knows. Given one, admission
 * counts programs at what they will really hold and waiting turns go in order of the work their programs
 * have left (shortest remaining first): a bound on what any forecast of program growth or length could buy.
 */
export interface Clairvoyance {
  /** mean context of the program's turns from its current one to its last; null: not a known program */
  meanRemainingContext(program: Program): number | null;
  /** tokens still to compute for the program: uncached prompt plus output of its current and later turns */
  remainingWork(program: Program): number | null;
}

export const ADAPTIVE_DEFAULTS: AdaptiveOptions = {
  admission: "lifetime-mean",
  counts: "duty-weighted",
  ttl: "p90-where-recomputed",
  order: "program-fcfs",
  pinned: "in-order",
  sacrifice: "later-programs",
  room: "whole-prompt",
  newcomer: "prompt",
  hold: "until-fits",
  tier: "pool-only",
  headroom: "forecast",
};

/** Finished programs remembered for E[F | F >= c]; older ones are forgotten first. */
const FINAL_CONTEXT_WINDOW = 4096;
/** Below this many finished programs the growth estimate is not trusted: programs count as they are. */
const MIN_FINISHED_PROGRAMS = 10;
const PIN_QUANTILE = 0.9;
/** a tool's own distribution is used once it has this many samples (CacheTTL's per-tool threshold uses K) */
const MIN_TOOL_SAMPLES = 20;

/** Final context sizes of finished programs: a sorted window with prefix sums for conditional means. */
export class FinalContexts {
  private readonly arrival: number[] = [];
  private sorted: number[] = [];
  private prefix: Float64Array | null = null;

  get size(): number {
    return this.arrival.length;
  }

  add(tokens: number): void {
    this.arrival.push(tokens);
    insertSorted(this.sorted, tokens);
    if (this.arrival.length > FINAL_CONTEXT_WINDOW) {
      const oldest = this.arrival.shift() as number;
      this.sorted.splice(lowerBound(this.sorted, oldest), 1);
    }
    this.prefix = null;
  }

  /** E[F | F >= c]; c itself when no finished program got that far. */
  expectedFinal(c: number): number {
    const n = this.sorted.length;
    const from = lowerBound(this.sorted, c);
    if (from >= n) return c;
    if (!this.prefix) {
      this.prefix = new Float64Array(n + 1);
      for (let i = 0; i < n; i++)
        this.prefix[i + 1] = (this.prefix[i] as number) + (this.sorted[i] as number);
    }
    return ((this.prefix[n] as number) - (this.prefix[from] as number)) / (n - from);
  }
}

function lowerBound(xs: readonly number[], x: number): number {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((xs[mid] as number) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function insertSorted(xs: number[], x: number): void {
  xs.splice(lowerBound(xs, x), 0, x);
}

/** A program that started a turn and has not ended: it will come back for its context. */
function isActive(program: Program): boolean {
  return !program.ended && (program.numRunning > 0 || program.numFinished > 0);
}

/** An active program that holds or is about to claim KV: a turn in flight, or a pin kept for its next turn. */
function holdsMemory(program: Program): boolean {
  return isActive(program) && (program.numRunning > 0 || program.numWaiting > 0 || program.pin !== null);
}

function hasTurnInFlight(program: Program): boolean {
  return program.numRunning > 0 || program.numWaiting > 0;
}

/**
 * An active program that holds no KV counts only until the longest tool call seen (this quantile of the
 * tool durations) has passed since its last turn. A program gone longer most likely goes on elsewhere
 * (another replica behind a balancer that does not keep programs together) or was abandoned without a
 * last step (most clients never send one); counted forever, such programs would hold every new one back.
 */
const RETURN_QUANTILE = 0.99;

/** The longest tool call seen (this quantile of the tool durations); null before any. */
function longestToolS(ctx: PolicyContext): number | null {
  return ctx.ttl.tools.global.quantile(RETURN_QUANTILE) ?? null;
}

function returnWithinS(ctx: PolicyContext): number {
  return longestToolS(ctx) ?? Number.POSITIVE_INFINITY;
}

function expectedBack(program: Program, nowS: number, returnWithinS: number): boolean {
  if (holdsMemory(program)) return true;
  return isActive(program) && (program.lastFinishS === null || nowS - program.lastFinishS <= returnWithinS);
}

/** Returns observed (came back, or the longest tool call passed without them) before the share is trusted. */
const MIN_RETURN_SAMPLES = 20;

/**
 * Of the programs whose turn ended here in a tool call, the share whose next turn came here: by the
 * turn count its chat history carries when known (a later turn means the next went elsewhere), else
 * (raw-text prompts, condensed histories) a turn within the longest tool call seen. Programs not back
 * by then went elsewhere or were abandoned. A program between turns is counted in the working set with
 * this probability; one with a turn in flight counts in full. About 0.99 on one replica (only tool calls
 * longer than the longest seen so far miss); behind a balancer that ignores programs, about the share of
 * turns it sends to this replica.
 */
class ReturnShare {
  /** when each awaited program's turn ended here, and which turn would be its next (null: not known) */
  private readonly awaiting = new Map<Program, { sinceS: number; nextTurn: number | null }>();
  private returned = 0;
  private lost = 0;

  turnEnded(request: Request, program: Program, nowS: number): void {
    const nextTurn = request.priorTurns === null ? null : request.priorTurns + 1;
    this.awaiting.set(program, { sinceS: nowS, nextTurn });
  }

  turnArrived(request: Request, program: Program, nowS: number, returnWithinS: number): void {
    const awaited = this.awaiting.get(program);
    if (awaited === undefined) return;
    this.awaiting.delete(program);
    // A history with more turns than its next one: the next went elsewhere. Fewer: the client condensed
    // its history, and only the time tells.
    const next = awaited.nextTurn;
    const turns = request.priorTurns;
    const wentElsewhere = next !== null && turns !== null && turns > next;
    const cameNext = next !== null && turns === next;
    if (!wentElsewhere && (cameNext || nowS - awaited.sinceS <= returnWithinS)) this.returned++;
    else this.lost++;
  }

  programEnded(program: Program): void {
    this.awaiting.delete(program);
  }

  /** Awaited programs not back within `returnWithinS` went elsewhere or were abandoned. */
  expire(nowS: number, returnWithinS: number): void {
    for (const [program, { sinceS }] of this.awaiting) {
      if (nowS - sinceS <= returnWithinS) continue;
      this.awaiting.delete(program);
      this.lost++;
    }
  }

  get share(): number {
    const seen = this.returned + this.lost;
    return seen >= MIN_RETURN_SAMPLES ? this.returned / seen : 1;
  }
}

/** The block hashes of a finished turn's prompt and output (the full blocks of them). */
function blockHashesOf(request: Request, blockSizeTokens: number): Float64Array {
  const hashes = new Float64Array(Math.floor(request.numComputedTokens / blockSizeTokens));
  let blocks = 0;
  try {
    for (; blocks < hashes.length; blocks++) hashes[blocks] = request.content.blockHash(blocks);
  } catch {
    // content holding fewer tokens than the scheduler counted (an executor that dropped a sample): the blocks it has
    return hashes.subarray(0, blocks);
  }
  return hashes;
}

/**
 * The leading prompt tokens of a turn its program's previous turn left (equal chained block hashes), in whole
 * blocks: an agent that edits its history (elided tool outputs) reuses only the prefix before the edit.
 */
function reusablePrefixTokens(
  request: Request,
  previous: Float64Array | null,
  blockSizeTokens: number,
): number {
  if (previous === null) return 0;
  const limit = Math.min(previous.length, Math.floor(request.promptTokens / blockSizeTokens));
  let blocks = 0;
  while (blocks < limit && request.content.blockHash(blocks) === previous[blocks]) blocks++;
  return blocks * blockSizeTokens;
}

/**
 * `p90-where-recomputed`: a pin for the tool's p90 duration where KV whose pin expires is recomputed (no
 * offload tier), CacheTTL's eq. 2 where it is reloaded from a tier (docs/simulator.md, "At the issue's
 * programs, one seed").
 */
function effectiveTtl(
  ttl: Exclude<AdaptiveOptions["ttl"], "none">,
  ctx: PolicyContext,
): "cachettl" | "tool-p90" | "until-pressure" {
  if (ttl !== "p90-where-recomputed") return ttl;
  return ctx.offloadTier === null ? "tool-p90" : "cachettl";
}

/** A reload of `tokens` from the offload tier over their recompute, at most 1 (1 without a tier). */
function reloadOverRecompute(tokens: number, ctx: PolicyContext): number {
  if (ctx.offloadTier === null || tokens <= 0) return 1;
  return Math.min(1, ctx.costs.reloadS(tokens, ctx.offloadTier) / ctx.costs.prefillS(tokens));
}

const DESCRIPTION =
  "ours: CacheTTL with pinned programs' turns in program order, pins for the tool's p90 where expiry means a recompute (no offload tier) + a new program starts only while the started programs fit at the memory they are expected to hold; a later program waits for memory instead of taking an earlier one's pin; a turn starts once its whole prompt fits";

export function createCacheTtlAdaptivePolicy(
  options: AdaptiveOptions = ADAPTIVE_DEFAULTS,
  name = "cachettl-adaptive",
  description = DESCRIPTION,
  clairvoyance: Clairvoyance | null = null,
): SchedulingPolicy {
  const finals = new FinalContexts();
  const returns = new ReturnShare();
  const congestion = options.headroom === "congestion" ? new CongestionHeadroom() : null;
  /** the block hashes of each program's latest finished turn: what its next prompt could find cached */
  const leftBlocks = new WeakMap<Program, Float64Array>();
  // Share of finished programs' lifetimes during which their KV was held (a turn in flight or a pin).
  let heldS = 0;
  let lifetimeS = 0;
  const heldShare = () => (finals.size >= MIN_FINISHED_PROGRAMS && lifetimeS > 0 ? heldS / lifetimeS : 1);
  const footprint = (program: Program, tokens: number, ctx: PolicyContext) => {
    const known = clairvoyance?.meanRemainingContext(program);
    if (known !== undefined && known !== null) return known;
    if (options.admission === "current" || finals.size < MIN_FINISHED_PROGRAMS) return tokens;
    const final = finals.expectedFinal(tokens);
    const forecast = options.admission === "expected-final" ? final : (tokens + final) / 2;
    return tokens + overflowPrice(tokens, ctx) * (forecast - tokens);
  };
  const observeTurn = (c: CongestionHeadroom, request: Request, program: Program, ctx: PolicyContext) => {
    c.advance(ctx.nowS);
    const reusable = reusablePrefixTokens(request, leftBlocks.get(program) ?? null, ctx.blockSizeTokens);
    leftBlocks.set(program, blockHashesOf(request, ctx.blockSizeTokens));
    if (reusable <= 0) return;
    const reused = request.cachedTokens ?? 0;
    const recomputed = Math.max(0, reusable - reused);
    const reloaded = Math.min(request.cachedReloadTokens, reusable);
    c.observeTurn(reusable, recomputed + reloaded * reloadOverRecompute(reusable, ctx));
  };
  /** What growth past the pool costs, relative to recomputing it: 1 unless it overflows into a tier. */
  const overflowPrice = (tokens: number, ctx: PolicyContext) => {
    if (options.tier !== "overflow" || ctx.offloadTier === null || tokens <= 0) return 1;
    return reloadOverRecompute(tokens, ctx);
  };

  const toolP90S = (tool: string, ctx: PolicyContext): number | null => {
    const own = ctx.ttl.tools.forTool(tool);
    const durations = own && own.size >= MIN_TOOL_SAMPLES ? own : ctx.ttl.tools.global;
    return durations.quantile(PIN_QUANTILE) ?? null;
  };

  /**
   * A turn that ends while subagents it spawned run waits on them: the pin is priced from their expected
   * remaining time, the tool's durations given how long the youngest of them has run (the parent waits for
   * the last): eq. 2 over what is left (`cachettl`) or the p90 of it (the other rules). Null when none runs, or
   * when the TTL model has no durations yet (its cold-start default stands).
   */
  const subagentsTtlS = (
    program: Program,
    tool: string,
    benefitS: number,
    ttl: ReturnType<typeof effectiveTtl>,
    ctx: PolicyContext,
  ) => {
    const children = ctx.liveSubagents(program);
    if (children.length === 0 || ctx.ttl.tools.totalRecorded === 0) return null;
    const own = ctx.ttl.tools.forTool(tool);
    const durations = own && own.size >= MIN_TOOL_SAMPLES ? own : ctx.ttl.tools.global;
    const youngest = Math.max(...children.map((c) => c.firstArrivalS));
    const elapsedS = Math.max(0, ctx.nowS - youngest);
    if (ttl === "cachettl") return durations.bestRemainingTtlS(elapsedS, benefitS);
    const seen = durations.cdf(elapsedS);
    const p90 = durations.quantile(seen + PIN_QUANTILE * (1 - seen)) as number;
    // running longer than every duration seen: the tool's own p90, as if it had just started
    return p90 > elapsedS ? p90 - elapsedS : (durations.quantile(PIN_QUANTILE) as number);
  };

  const policy: SchedulingPolicy = {
    name,
    description,
    needsOffload: false,
    toolParser: "paper",
    dynamicPriorities: false,
    prioritize(request, program, ctx) {
      if (request.numAdmissions === 0 && !request.preempted) {
        returns.turnArrived(request, program, ctx.nowS, returnWithinS(ctx));
      }
      if (options.pinned === "first") pinnedThenProgramFcfs(request, program);
      else programFcfs(request, program);
      const boundS = options.order === "bounded-overtaking" ? longestToolS(ctx) : null;
      if (boundS !== null) request.priority[2] = Math.max(program.firstArrivalS, request.arrivalS - boundS);
      if (options.order === "request-fcfs") request.priority[2] = request.arrivalS;
      const workLeft = clairvoyance?.remainingWork(program);
      if (workLeft !== undefined && workLeft !== null) request.priority[2] = workLeft;
    },
    retain(request, program, tool, ctx) {
      returns.turnEnded(request, program, ctx.nowS);
      if (congestion) observeTurn(congestion, request, program, ctx);
      if (options.ttl === "none") return FREE;
      const ttl = effectiveTtl(options.ttl, ctx);
      const paper = ctx.ttl.decide({ tool, prefillReloadS: prefillReloadS(request.numComputedTokens, ctx) });
      // the paper's rule needs its durations: not before its cold start is over
      const waitingOnSubagents =
        ttl === "cachettl" && paper.source === "default"
          ? null
          : subagentsTtlS(program, tool, paper.benefitS, ttl, ctx);
      if (ttl === "cachettl") {
        const pinS = waitingOnSubagents ?? paper.ttlS;
        return pinS > 0 ? { kind: "pin", ttlS: pinS } : FREE;
      }
      const ttlS =
        (ttl === "until-pressure" ? longestToolS(ctx) : (waitingOnSubagents ?? toolP90S(tool, ctx))) ??
        paper.ttlS;
      return ttlS > 0 ? { kind: "pin", ttlS } : FREE;
    },
    pinVictimRank: latestProgramFirst,
    pinSacrifice: options.sacrifice === "later-programs" ? "ranked-after" : "any",
    admitsWholePrompts: options.room === "whole-prompt",
    onProgramEnded(program) {
      returns.programEnded(program);
      finals.add(program.contextTokens);
      const lifeS = (program.lastFinishS ?? program.firstArrivalS) - program.firstArrivalS;
      lifetimeS += lifeS;
      heldS += Math.max(0, lifeS - program.unheldS);
    },
  };
  if (options.admission !== "off") {
    policy.admitsNewProgram = (request: Request, program: Program, ctx: PolicyContext) => {
      const weight = options.counts === "duty-weighted" ? heldShare() : 1;
      const withinS = returnWithinS(ctx);
      if (options.hold === "longest-tool" && ctx.nowS - request.arrivalS >= withinS) return true;
      const counted =
        options.counts === "holding-memory"
          ? holdsMemory
          : (other: Program) => expectedBack(other, ctx.nowS, withinS);
      // KV pushed out to a tier comes back by a reload, not a recompute: it counts as memory, or (overflow)
      // prices the growth admission reserves.
      const tierTokens = options.tier === "counts" ? ctx.offloadCapacityTokens : 0;
      const memory = (ctx.kvCapacityTokens + tierTokens) / weight;
      congestion?.advance(ctx.nowS);
      const capacity = memory * (congestion?.factor ?? 1);
      returns.expire(ctx.nowS, withinS);
      const returnShare = returns.share;
      let workingSet =
        options.newcomer === "prompt" ? request.promptTokens : footprint(program, request.promptTokens, ctx);
      let programsCounted = 1;
      let heldTokens = ctx.runningKvTokens;
      for (const other of ctx.programs()) {
        heldTokens += other.pin?.tokens ?? 0;
        if (other !== program && counted(other)) {
          workingSet +=
            footprint(other, other.contextTokens, ctx) * (hasTurnInFlight(other) ? 1 : returnShare);
          programsCounted++;
        }
        // the congestion controller reads the whole working set; without it, the first excess decides
        if (workingSet > capacity && !congestion) return false;
      }
      const admitted = workingSet <= capacity;
      congestion?.observeUsage(heldTokens / ctx.kvCapacityTokens);
      congestion?.observeAdmission(workingSet / memory, workingSet / programsCounted / memory, admitted);
      return admitted;
    };
  }
  return policy;
}
