/**
 * The gateway's executor of the step loop: a plan's admitted turns are forwarded to the backend (the backend's
 * own batching runs them), and a step ends when the backend has moved: each running turn's chunk is carried
 * only for tokens the backend has streamed (the prompt's chunk with its first token, then one token a step),
 * the others are held (StepResult.held) until theirs come. A turn whose answer ended reports its stop with the
 * step that counts its last token, so the scheduler's model of the backend's KV grows as the backend's did.
 */
import type { Clock } from "../core/clock.js";
import type { Executor } from "../core/step-loop.js";
import type { KvChanges, SampledToken, StepPlan, StepResult } from "../core/step-plan.js";

/** How far a forwarded turn has got, as its answer passes through. */
export class TurnProgress {
  /** output tokens the backend has sent so far */
  received = 0;
  /** of them, those the scheduler has counted */
  consumed = 0;
  ended = false;
  /** output tokens of the whole answer (its usage), once ended */
  total = 0;
  /** the answer was cut or refused: the scheduler ends the turn as aborted */
  failed = false;
  /** the tool the answer calls, as its structured calls name it (null: none), once ended */
  tool: string | null = null;

  /** tokens the scheduler may count now */
  get available(): number {
    return this.ended ? this.total : this.received;
  }
}

export interface ExecutorEntry {
  readonly progress: TurnProgress;
  forwarded: boolean;
}

export interface GatewayExecutorDeps {
  readonly clock: Clock;
  readonly entries: ReadonlyMap<string, ExecutorEntry>;
  /** sends an admitted turn to the backend (not awaited: its answer reaches `progress`) */
  forward(requestId: string): void;
  /** the loop's inbox has something (arrivals, aborts): the step ends so that they are delivered */
  hasPosts(): boolean;
  /** when the scheduler next has something to do by the clock alone (a pin expiring); null: nothing */
  nextWakeS(): number | null;
  /** KV ownership changes of the scheduler, for the backend's retention */
  applyKvChanges(changes: KvChanges): void;
  /** each step, once the backend moved (keep-alives due, slots freed) */
  afterStep?(): void;
}

/** A step waits at most this long for the backend before the scheduler looks again (its timed policies tick). */
const MAX_WAIT_S = 0.25;

export class GatewayExecutor implements Executor<Promise<StepResult>> {
  private wakeUp: (() => void) | null = null;

  constructor(private readonly deps: GatewayExecutorDeps) {}

  /** Something moved (a token, an answer's end, an arrival): a waiting step looks again. */
  notify(): void {
    this.wakeUp?.();
  }

  async execute(plan: StepPlan): Promise<StepResult> {
    const startS = this.deps.clock.nowS();
    // pins the plan's scheduling expired, sacrificed or gave back to their returning turns
    this.deps.applyKvChanges(plan);
    for (const request of plan.admitted) {
      const entry = this.deps.entries.get(request.id);
      if (entry && !entry.forwarded) {
        entry.forwarded = true;
        this.deps.forward(request.id);
      }
    }
    let result = this.collect(plan);
    if (result.carried === 0 && !this.deps.hasPosts()) {
      await this.wait();
      result = this.collect(plan);
    }
    this.deps.afterStep?.();
    return {
      durationS: this.deps.clock.nowS() - startS,
      sampled: result.sampled,
      held: result.held,
      failed: result.failed,
    };
  }

  applyKvChanges(changes: KvChanges): void {
    this.deps.applyKvChanges(changes);
  }

  private collect(plan: StepPlan): {
    carried: number;
    sampled: Map<string, SampledToken>;
    held: Set<string>;
    failed: Set<string>;
  } {
    const sampled = new Map<string, SampledToken>();
    const held = new Set<string>();
    const failed = new Set<string>();
    let carried = 0;
    for (const chunk of plan.chunks) {
      const id = chunk.request.id;
      const progress = this.deps.entries.get(id)?.progress;
      if (progress === undefined || progress.failed) {
        failed.add(id);
        carried++;
        continue;
      }
      if (!chunk.samples) {
        if (progress.received > 0 || progress.ended) carried++;
        else held.add(id);
        continue;
      }
      if (progress.ended && progress.consumed >= progress.available) {
        // the answer is over and every token counted (a turn the scheduler counts on past its end)
        sampled.set(id, { stop: true, tool: progress.tool });
        carried++;
        continue;
      }
      if (progress.consumed >= progress.available) {
        held.add(id);
        continue;
      }
      progress.consumed++;
      carried++;
      const stop = progress.ended && progress.consumed >= progress.available;
      sampled.set(id, stop ? { stop, tool: progress.tool } : { stop });
    }
    return { carried, sampled, held, failed };
  }

  private wait(): Promise<void> {
    const nowS = this.deps.clock.nowS();
    const wakeS = this.deps.nextWakeS();
    const untilS = Math.min(nowS + MAX_WAIT_S, wakeS ?? Number.POSITIVE_INFINITY);
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.wakeUp?.(), Math.max(0, (untilS - nowS) * 1000));
      this.wakeUp = () => {
        clearTimeout(timer);
        this.wakeUp = null;
        resolve();
      };
    });
  }
}
