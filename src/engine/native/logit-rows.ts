/**
 * Seeded rows of logits for exercising a sampler without a model: a Gaussian background of spread `sigma`
 * with `peaks` evenly spaced tokens raised by `lift`. A trained model's rows are peaked (a few tokens far
 * above a wide background: sigma 2.5, lift 12); the built-in and toy models' are nearly flat (sigma 0.05).
 */
export interface LogitRowShape {
  readonly sigma: number;
  readonly peaks: number;
  readonly lift: number;
  readonly seed: number;
}

export const PEAKED_ROW: LogitRowShape = { sigma: 2.5, peaks: 120, lift: 12, seed: 2 };
export const FLAT_ROW: LogitRowShape = { sigma: 0.05, peaks: 0, lift: 0, seed: 3 };

/** `rows` rows of nVocab logits each, one after another. */
export function syntheticLogits(nVocab: number, shape: LogitRowShape, rows = 1): Float32Array {
  let state = shape.seed >>> 0;
  const uniform = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return (state + 0.5) / 4294967296;
  };
  const spacing = shape.peaks > 0 ? Math.ceil(nVocab / shape.peaks) : 0;
  const out = new Float32Array(nVocab * rows);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < nVocab; i++) {
      const gauss = Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
      const raised = spacing > 0 && i % spacing === 7 ? shape.lift : 0;
      out[r * nVocab + i] = shape.sigma * gauss + raised;
    }
  }
  return out;
}
