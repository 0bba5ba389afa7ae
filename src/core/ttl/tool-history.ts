import { EmpiricalDurations } from "./empirical-durations.js";

/** Bucket that receives the samples of every tool name seen after the distinct-tool limit was reached. */
export const OVERFLOW_TOOL = "other";
/** Tool names come from model output; longer names are cut so a map key cannot be arbitrarily large. */
export const MAX_TOOL_NAME_CHARS = 256;

interface ToolRecord {
  durations: EmpiricalDurations;
  recorded: number;
  /** sum of every sample ever recorded (the window forgets; the fork's plain mean does not) */
  totalS: number;
}

export interface ToolHistoryOptions {
  /** Samples kept per tool (and globally). */
  sampleWindow?: number;
  /** Distinct tool names tracked before new names fold into OVERFLOW_TOOL. */
  maxTools?: number;
}

/** The paper's S (global) and S[f] (per tool): recent tool-call durations in seconds. */
export class ToolHistory {
  private readonly sampleWindow: number;
  private readonly maxTools: number;
  private readonly byTool = new Map<string, ToolRecord>();
  private readonly all: EmpiricalDurations;
  private recordedTotal = 0;
  private totalS = 0;

  constructor(opts: ToolHistoryOptions = {}) {
    this.sampleWindow = opts.sampleWindow ?? 4096;
    this.maxTools = opts.maxTools ?? 1024;
    if (!Number.isInteger(this.maxTools) || this.maxTools < 1) {
      throw new RangeError(`maxTools must be a positive integer, got ${this.maxTools}`);
    }
    this.all = new EmpiricalDurations(this.sampleWindow);
  }

  record(tool: string, durationS: number): void {
    // The global window validates the duration first, so a rejected sample creates no bucket.
    this.all.add(durationS);
    const key = this.keyFor(tool);
    let entry = this.byTool.get(key);
    if (entry === undefined) {
      entry = { durations: new EmpiricalDurations(this.sampleWindow), recorded: 0, totalS: 0 };
      this.byTool.set(key, entry);
    }
    entry.durations.add(durationS);
    entry.recorded++;
    entry.totalS += durationS;
    this.recordedTotal++;
    this.totalS += durationS;
  }

  /** Plain mean of every sample ever recorded for `tool`'s bucket; undefined before the first. */
  meanS(tool: string): number | undefined {
    const entry = this.byTool.get(this.keyFor(tool));
    return entry ? entry.totalS / entry.recorded : undefined;
  }

  /** Plain mean of every sample ever recorded, across tools; undefined before the first. */
  globalMeanS(): number | undefined {
    return this.recordedTotal > 0 ? this.totalS / this.recordedTotal : undefined;
  }

  /** Window of the bucket `tool`'s samples go to (OVERFLOW_TOOL once the limit is reached); undefined if none yet. */
  forTool(tool: string): EmpiricalDurations | undefined {
    return this.byTool.get(this.keyFor(tool))?.durations;
  }

  get global(): EmpiricalDurations {
    return this.all;
  }

  /** Samples ever recorded, across all tools (not capped by the window). */
  get totalRecorded(): number {
    return this.recordedTotal;
  }

  /** Samples ever recorded into `tool`'s bucket (not capped by the window). */
  recordedFor(tool: string): number {
    return this.byTool.get(this.keyFor(tool))?.recorded ?? 0;
  }

  private keyFor(tool: string): string {
    const name = tool.length > MAX_TOOL_NAME_CHARS ? tool.slice(0, MAX_TOOL_NAME_CHARS) : tool;
    // OVERFLOW_TOOL is not counted against the limit, so at most maxTools + 1 buckets exist.
    if (
      this.byTool.has(name) ||
      this.byTool.size - (this.byTool.has(OVERFLOW_TOOL) ? 1 : 0) < this.maxTools
    ) {
      return name;
    }
    return OVERFLOW_TOOL;
  }
}
