/**
 * Seeded pseudo-random numbers (mulberry32 on a 32-bit state). Every simulated run draws from one Rng
 * built from its seed, never from Math.random, so the same seed reproduces the same run.
 */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0 || 0x9e3779b9;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Integer in [lo, hi] inclusive. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  exponential(mean: number): number {
    return -Math.log(1 - this.next()) * mean;
  }

  /** Standard normal (Box-Muller). */
  normal(mean = 0, std = 1): number {
    const u = 1 - this.next();
    const v = this.next();
    return mean + std * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  }

  /** Lognormal with the given arithmetic mean and standard deviation of the resulting variable. */
  lognormal(mean: number, std: number): number {
    const sigma2 = Math.log(1 + (std * std) / (mean * mean));
    const mu = Math.log(mean) - sigma2 / 2;
    return Math.exp(this.normal(mu, Math.sqrt(sigma2)));
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("Rng.pick on an empty list");
    return items[Math.floor(this.next() * items.length)] as T;
  }

  /** A derived, independent stream (for giving each component its own sequence from one seed). */
  fork(): Rng {
    return new Rng(Math.floor(this.next() * 4294967296));
  }
}
