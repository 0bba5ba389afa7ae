/**
 * Llama 3.1's RoPE frequency scaling, as GGUF files carry it: one factor per rotated dimension pair in
 * the `rope_freqs.weight` tensor, which llama.cpp divides the pair's frequency by. Low frequencies
 * (wavelengths longer than the original context allows) are slowed by `factor`, high ones kept, and
 * those between blended smoothly, so the model reaches 128k positions.
 */

export interface Llama3RopeScaling {
  factor: number;
  lowFreqFactor: number;
  highFreqFactor: number;
  /** Context length the model was pretrained with before the extension. */
  originalContextLength: number;
}

/** Llama 3.1's published rope_scaling settings. */
export const LLAMA_3_1_ROPE_SCALING: Llama3RopeScaling = {
  factor: 8,
  lowFreqFactor: 1,
  highFreqFactor: 4,
  originalContextLength: 8192,
};

/** The `headDim / 2` frequency divisors of `rope_freqs.weight`. */
export function llama3RopeFactors(headDim: number, freqBase: number, s: Llama3RopeScaling): Float32Array {
  const longestKept = s.originalContextLength / s.highFreqFactor;
  const shortestSlowed = s.originalContextLength / s.lowFreqFactor;
  const factors = new Float32Array(headDim / 2);
  for (let i = 0; i < factors.length; i++) {
    const wavelength = 2 * Math.PI * freqBase ** ((2 * i) / headDim);
    if (wavelength < longestKept) {
      factors[i] = 1;
    } else if (wavelength > shortestSlowed) {
      factors[i] = s.factor;
    } else {
      const smooth =
        (s.originalContextLength / wavelength - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      factors[i] = 1 / ((1 - smooth) / s.factor + smooth);
    }
  }
  return factors;
}
