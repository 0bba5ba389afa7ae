/** Tool name recorded when the output's tool could not be identified. */
export const UNKNOWN_TOOL = "unknown";

export interface ToolSample {
  tool: string;
  durationS: number;
}

interface UnconsumedFinish {
  tool: string;
  finishedS: number;
}

function requireFiniteTime(nowS: number): void {
  if (!Number.isFinite(nowS)) throw new RangeError(`time must be finite, got ${nowS}`);
}

/**
 * Measures tool-call durations per agent program, as in the CacheTTL paper: a tool call lasts from
 * the finish of the request that issued it to the program's next arrival.
 */
export class ToolCallTracker {
  // Only programs whose latest finish still awaits the next arrival are held, so memory follows the
  // number of programs currently inside a tool call.
  private readonly unconsumedFinishes = new Map<string, UnconsumedFinish>();

  /** A request of `programId` finished at nowS having called `tool` (null: unknown/no tool). */
  onRequestFinished(programId: string, tool: string | null, nowS: number): void {
    requireFiniteTime(nowS);
    this.unconsumedFinishes.set(programId, { tool: tool ?? UNKNOWN_TOOL, finishedS: nowS });
  }

  /** A request of `programId` arrived at nowS. Returns the measured sample of the previous tool call, or null. */
  onRequestArrived(programId: string, nowS: number): ToolSample | null {
    requireFiniteTime(nowS);
    const finish = this.unconsumedFinishes.get(programId);
    if (!finish) return null;
    this.unconsumedFinishes.delete(programId);
    // Finish and arrival can come from different clocks; a skewed pair means "no measurable wait".
    return { tool: finish.tool, durationS: Math.max(0, nowS - finish.finishedS) };
  }

  /** Forget a program (its last step finished or it was aborted). */
  forgetProgram(programId: string): void {
    this.unconsumedFinishes.delete(programId);
  }

  /** Number of programs currently tracked (bounded-memory check). */
  get trackedPrograms(): number {
    return this.unconsumedFinishes.size;
  }
}
