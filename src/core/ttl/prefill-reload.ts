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
 * constant (a = b = 0). x is centred and scaled before solving: raw token counts (x⁴ ~ 1e20) would make
 * the normal equations numerically singular.
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
  const distinctX = new Set(points.map((p) => p.x)).size;
  const degree = Math.min(2, distinctX - 1);
  const mid = (minX + maxX) / 2;
  const scale = maxX > minX ? (maxX - minX) / 2 : 1;

  // Normal equations for coefficients of u^0..u^degree, u = (x − mid) / scale ∈ [−1, 1].
  const size = degree + 1;
  const matrix: number[][] = Array.from({ length: size }, () => new Array<number>(size + 1).fill(0));
  for (const { x, y } of points) {
    const u = (x - mid) / scale;
    const powers = [1, u, u * u];
    for (let row = 0; row < size; row++) {
      const r = matrix[row]!;
      for (let col = 0; col < size; col++) r[col]! += powers[row]! * powers[col]!;
      r[size]! += powers[row]! * y;
    }
  }
  const [gamma = 0, beta = 0, alpha = 0] = solve(matrix);
  // Expand alpha·u² + beta·u + gamma back into powers of x.
  return {
    a: alpha / (scale * scale),
    b: beta / scale - (2 * alpha * mid) / (scale * scale),
    c: (alpha * mid * mid) / (scale * scale) - (beta * mid) / scale + gamma,
  };
}

/** Gaussian elimination with partial pivoting on an augmented n×(n+1) matrix (modified in place). */
function solve(m: number[][]): number[] {
  const n = m.length;
  for (let col = 0; col < n; col++) {
    let pivot = col;
    for (let row = col + 1; row < n; row++) {
      if (Math.abs(m[row]![col]!) > Math.abs(m[pivot]![col]!)) pivot = row;
    }
    [m[col], m[pivot]] = [m[pivot]!, m[col]!];
    const p = m[col]!;
    for (let row = col + 1; row < n; row++) {
      const r = m[row]!;
      const factor = r[col]! / p[col]!;
      for (let k = col; k <= n; k++) r[k]! -= factor * p[k]!;
    }
  }
  const out = new Array<number>(n).fill(0);
  for (let row = n - 1; row >= 0; row--) {
    const r = m[row]!;
    let sum = r[n]!;
    for (let k = row + 1; k < n; k++) sum -= r[k]! * out[k]!;
    out[row] = sum / r[row]!;
  }
  return out;
}
