/**
 * Chained block hashes: a full block's hash covers its tokens and, through its parent's hash, every token
 * before it, so equal hashes mean equal prefixes. 52-bit values from two 32-bit lanes (collision odds are
 * negligible at the pool sizes served here), kept as plain numbers so maps and typed arrays stay cheap.
 */
const LANE = 0x100000;

export const ROOT_HASH = 0;

function mixLane(h: number, value: number, multiplier: number): number {
  let x = Math.imul(h ^ value, multiplier);
  x ^= x >>> 15;
  x = Math.imul(x, 0x2c1b3c6d);
  return (x ^ (x >>> 12)) >>> 0;
}

/** Combines a parent hash with one more value (a token id or any salt). */
export function extendHash(parentHash: number, value: number): number {
  // >>> 0 takes an integer double modulo 2^32 without the slow floating-point remainder.
  const lo = parentHash >>> 0;
  const hi = (parentHash / 0x100000000) >>> 0;
  const nextLo = mixLane(lo ^ Math.imul(hi, 0x9e3779b1), value, 0x85ebca6b);
  const nextHi = mixLane(hi ^ nextLo, value ^ 0x5bd1e995, 0xc2b2ae35) & (LANE - 1);
  return nextHi * 0x100000000 + nextLo;
}

/** Hash of the block holding tokens[start, end) after a parent block with hash parentHash. */
export function hashTokenBlock(
  parentHash: number,
  tokens: ArrayLike<number>,
  start: number,
  end: number,
): number {
  let h = extendHash(parentHash, end - start);
  for (let i = start; i < end; i++) h = extendHash(h, tokens[i] as number);
  return h === ROOT_HASH ? 1 : h;
}

/** A hash-chain root of its own for a salt: blocks under different salts never match. */
export function saltedRootHash(salt: string): number {
  let h = extendHash(ROOT_HASH, salt.length);
  for (let i = 0; i < salt.length; i++) h = extendHash(h, salt.charCodeAt(i));
  return h === ROOT_HASH ? 1 : h;
}
