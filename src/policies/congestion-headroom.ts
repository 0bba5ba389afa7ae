import { CONCUR_DEFAULTS } from "./admission-control/concur.js";
import { Ticks } from "./admission-control/ticks.js";

/**
 * CONCUR's congestion control (arXiv 2601.22705; `concur.ts`) turned on working-set admission's own forecast:
 * a factor on the memory admission may fill, learned from what the cache then does. Each control interval
 * compares what returning turns found of the prefix their previous turn left (the reusable tokens) with what
 * they had to make again: recomputed tokens, and reloaded ones priced at a reload over a recompute. When
 * more than CONCUR's hit drop of it was made again (thrash: the forecast let in more than memory holds), the
 * factor falls to CONCUR's decrease of itself or of the share the working set filled, the smaller (CONCUR
 * halves the window or the active agents), once the previous decrease has taken effect; when new programs were held without thrash while the KV pool stayed under CONCUR's saturation
 * (the forecast held back more than memory needed), it grows by one program's share of the memory, CONCUR's
 * additive increase of one agent. Its constants are
 * CONCUR_DEFAULTS', whose sources concur.ts names.
 */
export class CongestionHeadroom {
  /** multiplies the memory admission may fill; starts at the forecast as it is */
  factor = 1;
  private readonly ticks = new Ticks(CONCUR_DEFAULTS.intervalS);
  private reusableTokens = 0;
  private remadeTokens = 0;
  private heldNewProgram = false;
  /** the most of the KV pool running turns and pins held in the interval */
  private peakUsage = 0;
  /** a decrease waits until the working set is within the factor the previous one set */
  private awaitingDecrease = false;
  /** the working set over the memory at the latest admission check (none yet: unknown), one program's mean share */
  private filledShare = Number.POSITIVE_INFINITY;
  private programShare = 0;
  /** every interval's decision, for tests and reports */
  readonly history: { atS: number; remadeShare: number | null; factor: number }[] = [];

  /** Runs the intervals that ended by nowS. */
  advance(nowS: number): void {
    this.ticks.catchUp(nowS, (atS) => this.tick(atS));
  }

  /** A returning turn was served: of the `reusable` tokens its previous turn left, `remade` were made again. */
  observeTurn(reusable: number, remade: number): void {
    this.reusableTokens += reusable;
    this.remadeTokens += Math.min(reusable, remade);
  }

  /** The share of the KV pool running turns and pins hold now. */
  observeUsage(share: number): void {
    this.peakUsage = Math.max(this.peakUsage, share);
  }

  /** An admission check: the working set's and one program's share of the memory, and its verdict. */
  observeAdmission(filledShare: number, programShare: number, admitted: boolean): void {
    this.filledShare = filledShare;
    this.programShare = programShare;
    if (!admitted) this.heldNewProgram = true;
  }

  private tick(atS: number): void {
    const remadeShare = this.reusableTokens > 0 ? this.remadeTokens / this.reusableTokens : null;
    const thrashing = remadeShare !== null && remadeShare > CONCUR_DEFAULTS.hitDrop;
    if (this.awaitingDecrease && this.filledShare <= this.factor) this.awaitingDecrease = false;
    if (thrashing && !this.awaitingDecrease) {
      this.factor = Math.max(
        this.programShare,
        CONCUR_DEFAULTS.decrease * Math.min(this.factor, this.filledShare),
      );
      this.awaitingDecrease = true;
    } else if (!thrashing && this.heldNewProgram && this.peakUsage < CONCUR_DEFAULTS.usageHigh) {
      this.factor += CONCUR_DEFAULTS.increase * this.programShare;
    }
    this.history.push({ atS, remadeShare, factor: this.factor });
    if (this.history.length > MAX_HISTORY) this.history.splice(0, this.history.length - MAX_HISTORY);
    this.reusableTokens = 0;
    this.remadeTokens = 0;
    this.heldNewProgram = false;
    this.peakUsage = 0;
  }
}

const MAX_HISTORY = 100_000;
