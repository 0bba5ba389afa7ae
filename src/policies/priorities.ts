import type { Program } from "../core/program.js";
import type { Request } from "../core/request.js";

/** Shared priority tuples. Preempted requests always go first, as in vLLM. */

/** vLLM FCFS: request arrival order. */
export function requestFcfs(request: Request): void {
  request.priority[0] = request.preempted ? 0 : 1;
  request.priority[1] = 0;
  request.priority[2] = request.arrivalS;
}

/** Program-level FCFS: the program's first arrival orders all of its turns (see Program.arrivalOrder). */
export function programFcfs(request: Request, program: Program): void {
  request.priority[0] = request.preempted ? 0 : 1;
  request.priority[1] = 0;
  request.priority[2] = program.arrivalOrder;
}

/** The paper's tuple (Sec. 4.3): preempted, then pinned within TTL, then program arrival. */
export function pinnedThenProgramFcfs(request: Request, program: Program): void {
  request.priority[0] = request.preempted ? 0 : 1;
  request.priority[1] = program.pin ? 0 : 1;
  request.priority[2] = program.arrivalOrder;
}

/** Later programs give up their pins first (the paper's deadlock rule). */
export function latestProgramFirst(program: Program): number {
  return program.arrivalOrder;
}
