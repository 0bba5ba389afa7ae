import type { SchedulingPolicy } from "../core/policy.js";
import { FREE } from "../core/retention.js";
import { prefillReloadS } from "./context-cost.js";
import { latestProgramFirst, pinnedThenProgramFcfs } from "./priorities.js";

/**
 * CacheTTL (the paper): pin a finished turn's KV for tau* = argmax P(tau, f) * (T * eta + PrefillReload(r))
 * - tau over the tool's empirical durations (eq. 2, with the cold-start ladder), order waiting requests by
 * (preempted, pinned within TTL, program arrival), and sacrifice the latest program's pin under pressure.
 */
export function createCacheTtlPolicy(options: { offload: boolean }): SchedulingPolicy {
  return {
    name: options.offload ? "cachettl-offload" : "cachettl",
    description: options.offload
      ? "CacheTTL with a CPU offload tier: PrefillReload is the reload time, evicted KV reloads from RAM"
      : "CacheTTL (paper): cost-model TTL pins, TTL-aware program-level FCFS, deadlock-free unpinning",
    needsOffload: options.offload,
    toolParser: "paper",
    dynamicPriorities: false,
    prioritize: pinnedThenProgramFcfs,
    retain(request, _program, tool, ctx) {
      const decision = ctx.ttl.decide({
        tool,
        prefillReloadS: prefillReloadS(request.numComputedTokens, ctx),
      });
      return decision.ttlS > 0 ? { kind: "pin", ttlS: decision.ttlS } : FREE;
    },
    pinVictimRank: latestProgramFirst,
  };
}
