import type { VirtualClock } from "../core/clock.js";
import { MinHeap } from "../core/heaps/min-heap.js";
import type { Request } from "../core/request.js";
import type { Scheduler } from "../core/scheduler.js";
import { type Executor, type LoopEnvironment, runStepLoop, StepLoop } from "../core/step-loop.js";
import type { StepPlan, StepResult } from "../core/step-plan.js";
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
  /** runs the scheduler's plans instead of the latency model directly (a simulated gateway: gateway-sim.ts) */
  readonly executor?: Executor<StepResult>;
  /** requests that finished, after the programs' own bookkeeping */
  readonly onFinished?: (finished: readonly Request[]) => void;
}

export interface SimRunResult {
  readonly programs: ProgramOutcome[];
  readonly steps: number;
  readonly endS: number;
}

type SimEvent =
  | { kind: "arrive"; program: number; turn: number }
  | { kind: "abort"; requestId: string; program: number };

interface LiveProgram {
  readonly spec: SimProgramSpec;
  readonly outcome: ProgramOutcome;
  readonly conversation: SyntheticConversation;
}

/** The simulator's executor: a step takes the latency model's time on the virtual clock. */
export class LatencyModelExecutor implements Executor<StepResult> {
  constructor(
    private readonly clock: VirtualClock,
    private readonly stepTimeS: (plan: StepPlan) => number,
  ) {}

  execute(plan: StepPlan): StepResult {
    const durationS = this.stepTimeS(plan);
    this.clock.advanceTo(this.clock.nowS() + durationS);
    return { durationS };
  }
}

/** The scheduler's id of a simulated program: its index in the run (trace ids may repeat) and its trace id. */
export function simProgramId(index: number, traceId: string): string {
  return `${index}:${traceId}`;
}

/** Picks the scheduler (replica) a new request of a program goes to. */
export type RequestRoute = (programId: string, turn: number) => Scheduler;

/**
 * The simulated world around the scheduler(s): program arrivals, tool calls (a program sleeps tool_s
 * after a turn, then sends the next one) and client aborts, as timed events on the virtual clock; it
 * keeps each program's outcome. Each request goes where `route` says (one scheduler, or a cluster's
 * router).
 */
export class SimulatedPrograms implements LoopEnvironment<boolean> {
  readonly live: LiveProgram[];
  private readonly events = new MinHeap<SimEvent>();
  private readonly byRequest = new Map<string, { program: number; turn: number; scheduler: Scheduler }>();

  constructor(
    specs: readonly SimProgramSpec[],
    private readonly route: RequestRoute,
    private readonly clock: VirtualClock,
    private readonly horizonS: number,
    blockSizeTokens: number,
    seedSalt: number,
  ) {
    this.live = specs.map((spec, index) => ({
      spec,
      outcome: {
        id: spec.id,
        arrivalS: spec.arrivalS,
        numTurns: spec.turns.length,
        turns: [],
        finishS: null,
        aborted: false,
      },
      conversation: new SyntheticConversation((seedSalt * 1_000_003 + index + 1) >>> 0, blockSizeTokens),
    }));
    specs.forEach((spec, index) => {
      if (spec.turns.length > 0) this.events.push(spec.arrivalS, { kind: "arrive", program: index, turn: 0 });
    });
  }

  deliverDue(nowS: number): void {
    while ((this.events.peekKey() ?? Number.POSITIVE_INFINITY) <= nowS)
      this.deliver(this.events.pop() as SimEvent);
  }

  nextEventS(): number | null {
    return this.events.peekKey() ?? null;
  }

  isOver(nowS: number): boolean {
    return nowS >= this.horizonS;
  }

  waitUntil(untilS: number | null): boolean {
    // Nothing scheduled and nothing running: every program is done (or waits on a tool that never returns).
    if (untilS === null) return false;
    this.clock.advanceTo(Math.max(this.clock.nowS(), Math.min(untilS, this.horizonS)));
    return true;
  }

  /** Admission bookkeeping of an executed step: when each turn started and what it reused. */
  onStep(plan: StepPlan): void {
    for (const request of plan.admitted) {
      const turn = this.turnOf(request);
      if (!turn) continue;
      turn.admittedS ??= plan.nowS;
      turn.hitTokens = request.cachedTokens ?? 0;
      turn.reloadTokens = request.cachedReloadTokens;
    }
  }

  onFinished(finished: readonly Request[]): void {
    for (const request of finished) {
      const where = this.byRequest.get(request.id);
      if (!where) continue;
      this.byRequest.delete(request.id);
      const program = this.live[where.program] as LiveProgram;
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
        this.events.push((request.finishS ?? this.clock.nowS()) + toolS, {
          kind: "arrive",
          program: where.program,
          turn: nextTurn,
        });
      }
    }
  }

  private turnOf(request: Request): TurnOutcome | undefined {
    const where = this.byRequest.get(request.id);
    if (!where) return undefined;
    return (this.live[where.program] as LiveProgram).outcome.turns[where.turn];
  }

  private deliver(event: SimEvent): void {
    if (event.kind === "abort") {
      const scheduler = this.byRequest.get(event.requestId)?.scheduler;
      if (scheduler?.abort(event.requestId)) {
        const program = this.live[event.program] as LiveProgram;
        program.outcome.aborted = true;
        const turn = this.turnOf({ id: event.requestId } as Request);
        if (turn) turn.aborted = true;
        this.byRequest.delete(event.requestId);
      }
      return;
    }
    const program = this.live[event.program] as LiveProgram;
    const turn = program.spec.turns[event.turn] as SimTurn;
    const requestId = `${event.program}:${program.spec.id}#${event.turn}`;
    const content = program.conversation.nextTurn(
      event.turn,
      turn.input,
      turn.cached,
      Math.max(1, turn.output),
    );
    const nowS = this.clock.nowS();
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
    const programId = simProgramId(event.program, program.spec.id);
    const scheduler = this.route(programId, event.turn);
    scheduler.addRequest({
      requestId,
      programId,
      promptTokens: turn.input,
      maxOutputTokens: Math.max(1, turn.output),
      isLastStep: event.turn === program.spec.turns.length - 1,
      toolHint: turn.tool,
      content,
      priorTurns: event.turn,
    });
    this.byRequest.set(requestId, { program: event.program, turn: event.turn, scheduler });
    const abort = program.spec.abortTurnAfterS;
    if (abort && abort.turn === event.turn) {
      this.events.push(nowS + abort.afterS, { kind: "abort", requestId, program: event.program });
    }
  }
}

/**
 * Simulates programs on the shared step loop: the production scheduler (blocks, pins, priorities) with a
 * latency model as the executor and timed arrivals, tool calls and aborts as the outside world.
 */
export function runSimulation(specs: readonly SimProgramSpec[], options: SimRunOptions): SimRunResult {
  const { scheduler, clock } = options;
  const programs = new SimulatedPrograms(
    specs,
    () => scheduler,
    clock,
    options.horizonS ?? Number.POSITIVE_INFINITY,
    options.blockSizeTokens,
    options.seedSalt ?? 0,
  );
  const executor = options.executor ?? new LatencyModelExecutor(clock, options.stepTimeS);
  const loop = new StepLoop(scheduler, clock, programs, executor, {
    onStep: (plan, result) => {
      programs.onStep(plan);
      options.onStep?.(plan, result.durationS);
    },
    onFinished: (finished) => {
      programs.onFinished(finished);
      options.onFinished?.(finished);
    },
  });
  runStepLoop(loop);
  return { programs: programs.live.map((p) => p.outcome), steps: loop.counters.steps, endS: clock.nowS() };
}
