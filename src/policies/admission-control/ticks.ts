import type { PolicyContext } from "../../core/policy.js";
import type { Request } from "../../core/request.js";

/**
 * A periodic controller tick (ThunderAgent's scheduler loop, CONCUR's control interval) run lazily: the
 * scheduler calls a policy only from its hooks, so each hook first runs every tick due by then, each at its
 * own boundary time. Between two hook calls nothing a tick reads changes but the clock, so this is the
 * periodic loop itself, and it needs no timer in either executor.
 */
export class Ticks {
  /** the next tick boundary, always after the latest time caught up to */
  nextS: number;

  constructor(readonly periodS: number) {
    if (!(periodS > 0)) throw new Error(`tick period must be > 0, got ${periodS}`);
    this.nextS = periodS;
  }

  /** Runs `tick(atS)` for every boundary atS <= nowS not yet run, oldest first. */
  catchUp(nowS: number, tick: (atS: number) => void): void {
    // After an idle spell of hours, the ticks before the last few see the same state: skip them.
    const behind = Math.floor((nowS - this.nextS) / this.periodS);
    if (behind > MAX_TICKS_CAUGHT_UP) this.nextS += (behind - MAX_TICKS_CAUGHT_UP) * this.periodS;
    while (this.nextS <= nowS) {
      const atS = this.nextS;
      this.nextS += this.periodS;
      tick(atS);
    }
  }
}

/** ticks run at most per catch-up (1000 x 5 s: 83 minutes); acting tokens have long decayed by then */
const MAX_TICKS_CAUGHT_UP = 1000;

/** The time of a hook call: a request added between steps may be newer than the context's clock. */
export function nowOf(ctx: PolicyContext, request: Request): number {
  return Math.max(ctx.nowS, request.arrivalS);
}
