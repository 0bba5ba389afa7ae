/**
 * `simulate --gateway`: a policy run in a gateway in front of an engine it does not own. Two schedulers share
 * the virtual clock: the gateway's (the policy, over a model of the engine's KV: running turns and its pins
 * count against the engine's capacity) decides when each turn is forwarded; the engine's (vLLM's FCFS, its
 * prefix cache evicting by LRU, no pins) runs what it was sent, priced by the latency model. The gateway's
 * scheduler follows the engine as the real gateway's executor follows a backend's stream (src/gateway): a
 * forwarded turn's chunk is carried only once the engine produced its token. A pin is made real the only way
 * such an engine allows: keep-alives (core/keep-alive-rule.ts), the program's latest prompt sent again for
 * one token, which the engine computes like any request (their cost is in the run's time and counted).
 */
import type { VirtualClock } from "../core/clock.js";
import { keepAliveDue } from "../core/keep-alive-rule.js";
import type { TokenContent } from "../core/kv/token-content.js";
import type { Request } from "../core/request.js";
import type { Scheduler } from "../core/scheduler.js";
import type { Executor } from "../core/step-loop.js";
import type { KvChanges, SampledToken, StepPlan, StepResult } from "../core/step-plan.js";

export interface GatewaySimStats {
  /** keep-alive requests sent to the engine for pinned prefixes */
  keepAlives: number;
  /** prompt tokens the engine computed for them (not found cached) plus their output token */
  keepAliveComputedTokens: number;
  /** their prompt tokens, and those the engine found cached (left out of the run's hit ratio) */
  keepAlivePromptTokens: number;
  keepAliveCachedTokens: number;
  /** engine steps taken, and the KV tokens the engine computed in them (keep-alives included) */
  engineSteps: number;
  computedTokens: number;
}

interface LastTurn {
  readonly promptTokens: number;
  readonly content: TokenContent;
  touchedAt: number;
}

const KEEP_ALIVE_PREFIX = "keep-alive:";

/** The gateway's executor in simulation: each gateway step forwards what it admitted and runs one engine step. */
export class SimGatewayExecutor implements Executor<StepResult> {
  readonly stats: GatewaySimStats = {
    keepAlives: 0,
    keepAliveComputedTokens: 0,
    keepAlivePromptTokens: 0,
    keepAliveCachedTokens: 0,
    engineSteps: 0,
    computedTokens: 0,
  };
  /** the engine's request for each forwarded turn, by id (kept until the gateway's scheduler ends it too) */
  private readonly forwarded = new Map<string, Request>();
  private readonly lastTurns = new Map<string, LastTurn>();
  private readonly pinned = new Set<string>();
  private readonly keepAliveRequests = new Set<string>();
  /** KV tokens the engine computed (allocated) since the run began */
  private allocated = 0;
  private keepAliveNumber = 0;

  constructor(
    private readonly engine: Scheduler,
    private readonly clock: VirtualClock,
    private readonly stepTimeS: (plan: StepPlan) => number,
    /** after each engine step (the run's step-time bookkeeping) */
    private readonly onEngineStep?: (plan: StepPlan, durationS: number) => void,
  ) {}

  execute(plan: StepPlan): StepResult {
    // pins the plan's scheduling expired, sacrificed or gave back to their returning turns
    this.applyKvChanges(plan);
    for (const request of plan.admitted) {
      if (this.forwarded.has(request.id)) continue;
      this.forwarded.set(
        request.id,
        this.engine.addRequest({
          requestId: request.id,
          programId: request.hasProgramId ? request.programId : null,
          promptTokens: request.promptTokens,
          maxOutputTokens: request.maxOutputTokens,
          isLastStep: request.isLastStep,
          toolHint: request.toolHint,
          content: request.content,
          ...(request.priorTurns === null ? {} : { priorTurns: request.priorTurns }),
        }),
      );
    }
    const durationS = this.engineStep();
    const sampled = new Map<string, SampledToken>();
    const held = new Set<string>();
    for (const chunk of plan.chunks) {
      const request = chunk.request;
      const engineRequest = this.forwarded.get(request.id);
      if (engineRequest === undefined) {
        held.add(request.id);
        continue;
      }
      const engineDone = engineRequest.isDone;
      if (!chunk.samples) {
        if (engineRequest.numOutputTokens === 0 && !engineDone) held.add(request.id);
        continue;
      }
      if (request.numOutputTokens >= engineRequest.numOutputTokens && !engineDone) {
        held.add(request.id);
        continue;
      }
      const stop = engineDone && request.numOutputTokens + 1 >= engineRequest.numOutputTokens;
      sampled.set(request.id, { stop });
    }
    if (durationS === 0 && sampled.size === 0 && plan.chunks.length > 0) {
      throw new Error(
        `the simulated gateway stalled at t=${this.clock.nowS().toFixed(3)} s: its turns wait on an engine with nothing to run`,
      );
    }
    return { durationS, sampled, held };
  }

  /** One step of the engine, if it has work: the latency model's time on the clock. */
  private engineStep(): number {
    if (!this.engine.hasUnfinishedRequests()) return 0;
    const plan = this.engine.schedule();
    const durationS = plan.chunks.length > 0 ? this.stepTimeS(plan) : 0;
    this.clock.advanceTo(this.clock.nowS() + durationS);
    for (const chunk of plan.chunks) this.allocated += chunk.numTokens;
    this.stats.computedTokens = this.allocated;
    const { finished } = this.engine.update(plan, { durationS });
    if (plan.chunks.length > 0) {
      this.stats.engineSteps++;
      this.onEngineStep?.(plan, durationS);
    }
    for (const request of finished) {
      if (!this.keepAliveRequests.delete(request.id)) continue;
      const cached = request.cachedTokens ?? 0;
      this.stats.keepAliveCachedTokens += cached;
      this.stats.keepAlivePromptTokens += request.promptTokens;
      this.stats.keepAliveComputedTokens += request.promptTokens - cached + request.numOutputTokens;
    }
    this.touchPinned();
    return durationS;
  }

  /** Keep-alives due for pinned programs (the engine's room beside its running requests, as the gateway models it). */
  private touchPinned(): void {
    if (this.pinned.size === 0) return;
    // the engine has no pins: what it holds beyond its running requests is its LRU room
    const idle =
      (1 - this.engine.kvUsageFraction()) * this.engine.numKvBlocks * this.engine.kv.blockSizeTokens;
    for (const program of this.pinned) {
      const last = this.lastTurns.get(program);
      if (last === undefined || !keepAliveDue(this.allocated - last.touchedAt, idle, last.promptTokens))
        continue;
      last.touchedAt = this.allocated;
      const requestId = `${KEEP_ALIVE_PREFIX}${this.keepAliveNumber++}`;
      this.keepAliveRequests.add(requestId);
      this.stats.keepAlives++;
      this.engine.addRequest({
        requestId,
        programId: null,
        promptTokens: last.promptTokens,
        maxOutputTokens: 1,
        isLastStep: true,
        content: last.content,
      });
    }
  }

  applyKvChanges(changes: KvChanges): void {
    for (const pin of changes.pinned) this.pinned.add(pin.programId);
    for (const release of changes.released) {
      if (release.holder === "pin") {
        this.pinned.delete(release.programId);
        continue;
      }
      // a turn the gateway's model preempted still runs on the engine, which the gateway cannot preempt
      if (release.reason === "preempted") continue;
      if (release.reason === "aborted") this.engine.abort(release.requestId);
      this.forwarded.delete(release.requestId);
      if (release.reason === "last_step") this.lastTurns.delete(release.programId);
    }
  }

  /** A finished turn's prompt is its program's latest (what a keep-alive sends again). */
  turnFinished(request: Request): void {
    this.lastTurns.set(request.programId, {
      promptTokens: request.promptTokens,
      content: request.content,
      touchedAt: this.allocated,
    });
  }
}
