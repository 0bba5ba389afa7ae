/** KV a program keeps resident while its tool runs. */
export interface Pin {
  readonly programId: string;
  readonly requestId: string;
  readonly blockIds: readonly number[];
  readonly tokens: number;
  readonly pinnedS: number;
  readonly ttlS: number;
  readonly expiresS: number;
}

const ANONYMOUS_PREFIX = "anonymous:";

/** The program of a request sent without a program id: a program of its own, named after the request. */
export function anonymousProgramId(requestId: string): string {
  return `${ANONYMOUS_PREFIX}${requestId}`;
}

export function isAnonymousProgramId(programId: string): boolean {
  return programId.startsWith(ANONYMOUS_PREFIX);
}

/** An agent program (job): the sequence of requests sharing a program id. */
export class Program {
  readonly id: string;
  readonly firstArrivalS: number;
  numArrived = 0;
  numFinished = 0;
  /** requests of this program currently waiting (overlapping requests are allowed) */
  numWaiting = 0;
  numRunning = 0;
  pin: Pin | null = null;
  /** Autellix: service time of finished requests plus time run by live ones */
  attainedServiceS = 0;
  lastFinishS: number | null = null;
  /**
   * The tool its latest finished turn called; null when that turn called none (an answer, perhaps its
   * last, from a client that never says is_last_step) or before a turn finished.
   */
  lastTurnTool: string | null = null;
  ended = false;
  /** tokens of the program's conversation so far: its latest turn's prompt, plus the output once it ran */
  contextTokens = 0;
  /** seconds between turns during which none of its KV was held (no request in flight, no pin) */
  unheldS = 0;
  /** since when its KV is not held, while between turns without a pin */
  unheldSinceS: number | null = null;
  /** prompt tokens of its turns once scheduled, and the part of them whose KV was reused */
  promptTokensServed = 0;
  cachedTokensServed = 0;
  /**
   * The prefix hashes of every full block of its latest finished turn's prompt + output, which the next
   * turn's prompt is measured against (the recorder's reusable prefix); null before a turn finished, once
   * the program ended, and when nothing is recorded.
   */
  lastTurnBlockHashes: Float64Array | null = null;

  /**
   * Its place among the programs this scheduler has seen, by first arrival: larger for a later program,
   * and of programs that arrive at the same instant (a batch) larger for the one seen later. Program-level
   * FCFS orders by it, so a batch is still served first come, first served.
   */
  readonly arrivalOrder: number;

  constructor(id: string, firstArrivalS: number, arrivalOrder = 0) {
    this.id = id;
    this.firstArrivalS = firstArrivalS;
    this.arrivalOrder = arrivalOrder;
  }
}
