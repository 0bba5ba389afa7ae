import { VirtualClock } from "./clock.js";
import { quadraticCostModel } from "./cost/cost-model.js";
import type { KvSpec } from "./kv/kv-spec.js";
import type { TierConfig } from "./kv/offload-tiers.js";
import type { SchedulingPolicy } from "./policy.js";
import { Scheduler } from "./scheduler.js";
import type { StepPlan } from "./step-plan.js";

/** Tokens per KV block of the check scheduler. */
export const CHECK_BLOCK_TOKENS = 16;

/**
 * A small, fully specified scheduler for checking a policy (the conformance runs, `continuum policies
 * --check`, the tests): 16-token blocks, 1 KiB per token, a linear prefill cost.
 */
export function checkScheduler(
  policy: SchedulingPolicy,
  options: {
    numBlocks: number;
    maxNumBatchedTokens?: number;
    maxNumSeqs?: number;
    tiers?: TierConfig[];
    kvSpec?: KvSpec;
  },
): { scheduler: Scheduler; clock: VirtualClock } {
  const clock = new VirtualClock();
  const scheduler = new Scheduler(
    {
      numBlocks: options.numBlocks,
      blockSizeTokens: CHECK_BLOCK_TOKENS,
      maxNumBatchedTokens: options.maxNumBatchedTokens ?? 256,
      maxNumSeqs: options.maxNumSeqs ?? 16,
      kvBytesPerToken: 1024,
      tiers: options.tiers,
      ...(options.kvSpec ? { kvSpec: options.kvSpec } : {}),
      costs: quadraticCostModel({
        prefillQuadratic: { a: 0, b: 1e-4, c: 0 },
        kvBytesPerToken: 1024,
        reloadBandwidthBps: { cpu: 1e9, disk: 1e8 },
      }),
    },
    { clock, policy },
  );
  return { scheduler, clock };
}

/** Step time linear in batched tokens: 5 ms + 20 us per token. */
export function linearStepTimeS(plan: StepPlan): number {
  return 0.005 + plan.numBatchedTokens * 20e-6;
}
