import type { DecodeOptions, DecodeOutput, DecodeResult } from "./llama-types.js";
import type { RawDecodeOptions, RawDecodeResult } from "./native-addon.js";

/**
 * A reusable mixed batch: (token, pos, seqId, wantLogits) rows for any number of sequences. A scored row (a
 * prompt's, for its logprobs) is not sampled: its output is the logprob of `target`, the token after it.
 */
export class DecodeBatch {
  readonly tokens: Int32Array;
  readonly pos: Int32Array;
  readonly seqIds: Int32Array;
  readonly wantLogits: Uint8Array;
  /** per row: the token a scored row is scored against (-1: not scored), and how many alternatives */
  readonly scoreTargets: Int32Array;
  readonly scoreTop: Int32Array;
  private n = 0;
  private scored = 0;

  constructor(readonly capacity: number) {
    this.tokens = new Int32Array(capacity);
    this.pos = new Int32Array(capacity);
    this.seqIds = new Int32Array(capacity);
    this.wantLogits = new Uint8Array(capacity);
    this.scoreTargets = new Int32Array(capacity);
    this.scoreTop = new Int32Array(capacity);
  }

  /** rows scored instead of sampled */
  get scoredRows(): number {
    return this.scored;
  }

  get length(): number {
    return this.n;
  }

  clear(): this {
    this.n = 0;
    this.scored = 0;
    return this;
  }

  /** Adds one row and returns its batch index; `score`: scored against that token, not sampled. */
  add(
    token: number,
    pos: number,
    seqId: number,
    wantLogits = false,
    score: { target: number; top: number } | null = null,
  ): number {
    if (this.n >= this.capacity) throw new RangeError(`DecodeBatch full (${this.capacity})`);
    const i = this.n++;
    this.tokens[i] = token;
    this.pos[i] = pos;
    this.seqIds[i] = seqId;
    this.wantLogits[i] = wantLogits || score !== null ? 1 : 0;
    this.scoreTargets[i] = score?.target ?? -1;
    this.scoreTop[i] = score?.top ?? 0;
    if (score !== null) this.scored++;
    return i;
  }

  /** Adds tokens at positions startPos.. for seqId; logits for the last one unless told otherwise. */
  addSequence(tokens: ArrayLike<number>, startPos: number, seqId: number, logitsForLast = true): this {
    for (let i = 0; i < tokens.length; i++) {
      this.add(tokens[i]!, startPos + i, seqId, logitsForLast && i === tokens.length - 1);
    }
    return this;
  }
}

/** A batch as the addon takes it (the score arrays only when some row is scored). */
export function rawArgs(
  batch: DecodeBatch,
  opts: DecodeOptions,
): [Int32Array, Int32Array, Int32Array, Uint8Array, RawDecodeOptions] {
  const n = batch.length;
  const scores =
    batch.scoredRows > 0
      ? { scoreTargets: batch.scoreTargets.subarray(0, n), scoreTop: batch.scoreTop.subarray(0, n) }
      : {};
  return [
    batch.tokens.subarray(0, n),
    batch.pos.subarray(0, n),
    batch.seqIds.subarray(0, n),
    batch.wantLogits.subarray(0, n),
    { sample: opts.sample ?? true, returnLogits: opts.returnLogits ?? false, ...scores },
  ];
}

function rowLogprobs(r: RawDecodeResult, j: number): DecodeOutput["logprobs"] {
  const logprob = r.logprob?.[j];
  if (logprob === undefined || Number.isNaN(logprob)) return undefined;
  const top: { token: number; logprob: number }[] = [];
  const at = j * (r.topStride ?? 0);
  for (let k = 0; k < (r.topCount?.[j] ?? 0); k++) {
    top.push({ token: r.topToken![at + k]!, logprob: r.topLogprob![at + k]! });
  }
  return { logprob, top };
}

/** The addon's decode result as `DecodeResult`. */
export function decodeResult(r: RawDecodeResult): DecodeResult {
  const outputs: DecodeOutput[] = [];
  for (let j = 0; j < r.batchIndex.length; j++) {
    const out: DecodeOutput = {
      batchIndex: r.batchIndex[j]!,
      seqId: r.seqId[j]!,
      token: r.token ? r.token[j]! : -1,
      isEog: r.isEog ? r.isEog[j] === 1 : false,
    };
    if (r.scored?.[j] === 1) {
      out.scored = true;
      out.rank = r.rank![j]!;
    }
    if (r.logits) out.logits = r.logits.subarray(j * r.nVocab, (j + 1) * r.nVocab);
    const logprobs = rowLogprobs(r, j);
    if (logprobs) out.logprobs = logprobs;
    outputs.push(out);
  }
  return {
    outputs,
    decodeMs: r.decodeUs / 1000,
    sampleMs: r.sampleUs / 1000,
    computeMs: r.computeUs === undefined ? null : r.computeUs / 1000,
    phasesMs:
      r.computeUs === undefined
        ? null
        : {
            prepare: (r.prepareUs ?? 0) / 1000,
            inputs: (r.inputsUs ?? 0) / 1000,
            compute: r.computeUs / 1000,
            finish: (r.finishUs ?? 0) / 1000,
          },
  };
}
