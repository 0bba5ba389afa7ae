import type { ThinkingBudget } from "../engine-api.js";

/**
 * A request's thinking budget as its output grows: whether its thinking is open and unclosed (reading only
 * the text each token adds), when the budget is spent, and then the close's tokens one at a time.
 */
export class ThinkingBudgetWatch {
  private scanned = 0;
  private opened: boolean;
  private closed = false;
  /** the close's tokens still to write; null until the budget is spent */
  private queue: number[] | null = null;

  constructor(private readonly budget: ThinkingBudget) {
    this.opened = budget.open === null;
  }

  /** The token the next sample must be, or null. */
  get forced(): number | null {
    return this.queue?.[0] ?? null;
  }

  /**
   * After a token, with the output text so far and the tokens out: whether the next token's sampler changes
   * (the budget just spent, or a forced token written).
   */
  afterToken(text: string, produced: number, tokenize: (text: string) => Int32Array): boolean {
    if (this.queue !== null) {
      if (this.queue.length === 0) return false;
      this.queue.shift();
      return true;
    }
    this.read(text);
    if (this.closed || !this.opened || produced < this.budget.tokens) return false;
    this.queue = Array.from(tokenize(this.budget.close));
    return true;
  }

  private read(text: string): void {
    const open = this.budget.open ?? "";
    const close = this.budget.closedBy;
    // a tag may straddle what was read before and what came now
    const fresh = text.slice(Math.max(0, this.scanned - Math.max(open.length, close.length)));
    this.scanned = text.length;
    const openAt = this.opened ? 0 : fresh.indexOf(open);
    if (openAt < 0) return;
    this.opened = true;
    if (fresh.includes(close, openAt)) this.closed = true;
  }
}
