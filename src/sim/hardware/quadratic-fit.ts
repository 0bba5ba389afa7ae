export interface Quadratic {
  a: number;
  b: number;
  c: number;
}

/** Least-squares y = a x^2 + b x + c through at least three points with distinct x. */
export function fitQuadratic(xs: readonly number[], ys: readonly number[]): Quadratic {
  if (xs.length !== ys.length)
    throw new Error(`fitQuadratic: ${xs.length} x values but ${ys.length} y values`);
  if (new Set(xs).size < 3) throw new Error("fitQuadratic needs at least three distinct x values");
  // scale x to ~1 so the normal equations stay well conditioned for x in the tens of thousands
  const scale = Math.max(...xs.map(Math.abs));
  let s0 = 0;
  let s1 = 0;
  let s2 = 0;
  let s3 = 0;
  let s4 = 0;
  let t0 = 0;
  let t1 = 0;
  let t2 = 0;
  xs.forEach((rawX, i) => {
    const x = rawX / scale;
    const y = ys[i] ?? 0;
    s0 += 1;
    s1 += x;
    s2 += x * x;
    s3 += x * x * x;
    s4 += x * x * x * x;
    t0 += y;
    t1 += x * y;
    t2 += x * x * y;
  });
  // normal equations [s4 s3 s2; s3 s2 s1; s2 s1 s0] [a b c] = [t2 t1 t0], by Cramer's rule
  const det = (m: readonly number[]) =>
    m[0]! * (m[4]! * m[8]! - m[5]! * m[7]!) -
    m[1]! * (m[3]! * m[8]! - m[5]! * m[6]!) +
    m[2]! * (m[3]! * m[7]! - m[4]! * m[6]!);
  const d = det([s4, s3, s2, s3, s2, s1, s2, s1, s0]);
  const a = det([t2, s3, s2, t1, s2, s1, t0, s1, s0]) / d;
  const b = det([s4, t2, s2, s3, t1, s1, s2, t0, s0]) / d;
  const c = det([s4, s3, t2, s3, s2, t1, s2, s1, t0]) / d;
  return { a: a / (scale * scale), b: b / scale, c };
}

export function evalQuadratic(q: Quadratic, x: number): number {
  return (q.a * x + q.b) * x + q.c;
}
