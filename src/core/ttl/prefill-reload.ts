/** The paper's PrefillReload(r): seconds to re-create a request's KV cache in GPU memory after eviction. */
export interface PrefillReloadProfile {
  /** seconds to prefill `tokens` from scratch: a*tokens^2 + b*tokens + c (fit from measurements) */
  prefillQuadratic: { a: number; b: number; c: number };
  kvBytesPerToken: number;
  /** bytes per second moving KV back from each offload tier */
  reloadBandwidthBps: { cpu?: number; disk?: number };
}

/** Where the evicted KV cache would live: nowhere (recompute) or an offload tier. */
export type KvLocation = "none" | "cpu" | "disk";

export function prefillReloadS(
  profile: PrefillReloadProfile,
  contextTokens: number,
  whereIfEvicted: KvLocation,
): number {
  if (!Number.isFinite(contextTokens) || contextTokens < 0) {
    throw new RangeError(`contextTokens must be a finite number >= 0, got ${contextTokens}`);
  }
  if (whereIfEvicted !== "none") {
    const bandwidthBps = profile.reloadBandwidthBps[whereIfEvicted];
    if (bandwidthBps !== undefined && bandwidthBps > 0 && Number.isFinite(bandwidthBps)) {
      return (contextTokens * profile.kvBytesPerToken) / bandwidthBps;
    }
  }
  const { a, b, c } = profile.prefillQuadratic;
  // A fitted curve can dip below zero near 0 tokens; a negative cost would make pinning look harmful.
  return Math.max(0, (a * contextTokens + b) * contextTokens + c);
}

/**
 * Least-squares fit of y ≈ a·x² + b·x + c. With only two distinct x it fits a line (a = 0), with one a
 * constant (a = b = 0). x is centred and scaled to [−1, 1] and the system solved by QR rather than normal
 * equations: raw token counts (x⁴ ~ 1e20), or two sizes measured close together, would otherwise leave
 * too few significant digits.
 */
export function fitQuadratic(points: readonly { x: number; y: number }[]): {
  a: number;
  b: number;
  c: number;
} {
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
