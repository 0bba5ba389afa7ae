import type { SchedulingPolicy } from "../core/policy.js";
import { FREE } from "../core/retention.js";
import { latestProgramFirst, programFcfs } from "./priorities.js";

/** LMCache offloads asynchronously, so a swap costs the batch only a fraction of the transfer time. */
const ASYNC_SWAP_FACTOR = 0.1;
const PRIOR_TOOL_S = 1.0;

/**
 * InferCept: when a turn pauses for a tool, keep (preserve), recompute later (discard) or swap, whichever
 * wastes the least memory x time. Preserved KV stays until the program returns (no TTL); requests are FCFS
 * by their program's original arrival.
 */
export function createInferceptPolicy(): SchedulingPolicy {
  return {
    name: "infercept",
    description: "InferCept: preserve / swap / discard by least memory waste; FCFS by original arrival",
    needsOffload: true,
    toolParser: "paper",
    dynamicPriorities: false,
    prioritize: programFcfs,
    retain(request, _program, tool, ctx) {
      const tokens = request.numComputedTokens;
      const batchTokens = ctx.runningKvTokens + tokens;
      const expectedToolS = ctx.ttl.tools.meanS(tool) ?? ctx.ttl.tools.globalMeanS() ?? PRIOR_TOOL_S;
      const preserveWaste = expectedToolS * tokens;
      const discardWaste = ctx.costs.prefillS(tokens) * batchTokens;
      const swapWaste = ctx.offloadTier
        ? 2 * ctx.costs.reloadS(tokens, ctx.offloadTier) * batchTokens * ASYNC_SWAP_FACTOR
        : Number.POSITIVE_INFINITY;
      return preserveWaste < Math.min(discardWaste, swapWaste)
        ? { kind: "pin", ttlS: Number.POSITIVE_INFINITY }
        : FREE;
    },
    pinVictimRank: latestProgramFirst,
  };
}
