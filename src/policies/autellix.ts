import type { SchedulingPolicy } from "../core/policy.js";
import type { Program } from "../core/program.js";
import type { Request } from "../core/request.js";
import { FREE } from "../core/retention.js";
import { latestProgramFirst } from "./priorities.js";

export interface AutellixOptions {
  /** upper bound of the first queue (attained service seconds); later queues grow geometrically */
  readonly firstQueueS?: number;
  readonly queueGrowth?: number;
  readonly numQueues?: number;
  /** anti-starvation: waiting / service >= beta promotes to the top queue */
  readonly starvationBeta?: number;
  readonly offload?: boolean;
}

/**
 * Autellix PLAS: a program's priority is its attained service (finished requests' service plus what live
 * ones ran). Multi-level queues with geometric bounds, FCFS inside a queue, higher queues may preempt lower
 * ones, and long waits relative to service promote to the top queue.
 */
export function createAutellixPolicy(options: AutellixOptions = {}): SchedulingPolicy {
  const firstQueueS = options.firstQueueS ?? 2;
  const growth = options.queueGrowth ?? 4;
  const numQueues = options.numQueues ?? 5;
  const beta = options.starvationBeta ?? 10;
  const queueOf = (program: Program) => {
    let bound = firstQueueS;
    for (let level = 0; level < numQueues - 1; level++) {
      if (program.attainedServiceS < bound) return level;
      bound *= growth;
    }
    return numQueues - 1;
  };
  // A request starves once it has waited beta x its program's attained service.
  const starvesAtS = (request: Request, program: Program) =>
    request.arrivalS + beta * Math.max(program.attainedServiceS, 1e-3);
  const levelOf = (request: Request, program: Program, nowS: number) =>
    nowS >= starvesAtS(request, program) ? 0 : queueOf(program);
  return {
    name: options.offload ? "autellix-offload" : "autellix",
    description: options.offload
      ? "Autellix+ : PLAS on top of CPU offload"
      : "Autellix PLAS: least attained program service first, multi-level queues, anti-starvation",
    needsOffload: options.offload ?? false,
    toolParser: "paper",
    dynamicPriorities: true,
    prioritize(request, program, ctx) {
      // Queue level alone decides: a preempted request from a lower queue must not jump back ahead.
      request.priority[0] = 0;
      request.priority[1] = levelOf(request, program, ctx.nowS);
      request.priority[2] = request.arrivalS;
    },
    nextPriorityChangeS(request, program, nowS) {
      const atS = starvesAtS(request, program);
      return atS > nowS ? atS : Number.POSITIVE_INFINITY;
    },
    retain: () => FREE,
    pinVictimRank: latestProgramFirst,
    preemptsForAdmission(waiting, _waitingProgram, _running, runningProgram) {
      return waiting.priority[1] < queueOf(runningProgram);
    },
  };
}
