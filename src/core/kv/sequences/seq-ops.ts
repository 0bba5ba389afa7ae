import type { TierName } from "../offload-tiers.js";

/**
 * What the scheduler tells an executor to do with its sequences and its tier entries (llama-seq spec), in
 * order, before the step's batch. The executor applies them as told: it decides nothing.
 */
export type SeqOp =
  /** the admitted request computes into `seq` */
  | { readonly op: "assign"; readonly seq: number; readonly requestId: string }
  /**
   * the empty `to` takes the first `tokens` positions of `from`: their cells (`share`, llama.cpp's
   * `seq_cp`), or a copy of their data (`data`: saved state restored, then cut to `tokens`)
   */
  | {
      readonly op: "copy";
      readonly from: number;
      readonly to: number;
      readonly tokens: number;
      readonly mode: "share" | "data";
    }
  /** keep positions [0, tokens) of `seq` */
  | { readonly op: "truncate"; readonly seq: number; readonly tokens: number }
  /** `seq` is emptied */
  | { readonly op: "drop"; readonly seq: number }
  /** `seq`'s state (its `tokens` positions) is written as tier entry `entry` in `tier`; `seq` keeps its KV */
  | {
      readonly op: "save";
      readonly seq: number;
      readonly tokens: number;
      readonly entry: number;
      readonly tier: TierName;
    }
  /**
   * tier entry `entry` is restored into the empty `seq` and cut to `tokens`; then its first `shareFrom.tokens`
   * positions are swapped for `shareFrom.seq`'s cells (one unified pool: a prefix is not held twice)
   */
  | {
      readonly op: "restore";
      readonly entry: number;
      readonly seq: number;
      readonly tokens: number;
      readonly shareFrom: { readonly seq: number; readonly tokens: number } | null;
    }
  /** tier entry `entry` moves from RAM to disk */
  | { readonly op: "demote"; readonly entry: number }
  /** tier entry `entry` is deleted */
  | { readonly op: "forget"; readonly entry: number }
  /** every sequence is empty: new KV is placed from the pool's first cell again */
  | { readonly op: "reset" };

/** Tokens an op moves through memory or a tier (what the simulator prices). */
export function opTokens(op: SeqOp): number {
  switch (op.op) {
    case "copy":
      return op.mode === "data" ? op.tokens : 0;
    case "save":
    case "restore":
      return op.tokens;
    default:
      return 0;
  }
}
