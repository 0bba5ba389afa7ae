import type { SchedulingPolicy } from "../core/policy.js";
import type { Program } from "../core/program.js";
import {
  ADAPTIVE_DEFAULTS,
  type Clairvoyance,
  createCacheTtlAdaptivePolicy,
} from "../policies/cachettl-adaptive.js";
import { createPolicy } from "../policies/index.js";
import type { TraceProgram } from "../workload/trace.js";
import { simProgramId } from "./event-loop.js";

/**
 * A policy only the simulator can run: cachettl-adaptive told each program's future by the trace it replays.
 * Admission counts every program at the mean context of its remaining turns, waiting turns go shortest
 * remaining work first, and pins last until the program returns or memory is needed. No server can know
 * any of this; what it carries bounds what a better forecast of program growth or length could buy.
 */
export const CLAIRVOYANT_POLICY = "cachettl-adaptive:clairvoyant";

export function isClairvoyantPolicy(name: string): boolean {
  return name === CLAIRVOYANT_POLICY;
}

interface Future {
  /** per turn: tokens of context once the turn ran (prompt plus output) */
  readonly contexts: readonly number[];
  /** per turn: tokens the GPU has to compute (uncached prompt plus output) */
  readonly work: readonly number[];
}

/** The future of the programs a simulation replays, looked up by the scheduler's program ids. */
export function traceClairvoyance(programs: readonly TraceProgram[]): Clairvoyance {
  const futures = new Map<string, Future>();
  programs.forEach((program, index) => {
    futures.set(simProgramId(index, program.id), {
      contexts: program.turns.map((turn) => turn.input + turn.output),
      work: program.turns.map((turn) => turn.input - turn.cached + turn.output),
    });
  });
  // The turn a program is on: its turns arrive one at a time, so the latest one that arrived.
  const remaining = (program: Program, pick: (future: Future) => readonly number[]) => {
    const future = futures.get(program.id);
    if (!future) return null;
    const rest = pick(future).slice(Math.max(0, program.numArrived - 1));
    return rest.length === 0 ? null : rest;
  };
  return {
    meanRemainingContext(program) {
      const rest = remaining(program, (future) => future.contexts);
      return rest === null ? null : rest.reduce((sum, tokens) => sum + tokens, 0) / rest.length;
    },
    remainingWork(program) {
      const rest = remaining(program, (future) => future.work);
      return rest === null ? null : rest.reduce((sum, tokens) => sum + tokens, 0);
    },
  };
}

/** A fresh policy for a simulation of these programs: any registered policy, or the clairvoyant bound. */
export function createSimPolicy(name: string, programs: readonly TraceProgram[]): SchedulingPolicy {
  return isClairvoyantPolicy(name) ? createClairvoyantPolicy(programs) : createPolicy(name);
}

function createClairvoyantPolicy(programs: readonly TraceProgram[]): SchedulingPolicy {
  return createCacheTtlAdaptivePolicy(
    // the new program too at its known future: what it will hold is no forecast here
    { ...ADAPTIVE_DEFAULTS, ttl: "until-pressure", newcomer: "forecast" },
    CLAIRVOYANT_POLICY,
    "simulator only, a bound: cachettl-adaptive told every program's future (remaining contexts and work)",
    traceClairvoyance(programs),
  );
}
