import type { TierName } from "../kv/offload-tiers.js";

/** PrefillReload(r) of the paper: what re-creating a context costs, from an offline profile. */
export interface CostModel {
  prefillS(contextTokens: number): number;
  reloadS(contextTokens: number, tier: TierName): number;
}

export interface QuadraticCostProfile {
  /** prefill seconds = a*tokens^2 + b*tokens + c */
  readonly prefillQuadratic: { readonly a: number; readonly b: number; readonly c: number };
  readonly kvBytesPerToken: number;
  readonly reloadBandwidthBps: Partial<Record<TierName, number>>;
}

export function quadraticCostModel(profile: QuadraticCostProfile): CostModel {
  const { a, b, c } = profile.prefillQuadratic;
  const prefillS = (tokens: number) => (tokens <= 0 ? 0 : Math.max(0, a * tokens * tokens + b * tokens + c));
  return {
    prefillS,
    reloadS(tokens, tier) {
      const bandwidth = profile.reloadBandwidthBps[tier];
      return bandwidth ? (tokens * profile.kvBytesPerToken) / bandwidth : prefillS(tokens);
    },
  };
}
