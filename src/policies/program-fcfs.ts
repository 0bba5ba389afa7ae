import type { SchedulingPolicy } from "../core/policy.js";
import { FREE } from "../core/retention.js";
import { latestProgramFirst, programFcfs } from "./priorities.js";

/** Ablation: program-level FCFS ordering, no retention. */
export function createProgramFcfsPolicy(): SchedulingPolicy {
  return {
    name: "program-fcfs",
    description: "Ablation: waiting order by program first arrival, end-of-turn free",
    needsOffload: false,
    toolParser: "paper",
    dynamicPriorities: false,
    prioritize: programFcfs,
    retain: () => FREE,
    pinVictimRank: latestProgramFirst,
  };
}
