import { copiesPrefixData, type LlamaSeqKvSpec } from "../kv/kv-spec.js";
import type { SeqOp } from "../kv/sequences/seq-ops.js";
import type { SequenceMap } from "../kv/sequences/sequence-map.js";
import type { StepPlan } from "../step-plan.js";

/**
 * llama.cpp's rules for the sequence ops, as an executor would meet them: what each sequence and each tier
 * entry holds, op by op, with every op a real executor could not carry out thrown (a copy from a sequence
 * too short, into one not empty, a sliding-window sequence cut back, a restore of an entry not saved, a
 * chunk not continuing its sequence). Tests hold the scheduler's sequence map against it.
 */
export class SeqOpModel {
  readonly lengths: number[];
  readonly entries = new Map<number, number>();
  /** every op applied, in order */
  readonly applied: SeqOp[] = [];

  constructor(private readonly spec: LlamaSeqKvSpec) {
    this.lengths = new Array<number>(spec.numSeqs).fill(0);
  }

  apply(ops: readonly SeqOp[]): void {
    for (const op of ops) {
      this.applyOne(op);
      this.applied.push(op);
    }
  }

  /** A step's chunks computed: each continues its sequence exactly where it ends. */
  runChunks(plan: StepPlan): void {
    for (const chunk of plan.chunks) {
      const seq = chunk.seq;
      if (seq === null) throw new Error(`chunk of ${chunk.request.id} has no sequence`);
      if (this.length(seq) !== chunk.startToken)
        throw new Error(
          `chunk of ${chunk.request.id} starts at ${chunk.startToken}, sequence ${seq} holds ${this.length(seq)}`,
        );
      this.lengths[seq] = chunk.startToken + chunk.numTokens;
    }
  }

  /** Throws unless every sequence holds what the map says. */
  checkAgainst(map: SequenceMap): void {
    for (const seq of map.seqs) {
      if (this.length(seq.id) !== seq.length)
        throw new Error(
          `sequence ${seq.id}: the executor holds ${this.length(seq.id)}, the map says ${seq.length}`,
        );
    }
  }

  private length(seq: number): number {
    const n = this.lengths[seq];
    if (n === undefined) throw new Error(`sequence ${seq} out of range`);
    return n;
  }

  private applyOne(op: SeqOp): void {
    const windowed = this.spec.slidingWindow > 0;
    switch (op.op) {
      case "assign":
        this.length(op.seq);
        return;
      case "copy": {
        if (this.length(op.to) !== 0) throw new Error(`copy into sequence ${op.to}, which is not empty`);
        const from = this.length(op.from);
        if (from < op.tokens)
          throw new Error(`copy of ${op.tokens} from sequence ${op.from} holding ${from}`);
        const data = copiesPrefixData(this.spec);
        if ((op.mode === "data") !== data)
          throw new Error(`a ${op.mode} copy in a ${this.spec.layout} layout`);
        if (windowed && from !== op.tokens)
          throw new Error(`a sliding-window copy of ${op.tokens} from a sequence of ${from}`);
        this.lengths[op.to] = op.tokens;
        return;
      }
      case "truncate": {
        const length = this.length(op.seq);
        if (windowed && op.tokens > 0 && op.tokens < length)
          throw new Error(`sliding-window sequence ${op.seq} cut back to ${op.tokens} of ${length}`);
        this.lengths[op.seq] = Math.min(length, op.tokens);
        return;
      }
      case "drop":
        this.lengths[op.seq] = 0;
        return;
      case "save":
        if (this.length(op.seq) !== op.tokens)
          throw new Error(`save of ${op.tokens} from sequence ${op.seq} holding ${this.length(op.seq)}`);
        if (this.entries.has(op.entry)) throw new Error(`entry ${op.entry} saved twice`);
        this.entries.set(op.entry, op.tokens);
        return;
      case "restore": {
        const saved = this.entries.get(op.entry);
        if (saved === undefined) throw new Error(`restore of entry ${op.entry}, which is not saved`);
        if (this.length(op.seq) !== 0) throw new Error(`restore into sequence ${op.seq}, which is not empty`);
        if (op.tokens > saved) throw new Error(`restore of ${op.tokens} from an entry of ${saved}`);
        if (windowed && op.tokens !== saved)
          throw new Error(`a sliding-window restore cut to ${op.tokens} of ${saved}`);
        if (op.shareFrom !== null) {
          if (this.spec.layout !== "unified" || windowed)
            throw new Error("a shared restore needs one plain pool");
          if (this.length(op.shareFrom.seq) < op.shareFrom.tokens)
            throw new Error(`restore shares ${op.shareFrom.tokens} from a sequence holding fewer`);
        }
        this.lengths[op.seq] = op.tokens;
        return;
      }
      case "demote":
        if (!this.entries.has(op.entry)) throw new Error(`demote of entry ${op.entry}, which is not saved`);
        return;
      case "forget":
        if (!this.entries.delete(op.entry))
          throw new Error(`forget of entry ${op.entry}, which is not saved`);
        return;
      case "reset":
        if (this.lengths.some((n) => n > 0)) throw new Error("reset of a pool still holding KV");
        return;
    }
  }
}
