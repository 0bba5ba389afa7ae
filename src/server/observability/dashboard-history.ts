import type { EngineMetrics, EngineService, FinishReason } from "../../engine/engine-api.js";
import type { DoneEvent } from "../generation/generation.js";

/** One point of the dashboard's time series: what happened in the second before `timeS`. */
export interface HistoryPoint {
  /** unix seconds */
  readonly timeS: number;
  readonly running: number;
  readonly waiting: number;
  /** programs holding a pin now */
  readonly pinnedPrograms: number;
  /** requests finished per second */
  readonly finishedPerS: number;
  /** prompt tokens of the requests scheduled, the part of them whose KV was reused, and tokens generated, per second */
  readonly promptTokensPerS: number;
  readonly cachedTokensPerS: number;
  readonly generatedTokensPerS: number;
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

/** Seconds of history kept (one point a second): an hour, 3600 points whatever the load. */
export const HISTORY_S = 3600;
/** Percentiles are over requests finished in this many seconds, so a quiet second still shows a value. */
const WINDOW_S = 30;
/** Programs end far less often than requests: their JCT percentiles look back five minutes. */
const JCT_WINDOW_S = 300;
/** Distributions and finish reasons are counted per minute, over the last hour. */
const MINUTE_S = 60;
const DISTRIBUTION_MINUTES = 60;

/** Upper bounds (seconds) of the latency histograms' buckets: 1 ms to 1000 s, four per decade. */
export const LATENCY_BUCKETS_S: readonly number[] = Array.from({ length: 25 }, (_, i) =>
  Number((10 ** (-3 + i / 4)).toPrecision(3)),
);

const FINISH_REASONS: readonly FinishReason[] = ["stop", "length", "abort", "kv_capacity"];

/** Requests by TTFT, by inter-token latency, programs by JCT (bucket counts), requests by finish reason. */
export interface Distributions {
  /** seconds the counts cover, back from now */
  readonly windowS: number;
  readonly bucketsS: readonly number[];
  readonly ttft: readonly number[];
  /** each request's mean time between its output tokens (requests with at least two) */
  readonly itl: readonly number[];
  readonly jct: readonly number[];
  readonly finishReasons: Readonly<Record<FinishReason, number>>;
}

interface MinuteCounts {
  readonly minute: number;
  readonly ttft: number[];
  readonly itl: number[];
  readonly jct: number[];
  readonly finishReasons: Record<FinishReason, number>;
}

/** The bucket of a latency: the first whose upper bound holds it, the last for anything longer. */
export function latencyBucket(seconds: number): number {
  const i = LATENCY_BUCKETS_S.findIndex((bound) => seconds <= bound);
  return i < 0 ? LATENCY_BUCKETS_S.length - 1 : i;
}

function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

/**
 * The last hour of a server, sampled once a second from the engine's counters and the requests the
 * server finished, and its latency distributions and finish reasons counted per minute: what
 * `/dashboard/state` reports beside the engine's snapshot. Memory is bounded by the hour, not the load.
 */
export class DashboardHistory {
  private readonly points: HistoryPoint[] = [];
  private finished: { timeS: number; ttftS: number | null; e2eS: number }[] = [];
  private ended: { timeS: number; jctS: number }[] = [];
  private readonly minutes: MinuteCounts[] = [];
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
    const now = this.nowS();
    this.finished.push({ timeS: now, ttftS: done.ttftS, e2eS: done.e2eS });
    if (done.programJctS !== null) this.ended.push({ timeS: now, jctS: done.programJctS });
    this.finishedSince++;
    const counts = this.minuteAt(now);
    counts.finishReasons[done.finishReason]++;
    if (done.ttftS !== null) {
      counts.ttft[latencyBucket(done.ttftS)]!++;
      const tokens = done.usage.completionTokens;
      if (tokens > 1) counts.itl[latencyBucket((done.e2eS - done.ttftS) / (tokens - 1))]!++;
    }
    if (done.programJctS !== null) counts.jct[latencyBucket(done.programJctS)]!++;
  }

  /** Takes one point (the timer does, once a second). */
  sample(): void {
    const now = this.nowS();
    const m = this.engine.metrics();
    const p = this.previous;
    const last = this.points.at(-1);
    const elapsedS = last ? Math.max(1e-3, now - last.timeS) : 1;
    const delta = (pick: (x: EngineMetrics) => number) => (p ? pick(m) - pick(p) : 0);
    const rate = (pick: (x: EngineMetrics) => number) => delta(pick) / elapsedS;
    this.finished = this.finished.filter((f) => f.timeS > now - WINDOW_S);
    const ttfts = this.finished
      .map((f) => f.ttftS)
      .filter((t): t is number => t !== null)
      .sort((a, b) => a - b);
    const latencies = this.finished.map((f) => f.e2eS).sort((a, b) => a - b);
    this.ended = this.ended.filter((e) => e.timeS > now - JCT_WINDOW_S);
    const jcts = this.ended.map((e) => e.jctS).sort((a, b) => a - b);
    const queried = delta((x) => x.prefixQueryTokens);
    this.points.push({
      timeS: now,
      running: m.running,
      waiting: m.waiting,
      pinnedPrograms: m.pinnedPrograms,
      finishedPerS: this.finishedSince / elapsedS,
      promptTokensPerS: rate((x) => x.prefixQueryTokens),
      cachedTokensPerS: rate((x) => x.prefixHitTokens),
      generatedTokensPerS: rate((x) => x.generatedTokens),
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

  /** The points taken after `timeS` (a page that already holds the earlier ones asks only for these). */
  since(timeS: number): readonly HistoryPoint[] {
    let lo = 0;
    let hi = this.points.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((this.points[mid] as HistoryPoint).timeS <= timeS) lo = mid + 1;
      else hi = mid;
    }
    return this.points.slice(lo);
  }

  /** TTFT, inter-token latency and JCT histograms and finish reasons over the last hour. */
  distributions(): Distributions {
    const minute = Math.floor(this.nowS() / MINUTE_S);
    const recent = this.minutes.filter((m) => m.minute > minute - DISTRIBUTION_MINUTES);
    const sum = (pick: (m: MinuteCounts) => readonly number[]) =>
      LATENCY_BUCKETS_S.map((_, i) => recent.reduce((total, m) => total + (pick(m)[i] as number), 0));
    return {
      windowS: DISTRIBUTION_MINUTES * MINUTE_S,
      bucketsS: LATENCY_BUCKETS_S,
      ttft: sum((m) => m.ttft),
      itl: sum((m) => m.itl),
      jct: sum((m) => m.jct),
      finishReasons: Object.fromEntries(
        FINISH_REASONS.map((reason) => [reason, recent.reduce((n, m) => n + m.finishReasons[reason], 0)]),
      ) as Record<FinishReason, number>,
    };
  }

  /** This minute's counts, opened when the first request of the minute finishes; an hour's are kept. */
  private minuteAt(nowS: number): MinuteCounts {
    const minute = Math.floor(nowS / MINUTE_S);
    const last = this.minutes.at(-1);
    if (last?.minute === minute) return last;
    const zeros = () => LATENCY_BUCKETS_S.map(() => 0);
    const counts: MinuteCounts = {
      minute,
      ttft: zeros(),
      itl: zeros(),
      jct: zeros(),
      finishReasons: { stop: 0, length: 0, abort: 0, kv_capacity: 0 },
    };
    this.minutes.push(counts);
    while ((this.minutes[0] as MinuteCounts).minute <= minute - DISTRIBUTION_MINUTES) this.minutes.shift();
    return counts;
  }
}
