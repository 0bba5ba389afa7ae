/** One sequence's share of an engine step: numTokens new tokens (1 = decode) appended after contextTokens already in KV. */
export interface StepChunk {
  numTokens: number;
  contextTokens: number;
}

/**
 * Builds one step's cost chunk by chunk, so a caller that already walks its own sequences needs no
 * array of StepChunk: `beginStep(); addChunk(n, c) ...; endStepS()`. Each accumulator holds its own
 * running sums, so engines sharing one profile (and one LatencyModel) must each take their own.
 */
export interface StepAccumulator {
  beginStep(): void;
  addChunk(numTokens: number, contextTokens: number): void;
  /** wall time of the step built since beginStep(); 0 for an empty step */
  endStepS(): number;
}

export interface LatencyModel {
  readonly name: string;
  /** wall time of one engine step running these chunks together (continuous batching, chunked prefill) */
  stepS(chunks: readonly StepChunk[]): number;
  /** time to prefill a whole context of `tokens` from scratch in chunks of `chunkTokens` (used for the PrefillReload cost) */
  prefillS(tokens: number, chunkTokens?: number): number;
  /** a fresh accumulator; models without one get a buffering fallback from stepAccumulatorFor() */
  newAccumulator?(): StepAccumulator;
}

/** Chunk size when the caller names none: the paper's offline profile and vLLM's chunked-prefill budget. */
export const DEFAULT_PREFILL_CHUNK_TOKENS = 2048;

/** The model's own accumulator, or one that buffers chunks (reusing its array) and calls stepS. */
export function stepAccumulatorFor(model: LatencyModel): StepAccumulator {
  if (model.newAccumulator) return model.newAccumulator();
  const chunks: StepChunk[] = [];
  let used = 0;
  return {
    beginStep() {
      used = 0;
    },
    addChunk(numTokens, contextTokens) {
      const chunk = chunks[used];
      if (chunk) {
        chunk.numTokens = numTokens;
        chunk.contextTokens = contextTokens;
      } else {
        chunks.push({ numTokens, contextTokens });
      }
      used++;
    },
    endStepS() {
      chunks.length = used;
      return model.stepS(chunks);
    },
  };
}

/** Sum of single-sequence steps prefilling `tokens` in `chunkTokens` pieces, each attending to what came before. */
export function chunkedPrefillS(
  accumulator: StepAccumulator,
  tokens: number,
  chunkTokens: number = DEFAULT_PREFILL_CHUNK_TOKENS,
): number {
  if (!(chunkTokens >= 1)) throw new Error(`chunkTokens must be >= 1, got ${chunkTokens}`);
  let totalS = 0;
  for (let done = 0; done < tokens; done += chunkTokens) {
    accumulator.beginStep();
    accumulator.addChunk(Math.min(chunkTokens, tokens - done), done);
    totalS += accumulator.endStepS();
  }
  return totalS;
}

/**
 * A latency model defined by its accumulator: stepS and prefillS price through one accumulator of the
 * model's own (so a model instance is not for concurrent use; sweeps give each worker its own).
 */
export abstract class AccumulatingLatencyModel implements LatencyModel {
  abstract readonly name: string;
  private own: StepAccumulator | null = null;

  abstract newAccumulator(): StepAccumulator;

  private get accumulator(): StepAccumulator {
    this.own ??= this.newAccumulator();
    return this.own;
  }

  stepS(chunks: readonly StepChunk[]): number {
    const acc = this.accumulator;
    acc.beginStep();
    // indexed: no iterator object per call (stepS runs ~10^6 times per sweep)
    for (let i = 0; i < chunks.length; i++) {
      const chunk = chunks[i] as StepChunk;
      acc.addChunk(chunk.numTokens, chunk.contextTokens);
    }
    return acc.endStepS();
  }

  prefillS(tokens: number, chunkTokens: number = DEFAULT_PREFILL_CHUNK_TOKENS): number {
    return chunkedPrefillS(this.accumulator, tokens, chunkTokens);
  }
}
