import { type AgentxMetrics, agentxMetrics, type MeasuredCall } from "../../analysis/agentx-metrics.js";
import { LogHistogram } from "../../analysis/log-histogram.js";
import { VirtualClock } from "../../core/clock.js";
import type { Request } from "../../core/request.js";
import type { Scheduler } from "../../core/scheduler.js";
import { type LoopEnvironment, runStepLoop, StepLoop } from "../../core/step-loop.js";
import type { StepPlan } from "../../core/step-plan.js";
import { type AgentNode, type AgentTrace, ownCalls } from "../../workload/agent-traces/agent-trace.js";
import { TheoreticalPrefixCache } from "../../workload/agent-traces/agent-trace-stats.js";
import { ClosedLoopLanes, type LaneSend } from "../../workload/agent-traces/closed-loop-lanes.js";
import { isClairvoyantPolicy } from "../clairvoyant.js";
import { LatencyModelExecutor } from "../event-loop.js";
import type { HardwareProfile } from "../hardware/profiles.js";
import { createSimScheduler, createStepTimer, type EngineOptions, type GpuTime } from "../simulate.js";
import { blockIdContent } from "./block-id-content.js";

/** A closed-loop run (AgentX's): lanes replaying session trees for a duration, on one engine. */
export interface ClosedLoopSpec {
  readonly policy: string;
  readonly traces: readonly AgentTrace[];
  readonly profile: HardwareProfile;
  readonly engine: EngineOptions;
  readonly concurrency: number;
  /** seconds measured, from when measurement starts (after the warm-up calls with a warm start) */
  readonly durationS: number;
  readonly warmStart: boolean;
  readonly idleGapCapS: number;
  readonly interactivityFloor: number;
  readonly seed: number;
  /** a call whose prompt and output exceed this overflows the context and is not served */
  readonly maxContextTokens: number;
}

export interface ClosedLoopResult extends AgentxMetrics {
  policy: string;
  /** when measurement began (0 without a warm start) */
  measurement_start_s: number;
  steps: number;
  preemptions: number;
  pins: number;
  reload_tokens: number;
  /** share of the measured window the accelerator spent in steps */
  busy_fraction: number;
}

/** The tool a call ends in, as the scheduler is told it: a subagent spawn, a tool, or the person's reply. */
function toolHints(node: AgentNode): (string | null)[] {
  const hints: (string | null)[] = [];
  const steps = node.steps;
  for (let i = 0; i < steps.length; i++) {
    const step = steps[i];
    if (step?.kind !== "call") continue;
    let spawns = false;
    for (let j = i + 1; j < steps.length && steps[j]?.kind === "subagent"; j++) {
      const next = steps[j];
      if (next?.kind === "subagent" && !next.background) spawns = true;
    }
    hints.push(spawns ? "Task" : step.stop === "tool_use" ? "tool" : "user");
  }
  hints[hints.length - 1] = null;
  return hints;
}

interface InFlight {
  readonly send: LaneSend;
  readonly measured: boolean;
  readonly theoreticalHitTokens: number;
  lastTokenS: number | null;
}

/** The outside world of a closed-loop run: lanes send calls as their trees allow, and learn when they end. */
class ClosedLoopWorld implements LoopEnvironment<boolean> {
  readonly calls: MeasuredCall[] = [];
  readonly itl = new LogHistogram();
  private readonly byRequest = new Map<string, InFlight>();
  private readonly hints = new WeakMap<AgentNode, (string | null)[]>();
  private nextTag = 1;

  constructor(
    readonly lanes: ClosedLoopLanes,
    private readonly scheduler: Scheduler,
    private readonly clock: VirtualClock,
    private readonly spec: ClosedLoopSpec,
    private readonly theoretical: TheoreticalPrefixCache,
  ) {}

  get endS(): number | null {
    const start = this.lanes.measurementStartS;
    return start === null ? null : start + this.spec.durationS;
  }

  deliverDue(nowS: number): void {
    for (let sends = this.lanes.due(nowS); sends.length > 0; sends = this.lanes.due(nowS)) {
      for (const send of sends) this.send(send, nowS);
    }
  }

  nextEventS(): number | null {
    return this.lanes.nextDueS();
  }

  isOver(nowS: number): boolean {
    const end = this.endS;
    return end !== null && nowS >= end;
  }

  waitUntil(untilS: number | null): boolean {
    if (untilS === null) return false;
    const end = this.endS ?? Number.POSITIVE_INFINITY;
    this.clock.advanceTo(Math.max(this.clock.nowS(), Math.min(untilS, end)));
    return true;
  }

  onStep(plan: StepPlan): void {
    const nowS = this.clock.nowS();
    for (const chunk of plan.chunks) {
      if (!chunk.samples) continue;
      const state = this.byRequest.get(chunk.request.id);
      if (!state) continue;
      if (state.measured && state.lastTokenS !== null) this.itl.add(nowS - state.lastTokenS);
      state.lastTokenS = nowS;
    }
  }

  onFinished(finished: readonly Request[]): void {
    for (const request of finished) {
      const state = this.byRequest.get(request.id);
      if (!state) continue;
      this.byRequest.delete(request.id);
      const finishS = request.finishS ?? this.clock.nowS();
      if (state.measured) {
        this.calls.push({
          session: state.send.treeId,
          sendS: request.arrivalS,
          firstTokenS: request.firstTokenS,
          finishS,
          input: request.promptTokens,
          output: request.numOutputTokens,
          cachedTokens: request.cachedTokens ?? 0,
          theoreticalHitTokens: state.theoreticalHitTokens,
          overflow: false,
        });
      }
      this.lanes.finished(state.send, finishS);
    }
  }

  /** Calls sent in the window and not finished by its end. */
  unfinishedCalls(): MeasuredCall[] {
    return [...this.byRequest.values()]
      .filter((s) => s.measured)
      .map((s) => ({
        session: s.send.treeId,
        sendS: 0,
        firstTokenS: null,
        finishS: null,
        input: s.send.call.input,
        output: s.send.call.output,
        cachedTokens: 0,
        theoreticalHitTokens: 0,
        overflow: false,
      }));
  }

  private send(send: LaneSend, nowS: number): void {
    const { call, trace } = send;
    const measured = !send.warmup && this.lanes.measurementStartS !== null;
    const hitTokens = this.theoretical.lookup(send.scopeKey, call, trace.blockSize);
    const input = Math.max(1, call.input);
    const output = Math.max(1, call.output);
    if (input + output > this.spec.maxContextTokens) {
      // A context-length error: nothing is served, and the agent goes on as after a failed call.
      if (measured) {
        this.calls.push({
          session: send.treeId,
          sendS: nowS,
          firstTokenS: null,
          finishS: nowS,
          input,
          output,
          cachedTokens: 0,
          theoreticalHitTokens: hitTokens,
          overflow: true,
        });
      }
      this.lanes.finished(send, nowS);
      return;
    }
    let hints = this.hints.get(send.node);
    if (!hints) {
      hints = toolHints(send.node);
      this.hints.set(send.node, hints);
    }
    const requestId = `${send.programId}#${send.callIndex}`;
    this.scheduler.addRequest({
      requestId,
      programId: send.programId,
      promptTokens: input,
      maxOutputTokens: output,
      isLastStep: send.callIndex === ownCalls(send.node).length - 1,
      toolHint: hints[send.callIndex] ?? null,
      content: blockIdContent(
        call.hashIds,
        trace.blockSize,
        input,
        output,
        this.spec.engine.blockSizeTokens,
        send.scopeKey,
        this.nextTag++,
      ),
      priorTurns: send.callIndex,
      parentProgramId: send.parentProgramId,
    });
    this.byRequest.set(requestId, { send, measured, theoreticalHitTokens: hitTokens, lastTokenS: null });
  }
}

/** Simulates one policy under AgentX's closed loop and measures what AgentX measures. */
export function simulateClosedLoop(spec: ClosedLoopSpec): ClosedLoopResult {
  if (spec.engine.replicas !== 1)
    throw new Error("closed-loop replay (--concurrency) simulates one engine: --replicas must be 1");
  if (isClairvoyantPolicy(spec.policy))
    throw new Error(`${spec.policy} reads a program trace's future; closed-loop replay has none`);
  const clock = new VirtualClock();
  const scheduler = createSimScheduler(spec.policy, [], spec.profile, spec.engine, clock, null);
  const gpu: GpuTime = { prefillStepS: 0, decodeStepS: 0, sequences: 0, steps: 0 };
  const stepTimeS = createStepTimer(spec.profile, gpu);
  const theoretical = new TheoreticalPrefixCache();
  const lanes = new ClosedLoopLanes(
    spec.traces,
    { lanes: spec.concurrency, seed: spec.seed, warmStart: spec.warmStart, idleGapCapS: spec.idleGapCapS },
    0,
    (run, scopeKey) => {
      if (run.trace.hashScope === "local") theoretical.forget(scopeKey);
    },
  );
  const world = new ClosedLoopWorld(lanes, scheduler, clock, spec, theoretical);
  let busyInWindowS = 0;
  const loop = new StepLoop(scheduler, clock, world, new LatencyModelExecutor(clock, stepTimeS), {
    onStep: (plan, result) => {
      world.onStep(plan);
      if (lanes.measurementStartS !== null) busyInWindowS += result.durationS;
    },
    onFinished: (finished) => world.onFinished(finished),
  });
  runStepLoop(loop);
  const startS = lanes.measurementStartS ?? clock.nowS();
  const metrics = agentxMetrics({
    concurrency: spec.concurrency,
    durationS: spec.durationS,
    devices: spec.profile.tensorParallel,
    deviceKind: "gpu",
    interactivityFloor: spec.interactivityFloor,
    calls: [...world.calls, ...world.unfinishedCalls()],
    sessions: lanes.runs.map((run) => ({
      startS: Math.max(run.startS, startS),
      endS: run.endS,
      warm: run.warm,
    })),
    itl: world.itl,
  });
  return {
    policy: spec.policy,
    ...metrics,
    measurement_start_s: startS,
    steps: loop.counters.steps,
    preemptions: scheduler.stats.preemptions,
    pins: scheduler.stats.pinsCreated,
    reload_tokens: scheduler.stats.reloadTokens,
    busy_fraction: spec.durationS > 0 ? Math.min(1, busyInWindowS / spec.durationS) : 0,
  };
}
