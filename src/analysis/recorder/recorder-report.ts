import type { RecorderEventKind } from "../../core/recorder/events.js";
import { type Summary, summarize } from "../stats.js";

/** The part of a recorder event the analysis needs; both log formats are read into this. */
export type LogEntry =
  | {
      kind: Exclude<RecorderEventKind, "waiting_to_running" | "evicted_to_running">;
      programId: string;
      requestId: string;
      timeS: number;
    }
  | {
      kind: "waiting_to_running" | "evicted_to_running";
      programId: string;
      requestId: string;
      timeS: number;
      promptTokens: number;
      hitTokens: number;
    };

export type LogFormat = "jsonl" | "fork";

/** analyze.py's job statistics. A job counts only once it has both an arrival and a departure. */
export interface JobDurationStats {
  numJobs: number;
  averageS: number;
  medianS: number;
  p95S: number;
  p99S: number;
  minS: number;
  maxS: number;
  /** Latest departure minus earliest arrival over every job. */
  totalDurationS: number;
}

export interface CacheStats {
  /** waiting_to_running plus evicted_to_running events. */
  admissions: number;
  admissionsAfterPreemption: number;
  promptTokens: number;
  hitTokens: number;
  /** hitTokens / promptTokens, 0 when nothing was admitted. */
  hitRatio: number;
  /** Prompt tokens that still had to be prefilled (prompt minus hit). */
  prefillTokens: number;
  /** Per admission 1 - (prompt - hit) / prompt; admissions with an empty prompt are skipped. */
  prefillSavings: Summary;
}

export interface EventCounts {
  arrivals: number;
  departures: number;
  preemptions: number;
  pins: number;
  unpins: number;
  /** null when the log format cannot record the event (the fork's format has no such keys). */
  evictions: number | null;
  offloads: number | null;
  reloads: number | null;
  aborts: number | null;
}

export interface RecorderReport {
  format: LogFormat;
  jobs: JobDurationStats;
  /** JCT (max departure - min arrival) of every complete job. */
  jctByJobS: Record<string, number>;
  cache: CacheStats;
  /** waiting_to_running minus the arrival of the same request. */
  queueWaitS: Summary;
  /** unpinned minus the program's open pinned time. */
  pinDurationS: Summary;
  counts: EventCounts;
}

function requestKey(entry: LogEntry): string {
  return `${entry.programId}\u0000${entry.requestId}`;
}

interface JobSpan {
  firstArrivalS: number;
  lastDepartureS: number;
}

/** Folds log entries, in recording order, into a RecorderReport. */
export class ReportBuilder {
  private readonly spans = new Map<string, JobSpan>();
  // Keyed by program and request; an entry lives from arrival to departure or abort.
  private readonly arrivalS = new Map<string, number>();
  private readonly openPinS = new Map<string, number>();
  private readonly queueWaits: number[] = [];
  private readonly pinDurations: number[] = [];
  private readonly savings: number[] = [];
  private promptTokens = 0;
  private hitTokens = 0;
  private admissionsAfterPreemption = 0;
  private readonly counts = new Map<RecorderEventKind, number>();

  constructor(private readonly format: LogFormat) {}

  add(entry: LogEntry): void {
    this.counts.set(entry.kind, (this.counts.get(entry.kind) ?? 0) + 1);
    switch (entry.kind) {
      case "arrival": {
        const span = this.span(entry.programId);
        span.firstArrivalS = Math.min(span.firstArrivalS, entry.timeS);
        this.arrivalS.set(requestKey(entry), entry.timeS);
        return;
      }
      case "departure": {
        const span = this.span(entry.programId);
        span.lastDepartureS = Math.max(span.lastDepartureS, entry.timeS);
        this.arrivalS.delete(requestKey(entry));
        return;
      }
      case "aborted":
        this.arrivalS.delete(requestKey(entry));
        return;
      case "waiting_to_running":
      case "evicted_to_running": {
        this.promptTokens += entry.promptTokens;
        this.hitTokens += entry.hitTokens;
        if (entry.promptTokens > 0)
          this.savings.push(1 - (entry.promptTokens - entry.hitTokens) / entry.promptTokens);
        if (entry.kind === "evicted_to_running") {
          this.admissionsAfterPreemption++;
          return;
        }
        const arrivedS = this.arrivalS.get(requestKey(entry));
        if (arrivedS !== undefined) this.queueWaits.push(entry.timeS - arrivedS);
        return;
      }
      case "pinned":
        this.openPinS.set(entry.programId, entry.timeS);
        return;
      case "unpinned": {
        const pinnedS = this.openPinS.get(entry.programId);
        if (pinnedS === undefined) return;
        this.pinDurations.push(entry.timeS - pinnedS);
        this.openPinS.delete(entry.programId);
        return;
      }
      default:
        return;
    }
  }

  build(): RecorderReport {
    const jctByJobS: Record<string, number> = {};
    let firstArrivalS = Number.POSITIVE_INFINITY;
    let lastDepartureS = Number.NEGATIVE_INFINITY;
    for (const [jobId, span] of this.spans) {
      firstArrivalS = Math.min(firstArrivalS, span.firstArrivalS);
      lastDepartureS = Math.max(lastDepartureS, span.lastDepartureS);
      if (Number.isFinite(span.firstArrivalS) && Number.isFinite(span.lastDepartureS)) {
        jctByJobS[jobId] = span.lastDepartureS - span.firstArrivalS;
      }
    }
    const jct = summarize(Object.values(jctByJobS));
    const haveSpan = Number.isFinite(firstArrivalS) && Number.isFinite(lastDepartureS);
    const count = (kind: RecorderEventKind): number => this.counts.get(kind) ?? 0;
    const unlessFork = (kind: RecorderEventKind): number | null =>
      this.format === "fork" ? null : count(kind);

    return {
      format: this.format,
      jobs: {
        numJobs: jct.count,
        averageS: jct.mean,
        medianS: jct.p50,
        p95S: jct.p95,
        p99S: jct.p99,
        minS: jct.min,
        maxS: jct.max,
        totalDurationS: haveSpan ? lastDepartureS - firstArrivalS : 0,
      },
      jctByJobS,
      cache: {
        admissions: count("waiting_to_running") + count("evicted_to_running"),
        admissionsAfterPreemption: this.admissionsAfterPreemption,
        promptTokens: this.promptTokens,
        hitTokens: this.hitTokens,
        hitRatio: this.promptTokens === 0 ? 0 : this.hitTokens / this.promptTokens,
        prefillTokens: this.promptTokens - this.hitTokens,
        prefillSavings: summarize(this.savings),
      },
      queueWaitS: summarize(this.queueWaits),
      pinDurationS: summarize(this.pinDurations),
      counts: {
        arrivals: count("arrival"),
        departures: count("departure"),
        preemptions: count("preempted"),
        pins: count("pinned"),
        unpins: count("unpinned"),
        evictions: unlessFork("evicted"),
        offloads: unlessFork("offloaded"),
        reloads: unlessFork("reloaded"),
        aborts: unlessFork("aborted"),
      },
    };
  }

  private span(jobId: string): JobSpan {
    let span = this.spans.get(jobId);
    if (!span) {
      span = { firstArrivalS: Number.POSITIVE_INFINITY, lastDepartureS: Number.NEGATIVE_INFINITY };
      this.spans.set(jobId, span);
    }
    return span;
  }
}
