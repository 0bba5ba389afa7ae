import type { TierName } from "../offload-tiers.js";
import type { Sequence } from "./sequence.js";
import type { TierEntry } from "./sequence-tiers.js";

/** How the sequence map (llama-seq) materialises an admission's known prefix in its sequence. */
export type SequencePlan =
  /** the request goes on in `source` itself (a sequence nobody holds, or its program's pin) */
  | { readonly kind: "take-over"; readonly source: Sequence }
  /** an empty sequence takes `source`'s first gpuTokens positions */
  | { readonly kind: "copy"; readonly source: Sequence }
  /** an empty sequence takes a saved state; its first gpuTokens positions shared from `shareFrom` */
  | { readonly kind: "restore"; readonly entry: TierEntry; readonly shareFrom: Sequence | null };

/** Where a waiting request's already-known prefix can come from. */
export interface PrefixMatch {
  /** pool blocks holding the prefix found resident (in use or free) */
  readonly gpuBlockIds: readonly number[];
  readonly gpuTokens: number;
  /** tokens after the resident prefix found in an offload tier */
  readonly tierTokens: number;
  readonly tier: TierName | null;
  /** the resident prefix is copied into fresh blocks (each copy counted: kv-spec.ts, copiesTakeBlocks) */
  readonly copied?: boolean;
  /** llama-seq: how the sequence map gives the prefix (absent: nothing known) */
  readonly sequence?: SequencePlan;
  /** llama-seq: the request's chunks stop at this token, and the next plan keeps its prefix as a checkpoint */
  readonly checkpointAt?: number;
}

export const NO_MATCH: PrefixMatch = { gpuBlockIds: [], gpuTokens: 0, tierTokens: 0, tier: null };
