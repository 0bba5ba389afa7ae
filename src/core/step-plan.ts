import type { TierName } from "./kv/offload-tiers.js";
import type { SeqOp } from "./kv/sequences/seq-ops.js";
import type { Request } from "./request.js";

/** One sequence's work in a step: compute tokens [startToken, startToken + numTokens) of its sequence. */
export interface ScheduledChunk {
  readonly request: Request;
  readonly startToken: number;
  readonly numTokens: number;
  /** the chunk reaches the end of the sequence, so a token is sampled after it */
  readonly samples: boolean;
  /** tokens already in KV that this chunk attends to (for latency models) */
  readonly contextTokens: number;
  /** the executor's sequence the chunk computes into (llama-seq spec; null for paged) */
  readonly seq: number | null;
}

/** KV moved back from an offload tier at admission; the executor pays the transfer. */
export interface Reload {
  readonly request: Request;
  readonly tokens: number;
  readonly tier: TierName;
}

export type ReleaseReason =
  | "finished"
  | "expired"
  | "reused"
  | "last_step"
  | "victim"
  | "preempted"
  | "aborted";

/**
 * KV the executor may drop: a sequence no longer held by a running request (holder "request": the
 * request's own KV) or by its program's pin (holder "pin": the pin made from that request).
 */
export interface KvRelease {
  readonly requestId: string;
  readonly programId: string;
  readonly holder: "request" | "pin";
  readonly reason: ReleaseReason;
  readonly tokens: number;
}

/** A finished request's KV kept for its program: the executor keeps the request's sequence resident. */
export interface KvPinned {
  readonly requestId: string;
  readonly programId: string;
  readonly tokens: number;
  readonly expiresS: number;
}

/**
 * KV changes: ownership (pins made first, then KV released: finishes, expired or sacrificed pins, aborts,
 * preemptions; a pin is always made before it is released), and the sequence ops that carry them out on a
 * llama-seq executor, in the order to apply them.
 */
export interface KvChanges {
  readonly pinned: readonly KvPinned[];
  readonly released: readonly KvRelease[];
  readonly ops: readonly SeqOp[];
}

/**
 * Everything one engine step must do, built once by Scheduler.schedule() and read by the executor.
 * Running requests come first in `chunks` (decodes and continuing prefills), then newly admitted ones.
 */
export interface StepPlan extends KvChanges {
  readonly stepIndex: number;
  readonly nowS: number;
  readonly chunks: readonly ScheduledChunk[];
  /** requests that left the waiting queue this step (their hits and reloads are set on the request) */
  readonly admitted: readonly Request[];
  readonly reloads: readonly Reload[];
  /** running requests pushed back to waiting; their KV is gone (recompute on return) */
  readonly preempted: readonly Request[];
  // pinned / released / ops (KvChanges): changes since the scheduler last handed them out; ops before the batch
  readonly numBatchedTokens: number;
}

/** One sampled token reported by the executor. */
export interface SampledToken {
  /** the model hit a stop condition (EOS or stop sequence); max_tokens is checked by the scheduler */
  readonly stop: boolean;
  /**
   * with the request's last token: the tool its output calls, as the serving side reads the model's text
   * (the scheduler never reads it); absent: not read (the simulator, or a turn whose client named its tool)
   */
  readonly tool?: string | null;
}

export interface StepResult {
  /** wall (or simulated) time the step took */
  readonly durationS: number;
  /** per request id, for chunks with samples = true; a missing entry means "not stopped" */
  readonly sampled?: ReadonlyMap<string, SampledToken>;
  /**
   * Tier entries the executor could not write or read (a disk error): the scheduler forgets them, and a
   * request of this step that was to be restored from one goes back to waiting to be computed afresh (its
   * chunk was not run).
   */
  readonly lostEntries?: ReadonlySet<number>;
  /**
   * Request ids the executor could not carry (a step that threw, a sampler it could not set up): their KV is
   * not trusted and their clients were told; update() ends them as aborted and counts none of their chunks.
   */
  readonly failed?: ReadonlySet<string>;
  /**
   * Request ids whose chunk the executor did not carry in this step and still holds (a gateway whose backend
   * has not produced the request's next token yet): update() leaves them as they were, and the next plan
   * schedules the same tokens again. Missing: every chunk was carried.
   */
  readonly held?: ReadonlySet<string>;
}
