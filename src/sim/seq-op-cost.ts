import type { TierName } from "../core/kv/offload-tiers.js";
import type { SeqOp } from "../core/kv/sequences/seq-ops.js";

/** What moving KV costs the executor: bytes per token, and each tier's bandwidth (bytes per second). */
export interface SeqOpPrices {
  readonly kvBytesPerToken: number;
  readonly bandwidthBps: Readonly<Record<TierName, number>>;
}

/**
 * Seconds the sequence ops of a plan take before its batch, beyond the reloads the plan already lists: a
 * sequence saved to a tier (its bytes out at that tier's bandwidth), and a prefix copied as data (saved to
 * host memory and restored: twice the RAM tier's). Shared cells, cuts, drops and tier bookkeeping are free;
 * restores are the plan's reloads.
 */
export function seqOpsS(ops: readonly SeqOp[], prices: SeqOpPrices): number {
  let seconds = 0;
  const bytes = (tokens: number) => tokens * prices.kvBytesPerToken;
  for (const op of ops) {
    if (op.op === "save") seconds += bytes(op.tokens) / prices.bandwidthBps[op.tier];
    else if (op.op === "copy" && op.mode === "data")
      seconds += (2 * bytes(op.tokens)) / prices.bandwidthBps.cpu;
  }
  return seconds;
}
