import type { EngineMetrics, EngineService } from "../engine/engine-api.js";
import type { DoneEvent } from "./generation.js";

/** One point of the dashboard's time series: what happened in the second before `timeS`. */
export interface HistoryPoint {
  /** unix seconds */
  readonly timeS: number;
  readonly running: number;
  readonly waiting: number;
  /** requests finished per second */
  readonly finishedPerS: number;
  /** over the requests finished in the last WINDOW_S seconds (null: none) */
  readonly ttftP50S: number | null;
  readonly ttftP99S: number | null;
  readonly latencyP50S: number | null;
  readonly latencyP99S: number | null;
  /** job completion time (first request to last step) of the programs that ended in the last JCT_WINDOW_S */
  readonly jctP50S: number | null;
  readonly jctP99S: number | null;
  /** prompt tokens reused / prompt tokens scheduled in the last second (null: nothing scheduled) */
  readonly hitRatio: number | null;
  readonly pinsCreated: number;
  readonly pinsExpired: number;
  readonly pinsSacrificed: number;
}

/** Seconds of history kept (one point a second). */
export const HISTORY_S = 600;
/** Percentiles are over requests finished in this many seconds, so a quiet second still shows a value. */
const WINDOW_S = 30;
/** Programs end far less often than requests: their JCT percentiles look back five minutes. */
const JCT_WINDOW_S = 300;

function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

/**
 * The last ten minutes of a server, sampled once a second from the engine's counters and the requests
 * the server finished: what `/dashboard/state` reports beside the engine's snapshot.
 */
export class DashboardHistory {
  private readonly points: HistoryPoint[] = [];
  private finished: { timeS: number; ttftS: number | null; e2eS: number }[] = [];
  private ended: { timeS: number; jctS: number }[] = [];
  private previous: EngineMetrics | null = null;
  private finishedSince = 0;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly engine: EngineService,
    private readonly nowS: () => number = () => Date.now() / 1000,
  ) {}

  start(): void {
    this.timer ??= setInterval(() => this.sample(), 1000);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  observeDone(done: DoneEvent): void {
    this.finished.push({ timeS: this.nowS(), ttftS: done.ttftS, e2eS: done.e2eS });
    if (done.programJctS !== null) this.ended.push({ timeS: this.nowS(), jctS: done.programJctS });
    this.finishedSince++;
  }

  /** Takes one point (the timer does, once a second). */
  sample(): void {
    const now = this.nowS();
    const m = this.engine.metrics();
    const p = this.previous;
    const delta = (pick: (x: EngineMetrics) => number) => (p ? pick(m) - pick(p) : 0);
    this.finished = this.finished.filter((f) => f.timeS > now - WINDOW_S);
    const ttfts = this.finished
      .map((f) => f.ttftS)
      .filter((t): t is number => t !== null)
      .sort((a, b) => a - b);
    const latencies = this.finished.map((f) => f.e2eS).sort((a, b) => a - b);
    this.ended = this.ended.filter((e) => e.timeS > now - JCT_WINDOW_S);
    const jcts = this.ended.map((e) => e.jctS).sort((a, b) => a - b);
    const queried = delta((x) => x.prefixQueryTokens);
    const last = this.points.at(-1);
    const elapsedS = last ? Math.max(1e-3, now - last.timeS) : 1;
    this.points.push({
      timeS: now,
      running: m.running,
      waiting: m.waiting,
      finishedPerS: this.finishedSince / elapsedS,
      ttftP50S: quantile(ttfts, 0.5),
      ttftP99S: quantile(ttfts, 0.99),
      latencyP50S: quantile(latencies, 0.5),
      latencyP99S: quantile(latencies, 0.99),
      jctP50S: quantile(jcts, 0.5),
      jctP99S: quantile(jcts, 0.99),
      hitRatio: queried > 0 ? delta((x) => x.prefixHitTokens) / queried : null,
      pinsCreated: delta((x) => x.pinsCreated),
      pinsExpired: delta((x) => x.pinsExpired),
      pinsSacrificed: delta((x) => x.pinsSacrificed),
    });
    if (this.points.length > HISTORY_S) this.points.shift();
    this.finishedSince = 0;
    this.previous = m;
  }

  get history(): readonly HistoryPoint[] {
    return this.points;
  }
}
