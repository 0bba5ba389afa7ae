export interface DecodePoint {
  readonly batch: number;
  readonly contextTokens: number;
  readonly seconds: number;
}

/** Marginal cost of one more token at context c: b + 2ac, from the prefill quadratic. */
export interface TokenCost {
  readonly a: number;
  readonly b: number;
}

interface BatchCurve {
  readonly batch: number;
  readonly contexts: readonly number[];
  readonly seconds: readonly number[];
  /** seconds per context token below and above the measured range */
  readonly lowSlope: number;
  readonly highSlope: number;
}

/**
 * Decode step time measured at (batch, context) points: piecewise-linear in mean context for each
 * measured batch, linear between batches, extrapolated with the outer segments. Where the table has a
 * single context (or a single batch) the prefill quadratic supplies the missing slope. Each batch's
 * times are made non-decreasing in context so measurement noise cannot make a longer context cheaper.
 * Between measured batches the time never decreases (noise must not make more sequences cheaper), unless
 * `rowsMayCostLess`: the same grid prices single prefill chunks, with the chunk's new tokens as the
 * "batch", and there CPU kernels really do get cheaper at some row counts (48 rows slower than 64).
 */
export class DecodeTable {
  private readonly curves: readonly BatchCurve[];

  constructor(
    points: readonly DecodePoint[],
    private readonly tokenCost: TokenCost,
    private readonly rowsMayCostLess = false,
  ) {
    if (points.length === 0) throw new Error("DecodeTable needs at least one point");
    const byBatch = new Map<number, DecodePoint[]>();
    for (const point of points) {
      const list = byBatch.get(point.batch) ?? [];
      list.push(point);
      byBatch.set(point.batch, list);
    }
    const contextSlope = (batch: number) => Math.max(0, 2 * tokenCost.a * batch);
    this.curves = [...byBatch.entries()]
      .sort(([x], [y]) => x - y)
      .map(([batch, list]) => {
        list.sort((p, q) => p.contextTokens - q.contextTokens);
        const contexts: number[] = [];
        const seconds: number[] = [];
        let floor = 0;
        for (const point of list) {
          floor = Math.max(floor, point.seconds);
          if (contexts.at(-1) === point.contextTokens) seconds[seconds.length - 1] = floor;
          else {
            contexts.push(point.contextTokens);
            seconds.push(floor);
          }
        }
        const n = contexts.length;
        const slope = (i: number) => (seconds[i + 1]! - seconds[i]!) / (contexts[i + 1]! - contexts[i]!);
        return {
          batch,
          contexts,
          seconds,
          lowSlope: n >= 2 ? slope(0) : contextSlope(batch),
          highSlope: n >= 2 ? slope(n - 2) : contextSlope(batch),
        };
      });
  }

  /** Decode step seconds for `batch` sequences whose contexts average `meanContextTokens`. */
  seconds(batch: number, meanContextTokens: number): number {
    const curves = this.curves;
    let hi = curves.findIndex((curve) => curve.batch >= batch);
    if (hi === -1) hi = curves.length - 1;
    const lo = hi === 0 ? Math.min(1, curves.length - 1) : hi - 1;
    const from = curves[lo]!;
    const to = curves[hi]!;
    const atFrom = curveSeconds(from, meanContextTokens);
    if (to.batch === batch) return Math.max(0, curveSeconds(to, meanContextTokens));
    const perSequenceS =
      from === to
        ? this.tokenCost.b + 2 * this.tokenCost.a * meanContextTokens
        : (curveSeconds(to, meanContextTokens) - atFrom) / (to.batch - from.batch);
    // only between two measured sizes: beyond them, fewer rows never cost more, more rows never less
    const between = batch > Math.min(from.batch, to.batch) && batch < Math.max(from.batch, to.batch);
    const slope = this.rowsMayCostLess && between ? perSequenceS : Math.max(0, perSequenceS);
    return Math.max(0, atFrom + (batch - from.batch) * slope);
  }
}

function curveSeconds(curve: BatchCurve, context: number): number {
  const { contexts, seconds } = curve;
  const last = contexts.length - 1;
  if (context <= contexts[0]!) return seconds[0]! - (contexts[0]! - context) * curve.lowSlope;
  if (context >= contexts[last]!) return seconds[last]! + (context - contexts[last]!) * curve.highSlope;
  let i = 1;
  while (contexts[i]! < context) i++;
  const x0 = contexts[i - 1]!;
  const x1 = contexts[i]!;
  return seconds[i - 1]! + ((context - x0) / (x1 - x0)) * (seconds[i]! - seconds[i - 1]!);
}
