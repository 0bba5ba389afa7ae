import type { Clock } from "./clock.js";
import type { Request } from "./request.js";
import type { Scheduler } from "./scheduler.js";
import type { KvChanges, StepPlan, StepResult } from "./step-plan.js";

/**
 * Carries out one step plan: the simulator prices it with a latency model, the engine runs it on
 * llama.cpp. Synchronous executors keep the simulator's loop free of Promises (millions of steps).
 */
export interface Executor<R extends StepResult | Promise<StepResult> = StepResult | Promise<StepResult>> {
  execute(plan: StepPlan): R;
  /**
   * KV ownership changes made between plans: finished turns pinned or released by update(), pins expired
   * while idle. Executors that map blocks onto their own memory follow them; plans carry the rest.
   */
  applyKvChanges?(changes: KvChanges): void;
}

/**
 * Where the loop's outside world lives: requests that arrive or are aborted (a trace's events, or HTTP
 * handlers that call the scheduler directly and wake the loop), and how the loop lets time pass.
 */
export interface LoopEnvironment<W extends boolean | Promise<boolean> = boolean | Promise<boolean>> {
  /** Hands every event due at `nowS` (arrivals, aborts) to the scheduler. */
  deliverDue(nowS: number): void;
  /** Time of the next known event; null when none is scheduled (a server learns of arrivals by a wake). */
  nextEventS(): number | null;
  /** True when the loop must end now, even with work left (a simulation's horizon, a server's shutdown). */
  isOver(nowS: number, idle: boolean): boolean;
  /**
   * Lets time pass until `untilS` (null: until something happens; a simulation then has nothing left).
   * Returns false when the loop should end instead.
   */
  waitUntil(untilS: number | null): W;
}

/** What the loop does next. */
export type LoopAction =
  | { readonly kind: "step"; readonly plan: StepPlan }
  | { readonly kind: "wait"; readonly untilS: number | null }
  | { readonly kind: "stop" };

export interface StepLoopHooks {
  /** after each executed step (metrics sampling, invariant checks, bookkeeping of admitted requests) */
  onStep?(plan: StepPlan, result: StepResult): void;
  /** requests that finished (stop, length, kv_capacity) in a step or inside schedule() */
  onFinished?(finished: readonly Request[]): void;
  /**
   * Waiting work, nothing running, no plan: the state a deadlock-free policy never reaches. The simulator
   * throws; a server retries after this many seconds (default: throw StepLoopStalledError).
   */
  readonly stallRetryS?: number;
}

/** A scheduler that has waiting work, nothing running, and nothing to wait for: the bug CacheTTL must avoid. */
export class StepLoopStalledError extends Error {
  constructor(nowS: number, waiting: number) {
    super(`scheduler stalled at t=${nowS.toFixed(3)} s with ${waiting} waiting requests and nothing running`);
    this.name = "StepLoopStalledError";
  }
}

export interface StepLoopCounters {
  /** plans handed to the executor */
  steps: number;
  /** waits (the loop went idle), and how many of them ended to expire a pin */
  waits: number;
  pinExpiryWakes: number;
  /** plans with nothing to run that the loop retried (servers only) */
  stalls: number;
}

/**
 * The one step loop both executors run: deliver due events, schedule, execute, update; when idle, wait
 * for the next event or the next finite pin expiry (a pin without a TTL never wakes the loop). Runners:
 * runStepLoop (synchronous executor and environment) and runStepLoopAsync.
 */
export class StepLoop<X extends Executor = Executor, E extends LoopEnvironment = LoopEnvironment> {
  readonly counters: StepLoopCounters = { steps: 0, waits: 0, pinExpiryWakes: 0, stalls: 0 };

  constructor(
    readonly scheduler: Scheduler,
    private readonly clock: Clock,
    readonly env: E,
    readonly executor: X,
    private readonly hooks: StepLoopHooks = {},
  ) {}

  /** Decides the next action; idle pin expiries and plans with nothing to run are handled here. */
  next(): LoopAction {
    const scheduler = this.scheduler;
    for (;;) {
      const nowS = this.clock.nowS();
      this.env.deliverDue(nowS);
      const idle = !scheduler.hasUnfinishedRequests();
      if (this.env.isOver(nowS, idle)) return { kind: "stop" };
      if (idle) {
        const expiryS = finiteOrNull(scheduler.nextPinExpiryS());
        if (expiryS !== null && expiryS <= nowS) {
          scheduler.expireDuePins();
          continue;
        }
        // changes made while no plan was built (expired pins, aborts, ended programs) reach the executor
        this.executor.applyKvChanges?.(scheduler.takeKvChanges());
        const eventS = this.env.nextEventS();
        this.counters.waits++;
        if (expiryS !== null && (eventS === null || expiryS <= eventS)) this.counters.pinExpiryWakes++;
        return { kind: "wait", untilS: minOrNull(eventS, expiryS) };
      }
      const plan = scheduler.schedule();
      if (plan.chunks.length > 0) return { kind: "step", plan };
      // Nothing to execute, but schedule() may have ended requests itself (a sequence that outgrew the
      // pool): update() reports them, and their programs go on. The plan's KV changes still reach the executor.
      this.executor.applyKvChanges?.(plan);
      const { finished, kvChanges } = scheduler.update(plan, { durationS: 0 });
      this.executor.applyKvChanges?.(kvChanges);
      if (finished.length > 0) {
        this.hooks.onFinished?.(finished);
        continue;
      }
      // Everything running was just preempted: the next plan admits again.
      if (plan.preempted.length > 0) continue;
      if (this.hooks.stallRetryS === undefined) throw new StepLoopStalledError(nowS, scheduler.numWaiting);
      this.counters.stalls++;
      return { kind: "wait", untilS: nowS + this.hooks.stallRetryS };
    }
  }

  /** Applies an executed plan's result. */
  complete(plan: StepPlan, result: StepResult): void {
    const { finished, kvChanges } = this.scheduler.update(plan, result);
    this.executor.applyKvChanges?.(kvChanges);
    this.counters.steps++;
    this.hooks.onStep?.(plan, result);
    if (finished.length > 0) this.hooks.onFinished?.(finished);
  }
}

/** Runs the loop to its end with a synchronous executor and environment (the simulator). */
export function runStepLoop(loop: StepLoop<Executor<StepResult>, LoopEnvironment<boolean>>): void {
  for (;;) {
    const action = loop.next();
    if (action.kind === "stop") return;
    if (action.kind === "wait") {
      if (!loop.env.waitUntil(action.untilS)) return;
      continue;
    }
    loop.complete(action.plan, loop.executor.execute(action.plan));
  }
}

/** Runs the loop to its end with an asynchronous executor or environment (the engine). */
export async function runStepLoopAsync(loop: StepLoop, afterStep?: () => Promise<void>): Promise<void> {
  for (;;) {
    const action = loop.next();
    if (action.kind === "stop") return;
    if (action.kind === "wait") {
      if (!(await loop.env.waitUntil(action.untilS))) return;
      continue;
    }
    loop.complete(action.plan, await loop.executor.execute(action.plan));
    await afterStep?.();
  }
}

function finiteOrNull(timeS: number | null): number | null {
  return timeS !== null && Number.isFinite(timeS) ? timeS : null;
}

function minOrNull(a: number | null, b: number | null): number | null {
  if (a === null) return b;
  if (b === null) return a;
  return Math.min(a, b);
}
