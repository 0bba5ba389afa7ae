import type { LlamaSeqKvSpec } from "../kv-spec.js";
import type { Sequence } from "./sequence.js";

/**
 * The cells these sequences hold on the executor: in one unified pool shared cells once (sequences sharing
 * cells share pool blocks, so a block's cells are its fullest sequence's); with streams or a sliding-window
 * model every copy in its own.
 */
export function cellsHeld(spec: LlamaSeqKvSpec, seqs: readonly Sequence[], blockSizeTokens: number): number {
  if (spec.layout === "streams" || spec.slidingWindow > 0) {
    let cells = 0;
    for (const seq of seqs) cells += seq.length;
    return cells;
  }
  const b = blockSizeTokens;
  const filled = new Map<number, number>();
  for (const seq of seqs) {
    const length = seq.length;
    const blocks = seq.blocks;
    for (let i = 0; i * b < length; i++) {
      const block = blocks[i] as number;
      filled.set(block, Math.max(filled.get(block) ?? 0, Math.min(b, length - i * b)));
    }
  }
  let cells = 0;
  for (const n of filled.values()) cells += n;
  return cells;
}
