import type { SchedulingPolicy } from "../core/policy.js";
import { FREE } from "../core/retention.js";
import { latestProgramFirst, requestFcfs } from "./priorities.js";

/** vLLM v1: request-level FCFS; a finished turn's KV goes to the LRU prefix cache at once. */
export function createVllmPolicy(options: { offload: boolean }): SchedulingPolicy {
  return {
    name: options.offload ? "vllm-offload" : "vllm",
    description: options.offload
      ? "vLLM + CPU offload (LMCache-like): end-of-turn free, returning prefixes reload from CPU RAM"
      : "vLLM v1: request-level FCFS, end-of-turn free into the LRU prefix cache",
    needsOffload: options.offload,
    toolParser: "paper",
    dynamicPriorities: false,
    prioritize: requestFcfs,
    retain: () => FREE,
    pinVictimRank: latestProgramFirst,
  };
}
