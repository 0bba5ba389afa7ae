import type { VirtualClock } from "../core/clock.js";
import { MinHeap } from "../core/min-heap.js";
import type { Request } from "../core/request.js";
import type { Scheduler } from "../core/scheduler.js";
import type { StepPlan } from "../core/step-plan.js";
import { SyntheticConversation } from "./synthetic-conversation.js";

/** One LLM call of a simulated program (the trace format's turn). */
export interface SimTurn {
  readonly input: number;
  readonly cached: number;
  readonly output: number;
  readonly tool: string | null;
  /** tool time after this turn; Infinity models a tool that never returns */
  readonly toolS: number | null;
}

export interface SimProgramSpec {
  readonly id: string;
  readonly arrivalS: number;
  readonly turns: readonly SimTurn[];
  /** the client gives up on this turn this many seconds after sending it (fault injection) */
  readonly abortTurnAfterS?: { readonly turn: number; readonly afterS: number };
}

export interface TurnOutcome {
  readonly arrivalS: number;
  admittedS: number | null;
  firstTokenS: number | null;
  finishS: number | null;
  hitTokens: number;
  reloadTokens: number;
  preemptions: number;
  promptTokens: number;
  aborted: boolean;
}

export interface ProgramOutcome {
  readonly id: string;
  readonly arrivalS: number;
  readonly numTurns: number;
  readonly turns: TurnOutcome[];
  /** last departure when every turn finished, else null */
  finishS: number | null;
  aborted: boolean;
}

export interface SimRunOptions {
  readonly scheduler: Scheduler;
  readonly clock: VirtualClock;
  readonly blockSizeTokens: number;
  /** duration of one engine step (the latency model plus reload transfers) */
  readonly stepTimeS: (plan: StepPlan) => number;
  /** called after every executed step (metrics sampling, invariant checks) */
  readonly onStep?: (plan: StepPlan, durationS: number) => void;
  /** stop simulating at this virtual time (programs still running stay unfinished) */
  readonly horizonS?: number;
  readonly seedSalt?: number;
}

export interface SimRunResult {
  readonly programs: ProgramOutcome[];
  readonly steps: number;
  readonly endS: number;
}

/** A scheduler that has waiting work, nothing running, nothing to wait for: the bug CacheTTL must avoid. */
export class SimulationStalledError extends Error {
  constructor(nowS: number, waiting: number) {
    super(
      `simulation stalled at t=${nowS.toFixed(3)} s with ${waiting} waiting requests and nothing running`,
    );
    this.name = "SimulationStalledError";
  }
}

type SimEvent =
  | { kind: "arrive"; program: number; turn: number }
  | { kind: "abort"; requestId: string; program: number };

interface LiveProgram {
  readonly spec: SimProgramSpec;
  readonly outcome: ProgramOutcome;
  readonly conversation: SyntheticConversation;
}

/**
 * Discrete-event loop around the real scheduler: program arrivals, engine steps whose duration comes from a
 * latency model, tool calls (the program sleeps tool_s after a turn, then sends the next one), and client
 * aborts. Only time and model execution are simulated; blocks, pins and priorities are the production code.
 */
export function runSimulation(specs: readonly SimProgramSpec[], options: SimRunOptions): SimRunResult {
  const { scheduler, clock } = options;
  const horizonS = options.horizonS ?? Number.POSITIVE_INFINITY;
  const events = new MinHeap<SimEvent>();
  const byRequest = new Map<string, { program: number; turn: number }>();
  const live: LiveProgram[] = specs.map((spec, index) => ({
    spec,
    outcome: {
      id: spec.id,
      arrivalS: spec.arrivalS,
      numTurns: spec.turns.length,
      turns: [],
      finishS: null,
      aborted: false,
    },
    conversation: new SyntheticConversation(
      ((options.seedSalt ?? 0) * 1_000_003 + index + 1) >>> 0,
      options.blockSizeTokens,
    ),
  }));
  specs.forEach((spec, index) => {
    if (spec.turns.length > 0) events.push(spec.arrivalS, { kind: "arrive", program: index, turn: 0 });
  });

  const deliver = (event: SimEvent) => {
    if (event.kind === "abort") {
      if (scheduler.abort(event.requestId)) {
        const where = byRequest.get(event.requestId);
        const program = live[event.program] as LiveProgram;
        program.outcome.aborted = true;
        if (where) (program.outcome.turns[where.turn] as TurnOutcome).aborted = true;
        byRequest.delete(event.requestId);
      }
      return;
    }
    const program = live[event.program] as LiveProgram;
    const turn = program.spec.turns[event.turn] as SimTurn;
    const requestId = `${event.program}:${program.spec.id}#${event.turn}`;
    const content = program.conversation.nextTurn(
      event.turn,
      turn.input,
      turn.cached,
      Math.max(1, turn.output),
    );
    const nowS = clock.nowS();
    program.outcome.turns.push({
      arrivalS: nowS,
      admittedS: null,
      firstTokenS: null,
      finishS: null,
      hitTokens: 0,
      reloadTokens: 0,
      preemptions: 0,
      promptTokens: turn.input,
      aborted: false,
    });
    scheduler.addRequest({
      requestId,
      programId: `${event.program}:${program.spec.id}`,
      promptTokens: turn.input,
      maxOutputTokens: Math.max(1, turn.output),
      isLastStep: event.turn === program.spec.turns.length - 1,
      toolHint: turn.tool,
      content,
    });
    byRequest.set(requestId, { program: event.program, turn: event.turn });
    const abort = program.spec.abortTurnAfterS;
    if (abort && abort.turn === event.turn) {
      events.push(nowS + abort.afterS, { kind: "abort", requestId, program: event.program });
    }
  };

  let steps = 0;
  for (;;) {
    while ((events.peekKey() ?? Number.POSITIVE_INFINITY) <= clock.nowS()) deliver(events.pop() as SimEvent);
    if (clock.nowS() >= horizonS) break;
    if (!scheduler.hasUnfinishedRequests()) {
      // An idle engine still wakes when a pin's TTL ends, so memory is released on time.
      const next = events.peekKey();
      const expiryS = scheduler.nextPinExpiryS();
      if (expiryS !== null && expiryS <= (next ?? Number.POSITIVE_INFINITY) && expiryS < horizonS) {
        clock.advanceTo(Math.max(clock.nowS(), expiryS));
        scheduler.expireDuePins();
        continue;
      }
      if (next === undefined) break;
      clock.advanceTo(Math.min(next, horizonS));
      continue;
    }
    const plan = scheduler.schedule();
    if (plan.chunks.length === 0) {
      // Nothing to execute, but schedule() may have ended requests itself (a sequence that outgrew the
      // pool): update() reports them, and their programs go on.
      const { finished } = scheduler.update(plan, { durationS: 0 });
      if (finished.length > 0) {
        onFinished(finished);
        continue;
      }
      // Everything running was just preempted: the next plan admits again. Otherwise nothing can ever run.
      if (plan.preempted.length > 0) continue;
      throw new SimulationStalledError(clock.nowS(), scheduler.numWaiting);
    }
    for (const request of plan.admitted) {
      const where = byRequest.get(request.id);
      if (!where) continue;
      const turn = (live[where.program] as LiveProgram).outcome.turns[where.turn] as TurnOutcome;
      turn.admittedS ??= plan.nowS;
      turn.hitTokens = request.hitTokens;
      turn.reloadTokens = request.reloadTokens;
    }
    const durationS = options.stepTimeS(plan);
    clock.advanceTo(clock.nowS() + durationS);
    const { finished } = scheduler.update(plan, { durationS });
    steps++;
    options.onStep?.(plan, durationS);
    onFinished(finished);
  }
  return { programs: live.map((p) => p.outcome), steps, endS: clock.nowS() };

  function onFinished(finished: readonly Request[]): void {
    for (const request of finished) {
      const where = byRequest.get(request.id);
      if (!where) continue;
      byRequest.delete(request.id);
      const program = live[where.program] as LiveProgram;
      const turn = program.outcome.turns[where.turn] as TurnOutcome;
      turn.firstTokenS = request.firstTokenS;
      turn.finishS = request.finishS;
      turn.preemptions = request.numPreemptions;
      const spec = program.spec.turns[where.turn] as SimTurn;
      const nextTurn = where.turn + 1;
      if (nextTurn >= program.spec.turns.length) {
        program.outcome.finishS = request.finishS;
        continue;
      }
      const toolS = spec.toolS ?? 0;
      if (Number.isFinite(toolS)) {
        events.push((request.finishS ?? clock.nowS()) + toolS, {
          kind: "arrive",
          program: where.program,
          turn: nextTurn,
        });
      }
    }
  }
}
