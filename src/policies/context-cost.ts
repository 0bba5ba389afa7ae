import type { PolicyContext } from "../core/policy.js";

/** PrefillReload(r): reloading from the offload tier when there is one, else recomputing. */
export function prefillReloadS(contextTokens: number, ctx: PolicyContext): number {
  return ctx.offloadTier
    ? ctx.costs.reloadS(contextTokens, ctx.offloadTier)
    : ctx.costs.prefillS(contextTokens);
}
