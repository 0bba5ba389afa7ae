/**
 * What keeping a program's KV means on each engine (docs/gateway.md, "Retention"): the scheduler pins a
 * finished turn's KV for a TTL in its model of the backend; the backend's retention makes that real as far as
 * the engine allows: llama-server keeps the program's slot (slot-retention.ts), vLLM and SGLang, which have no
 * pins, keep the program's prefix from the head of their LRU (keep-alive.ts), a Continuum replica pins it
 * itself (native-retention.ts).
 */
import type { KvChanges } from "../../core/step-plan.js";
import type { ReplyTap } from "../reply-tap.js";
import type { GatewayTurn } from "../turn.js";

export interface RetentionStats {
  /** llama-server: turns sent to their program's own slot, pinned slots given to another program, saves and restores */
  readonly slotHits: number;
  readonly pinsDisplaced: number;
  readonly slotSaves: number;
  readonly slotRestores: number;
  readonly slotSaveFailures: number;
  /** llama-server with one slot: turns sent while the slot still ran, for llama-server to queue */
  readonly turnsSentAhead: number;
  /** vLLM / SGLang: keep-alive requests sent for pinned prefixes, and what they cost the backend */
  readonly keepAlives: number;
  readonly keepAlivePromptTokens: number;
  /** prompt tokens the keep-alives made the backend compute (not found in its cache), output tokens included */
  readonly keepAliveComputedTokens: number;
  readonly keepAliveSeconds: number;
  readonly keepAliveFailures: number;
  /** keep-alives whose backend did not say how much of the prompt it found cached (vLLM without --enable-prompt-tokens-details) */
  readonly keepAliveUnreported: number;
}

export type MutableStats = { -readonly [K in keyof RetentionStats]: RetentionStats[K] };

export const NO_RETENTION_STATS: RetentionStats = {
  slotHits: 0,
  pinsDisplaced: 0,
  slotSaves: 0,
  slotRestores: 0,
  slotSaveFailures: 0,
  turnsSentAhead: 0,
  keepAlives: 0,
  keepAlivePromptTokens: 0,
  keepAliveComputedTokens: 0,
  keepAliveSeconds: 0,
  keepAliveFailures: 0,
  keepAliveUnreported: 0,
};

export interface Retention {
  /**
   * Fields added to a turn's body as it is forwarded now, after what must come first (a slot's KV restored);
   * `requestId` names the turn in `ended`.
   */
  prepare(turn: GatewayTurn, requestId: string): Promise<Record<string, unknown>>;
  /** The turn's answer is over (`ok`: whole). */
  ended(turn: GatewayTurn, requestId: string, tap: ReplyTap, ok: boolean): void;
  /** The scheduler pinned finished turns or released pins. */
  applyKvChanges(changes: KvChanges): void;
  /** Once a step: what is due by now (keep-alives). */
  tick(): void;
  /** Turns the backend may be sent beyond those it runs at once, for it to queue and start as one ends. */
  readonly turnsAhead: number;
  readonly stats: RetentionStats;
  close(): Promise<void>;
}

/** A turn's program, or the turn itself when it is a one-off. */
export function programKey(turn: GatewayTurn, requestId: string): string {
  return turn.programId ?? `one-off/${requestId}`;
}
