import { type LatencyModel, stepAccumulatorFor } from "./step-latency.js";

export interface SteadyStateLoad {
  readonly inputTokens: number;
  readonly outputTokens: number;
  /** sequences in flight; finished ones are replaced at once (an offline throughput benchmark) */
  readonly batch: number;
}

/**
 * Output tokens/s of an engine kept full: every step decodes `batch` sequences at their mean context
 * (input + output/2) and prefills the batch/output requests that replace the ones finishing. A
 * fractional number of prefills is priced by interpolating between its floor and ceiling.
 */
export function steadyStateOutputTokensPerS(latency: LatencyModel, load: SteadyStateLoad): number {
  const { inputTokens, outputTokens, batch } = load;
  const acc = stepAccumulatorFor(latency);
  const prefillsPerStep = batch / outputTokens;
  const stepWith = (prefills: number) => {
    acc.beginStep();
    for (let i = 0; i < batch; i++) acc.addChunk(1, inputTokens + outputTokens / 2);
    for (let i = 0; i < prefills; i++) acc.addChunk(inputTokens, 0);
    return acc.endStepS();
  };
  const whole = Math.floor(prefillsPerStep);
  const floorS = stepWith(whole);
  const stepS = floorS + (prefillsPerStep - whole) * (stepWith(whole + 1) - floorS);
  return batch / stepS;
}
