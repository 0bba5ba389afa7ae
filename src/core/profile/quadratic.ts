/** y = a x^2 + b x + c: the prefill-time curve of a profile (x = tokens, y = seconds). */
export interface Quadratic {
  a: number;
  b: number;
  c: number;
}

export function evalQuadratic(q: Quadratic, x: number): number {
  return (q.a * x + q.b) * x + q.c;
}

/**
 * Least-squares fit of y ≈ a·x² + b·x + c. With only two distinct x it fits a line (a = 0), with one a
 * constant (a = b = 0). x is centred and scaled to [−1, 1] and the system solved by QR rather than normal
 * equations: raw token counts (x⁴ ~ 1e20), or two sizes measured close together, would otherwise leave
 * too few significant digits.
 */
export function fitQuadratic(points: readonly { x: number; y: number }[]): Quadratic {
  if (points.length === 0) throw new RangeError("fitQuadratic needs at least one point");
  let minX = Number.POSITIVE_INFINITY;
  let maxX = Number.NEGATIVE_INFINITY;
  for (const { x, y } of points) {
    if (!Number.isFinite(x) || !Number.isFinite(y))
      throw new RangeError(`fitQuadratic point (${x}, ${y}) is not finite`);
    minX = Math.min(minX, x);
    maxX = Math.max(maxX, x);
  }
  const degree = Math.min(2, new Set(points.map((p) => p.x)).size - 1);
  const mid = (minX + maxX) / 2;
  const scale = maxX > minX ? (maxX - minX) / 2 : 1;

  // Columns u^0..u^degree, u = (x − mid) / scale.
  const columns = Array.from({ length: degree + 1 }, (_, power) =>
    points.map(({ x }) => ((x - mid) / scale) ** power),
  );
  const [gamma = 0, beta = 0, alpha = 0] = leastSquares(
    columns,
    points.map((p) => p.y),
  );
  // Expand alpha·u² + beta·u + gamma back into powers of x.
  return {
    a: alpha / (scale * scale),
    b: beta / scale - (2 * alpha * mid) / (scale * scale),
    c: (alpha * mid * mid) / (scale * scale) - (beta * mid) / scale + gamma,
  };
}

/**
 * Minimises |A·coef − y| by Householder QR. `columns` are A's columns (full column rank); both `columns`
 * and `y` are overwritten.
 */
function leastSquares(columns: number[][], y: number[]): number[] {
  const n = y.length;
  const m = columns.length;
  for (let k = 0; k < m; k++) {
    const col = columns[k]!;
    let norm = 0;
    for (let i = k; i < n; i++) norm += col[i]! * col[i]!;
    norm = Math.sqrt(norm);
    // Reflect col[k..] onto ∓norm·e_k, choosing the sign that avoids cancellation.
    const diag = col[k]! > 0 ? -norm : norm;
    const v = col.slice(k);
    v[0]! -= diag;
    let vv = 0;
    for (const vi of v) vv += vi * vi;
    if (vv === 0) continue;
    const reflect = (target: number[]) => {
      let dot = 0;
      for (let i = k; i < n; i++) dot += v[i - k]! * target[i]!;
      const f = (2 * dot) / vv;
      for (let i = k; i < n; i++) target[i]! -= f * v[i - k]!;
    };
    for (let j = k; j < m; j++) reflect(columns[j]!);
    reflect(y);
  }
  // Back-substitute R·coef = (Qᵀy)[0..m), where R[i][j] = columns[j][i].
  const coef = new Array<number>(m).fill(0);
  for (let i = m - 1; i >= 0; i--) {
    let sum = y[i]!;
    for (let j = i + 1; j < m; j++) sum -= columns[j]![i]! * coef[j]!;
    coef[i] = sum / columns[i]![i]!;
  }
  return coef;
}
