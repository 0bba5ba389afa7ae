import type { Retention } from "./retention.js";

/** What a client says about the KV of a turn that ends in a tool call. */
export interface RetentionHints {
  /** keep the KV at most this long (Anthropic-style `cache_control` TTL); 0: do not keep it */
  readonly ttlS: number | null;
  /** how long the client expects the tool call to take */
  readonly expectedToolS: number | null;
}

export const NO_HINTS: RetentionHints = { ttlS: null, expectedToolS: null };

/**
 * A tool's expected duration is an estimate: the pin may outlast it by this fraction before the program
 * counts as late (a program that returns after its pin expired pays the recompute it was pinned to save).
 */
export const EXPECTED_TOOL_SLACK = 0.25;

/**
 * The policy's retention, with the client's hints as evidence: a client TTL bounds the pin; a pin that
 * would expire before the tool is expected to return is dropped (it would hold memory for nothing), and
 * one far longer than the tool is expected to take is shortened. The hints never force a pin the policy
 * did not want, and a pin stays a pin: the scheduler may still sacrifice it under memory pressure.
 */
export function applyRetentionHints(retention: Retention, hints: RetentionHints): Retention {
  if (retention.kind !== "pin") return retention;
  let ttlS = retention.ttlS;
  if (hints.expectedToolS !== null) {
    if (ttlS < hints.expectedToolS) return { kind: "free" };
    ttlS = Math.min(ttlS, hints.expectedToolS * (1 + EXPECTED_TOOL_SLACK));
  }
  if (hints.ttlS !== null) ttlS = Math.min(ttlS, hints.ttlS);
  return ttlS > 0 ? { kind: "pin", ttlS } : { kind: "free" };
}
