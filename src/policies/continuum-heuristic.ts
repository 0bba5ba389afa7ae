import type { SchedulingPolicy } from "../core/policy.js";
import { FREE } from "../core/retention.js";
import { pinnedThenProgramFcfs } from "./priorities.js";

const FORK_PIN_S = 2.0;

/**
 * The authors' vLLM fork, minus its crashes: tool = first word of the single ```bash block, estimate = plain
 * mean of all samples of that tool (unknown tools count as 0 s), pin exactly 2 s when the mean is <= 2 s.
 * Under pressure it sacrifices the pin with the latest end time.
 */
export function createContinuumHeuristicPolicy(): SchedulingPolicy {
  return {
    name: "continuum-heuristic",
    description: "The authors' fork: fixed 2 s pin when the tool's mean time <= 2 s, bash first-word parser",
    needsOffload: false,
    toolParser: "fork",
    dynamicPriorities: false,
    prioritize: pinnedThenProgramFcfs,
    retain(_request, _program, tool, ctx) {
      const meanS = ctx.ttl.tools.meanS(tool) ?? 0;
      return meanS <= FORK_PIN_S ? { kind: "pin", ttlS: FORK_PIN_S } : FREE;
    },
    pinVictimRank: (program) => program.pin?.expiresS ?? 0,
  };
}
