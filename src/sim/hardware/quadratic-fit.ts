import { fitQuadratic as fitPoints } from "../../core/ttl/prefill-reload.js";

export interface Quadratic {
  a: number;
  b: number;
  c: number;
}

/** Least-squares y = a x^2 + b x + c through at least three points with distinct x (the core's fit). */
export function fitQuadratic(xs: readonly number[], ys: readonly number[]): Quadratic {
  if (xs.length !== ys.length)
    throw new Error(`fitQuadratic: ${xs.length} x values but ${ys.length} y values`);
  if (new Set(xs).size < 3) throw new Error("fitQuadratic needs at least three distinct x values");
  return fitPoints(xs.map((x, i) => ({ x, y: ys[i] ?? 0 })));
}

export function evalQuadratic(q: Quadratic, x: number): number {
  return (q.a * x + q.b) * x + q.c;
}
