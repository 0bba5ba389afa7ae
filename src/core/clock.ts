/** Time source for the core. Nothing in core reads wall time except through a Clock. Seconds, monotonic. */
export interface Clock {
  nowS(): number;
}

/** Monotonic wall clock for serving (performance.now based, seconds since process start). */
export class RealClock implements Clock {
  nowS(): number {
    return performance.now() / 1000;
  }
}

/** Clock driven by a discrete-event loop. Time only moves forward. */
export class VirtualClock implements Clock {
  private timeS: number;

  constructor(startS = 0) {
    this.timeS = startS;
  }

  nowS(): number {
    return this.timeS;
  }

  advanceTo(timeS: number): void {
    if (timeS < this.timeS) throw new Error(`VirtualClock cannot go back from ${this.timeS} to ${timeS}`);
    this.timeS = timeS;
  }
}
