import type { SchedulingPolicy } from "../core/policy.js";
import { FREE } from "../core/retention.js";
import { defaultTtlS } from "../core/ttl/ttl-model.js";
import { prefillReloadS } from "./context-cost.js";
import { latestProgramFirst, pinnedThenProgramFcfs } from "./priorities.js";

/**
 * Ablation: program-level FCFS plus a pin on every non-last turn for the cold-start T_default (Exp(1) tool
 * times, eta = 1), whatever the tool. Uses CacheTTL's priority tuple, so only the TTL choice differs.
 */
export function createStaticTtlPolicy(): SchedulingPolicy {
  return {
    name: "static-ttl",
    description: "Ablation: program-FCFS + pin every non-last turn for the cold-start T_default",
    needsOffload: false,
    toolParser: "paper",
    dynamicPriorities: false,
    prioritize: pinnedThenProgramFcfs,
    retain(request, _program, _tool, ctx) {
      const ttlS = defaultTtlS(ctx.ttl.queueing.meanS() + prefillReloadS(request.numComputedTokens, ctx));
      return ttlS > 0 ? { kind: "pin", ttlS } : FREE;
    },
    pinVictimRank: latestProgramFirst,
  };
}
