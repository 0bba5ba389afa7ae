import type { LogHistogram } from "./log-histogram.js";
import { percentile } from "./stats.js";

/**
 * AgentX's metrics (SemiAnalysis InferenceX, AIPerf's `inferencex-agentx-mvp` scenario) over the calls of
 * a closed-loop replay's measurement window: TPGS, interactivity at a P90 floor, TTFT and ITL percentiles,
 * theoretical against achieved prefix hit, context overflow, per-session JCT.
 */

/** Interactivity floor (output tokens/s per user) a run is read at unless told otherwise. */
export const DEFAULT_INTERACTIVITY_FLOOR = 50;

/** AgentX calls a run invalid when more than this share of its requests overflowed the context. */
export const OVERFLOW_INVALID_SHARE = 0.01;

/** One measured call of a replay. */
export interface MeasuredCall {
  /** the tree replay (session) it belongs to */
  readonly session: number;
  readonly sendS: number;
  readonly firstTokenS: number | null;
  readonly finishS: number | null;
  readonly input: number;
  readonly output: number;
  /** prompt tokens the server reused (its cached tokens) */
  readonly cachedTokens: number;
  /** prompt tokens an infinite cache keyed by the trace's block ids would hold */
  readonly theoreticalHitTokens: number;
  /** its prompt and output exceed the model's context: not served (a context-length error) */
  readonly overflow: boolean;
}

/** One session tree replayed in the window, for its JCT. */
export interface MeasuredSession {
  readonly startS: number;
  readonly endS: number | null;
  /** started at a warm start's t* (its JCT would be partial: left out) */
  readonly warm: boolean;
}

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
}

export interface AgentxMetrics {
  concurrency: number;
  duration_s: number;
  /** accelerators (GPUs) the tokens are divided by; CPU cores on the CPU engine */
  devices: number;
  device_kind: "gpu" | "cpu-core";
  requests: { completed: number; overflowed: number; unfinished: number };
  /** total tokens (input, cached included, plus output) of completed calls per device-second */
  tpgs: number;
  total_tokens: number;
  output_tokens: number;
  /**
   * Output tokens/s per user: per call (output - 1) / (last token - first token); `p90` is the rate 90%
   * of calls reach or beat (1 / the 90th percentile of time per output token), the one AgentX reads
   */
  interactivity: { p50: number; p90: number };
  interactivity_floor: number;
  meets_floor: boolean;
  ttft_s: Percentiles;
  itl_s: Percentiles;
  /** prompt tokens reused over prompt tokens, of completed calls */
  prefix_hit: number;
  /** what an infinite cache keyed by block ids would have held of the same prompts */
  theoretical_prefix_hit: number;
  context_overflow: {
    requests: number;
    request_rate: number;
    sessions: number;
    session_rate: number;
    invalid: boolean;
  };
  session_jct_s: { sessions: number; unfinished: number; mean: number; p50: number; p90: number };
}

export interface AgentxInput {
  readonly concurrency: number;
  readonly durationS: number;
  readonly devices: number;
  readonly deviceKind: "gpu" | "cpu-core";
  readonly interactivityFloor: number;
  readonly calls: readonly MeasuredCall[];
  readonly sessions: readonly MeasuredSession[];
  /** every gap between two output tokens of a measured call */
  readonly itl: LogHistogram;
}

const spread = (xs: readonly number[]): Percentiles => ({
  p50: percentile(xs, 50),
  p90: percentile(xs, 90),
  p99: percentile(xs, 99),
});

export function agentxMetrics(input: AgentxInput): AgentxMetrics {
  const completed = input.calls.filter((c) => !c.overflow && c.finishS !== null);
  const overflowed = input.calls.filter((c) => c.overflow);
  const totalTokens = completed.reduce((sum, c) => sum + c.input + c.output, 0);
  const outputTokens = completed.reduce((sum, c) => sum + c.output, 0);
  const promptTokens = completed.reduce((sum, c) => sum + c.input, 0);
  const timePerToken = completed
    .filter((c) => c.output > 1 && c.firstTokenS !== null && c.finishS !== null)
    .map((c) => ((c.finishS as number) - (c.firstTokenS as number)) / (c.output - 1));
  const rate = (secondsPerToken: number) => (secondsPerToken > 0 ? 1 / secondsPerToken : 0);
  const interactivity = {
    p50: rate(percentile(timePerToken, 50)),
    p90: rate(percentile(timePerToken, 90)),
  };
  const sessionsOverflowing = new Set(overflowed.map((c) => c.session));
  const sessionsSeen = new Set(input.calls.map((c) => c.session));
  const jcts = input.sessions
    .filter((s) => !s.warm && s.endS !== null)
    .map((s) => (s.endS as number) - s.startS);
  const measuredCalls = input.calls.length;
  return {
    concurrency: input.concurrency,
    duration_s: input.durationS,
    devices: input.devices,
    device_kind: input.deviceKind,
    requests: {
      completed: completed.length,
      overflowed: overflowed.length,
      unfinished: input.calls.length - completed.length - overflowed.length,
    },
    tpgs: input.durationS > 0 ? totalTokens / (input.durationS * input.devices) : 0,
    total_tokens: totalTokens,
    output_tokens: outputTokens,
    interactivity,
    interactivity_floor: input.interactivityFloor,
    meets_floor: interactivity.p90 >= input.interactivityFloor,
    ttft_s: spread(
      completed.filter((c) => c.firstTokenS !== null).map((c) => (c.firstTokenS as number) - c.sendS),
    ),
    itl_s: { p50: input.itl.percentile(50), p90: input.itl.percentile(90), p99: input.itl.percentile(99) },
    prefix_hit: promptTokens > 0 ? completed.reduce((sum, c) => sum + c.cachedTokens, 0) / promptTokens : 0,
    theoretical_prefix_hit:
      promptTokens > 0 ? completed.reduce((sum, c) => sum + c.theoreticalHitTokens, 0) / promptTokens : 0,
    context_overflow: {
      requests: overflowed.length,
      request_rate: measuredCalls > 0 ? overflowed.length / measuredCalls : 0,
      sessions: sessionsOverflowing.size,
      session_rate: sessionsSeen.size > 0 ? sessionsOverflowing.size / sessionsSeen.size : 0,
      invalid: measuredCalls > 0 && overflowed.length / measuredCalls > OVERFLOW_INVALID_SHARE,
    },
    session_jct_s: {
      sessions: jcts.length,
      unfinished: input.sessions.filter((s) => !s.warm && s.endS === null).length,
      mean: jcts.length > 0 ? jcts.reduce((a, b) => a + b, 0) / jcts.length : 0,
      p50: percentile(jcts, 50),
      p90: percentile(jcts, 90),
    },
  };
}
