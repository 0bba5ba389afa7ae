import { buildWorkload, type Workload, type WorkloadSpec } from "../../workload/arrivals.js";
import { truncateContext } from "../../workload/transforms.js";

export interface ReplayWorkloadSpec extends WorkloadSpec {
  /** the served model's context: programs are cut before their first request that does not fit */
  readonly maxContext?: number | undefined;
}

export interface ReplayWorkload extends Workload {
  /** programs whose first request does not fit in maxContext */
  readonly droppedPrograms: number;
  /** programs cut short by maxContext */
  readonly truncatedPrograms: number;
}

/**
 * The programs a replay sends and when each starts (seconds after the run starts, Poisson at the
 * spec's rate): the simulator's workload for the same spec, then truncated to the context. Dropped
 * programs take their arrival with them; the others keep theirs. The same spec always gives the same
 * schedule.
 */
export function replayWorkload(spec: ReplayWorkloadSpec): ReplayWorkload {
  const workload = buildWorkload(spec);
  if (spec.maxContext === undefined) return { ...workload, droppedPrograms: 0, truncatedPrograms: 0 };
  const truncated = truncateContext(workload.programs, spec.maxContext);
  const arrivalById = new Map(workload.programs.map((p, i) => [p.id, workload.arrivalsS[i]!]));
  return {
    programs: truncated.programs,
    arrivalsS: truncated.programs.map((p) => arrivalById.get(p.id)!),
    droppedPrograms: truncated.droppedPrograms,
    truncatedPrograms: truncated.truncatedPrograms,
  };
}
