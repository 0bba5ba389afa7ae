/**
 * vLLM's and SGLang's retention: neither has a pin. A freed block stays in their prefix cache until the LRU
 * reaches it, and a block a request hits becomes most recently used again. So a pinned program's prefix is kept
 * by touching it before the LRU gets there: its latest turn sent again with one output token (a keep-alive),
 * which finds the prefix cached and moves it to the LRU's tail.
 *
 * When: the backend allocates KV for what it computes (prompt tokens it did not find cached, output tokens);
 * freed blocks are reused in LRU order, so a prefix freed at allocation count A is reached once the backend
 * has allocated about as much as it holds beside its running requests; a pinned prefix is touched before
 * (core/keep-alive-rule.ts). What it costs (requests, the
 * tokens the backend computed for them, their time) is counted and shown on /metrics.
 */
import { keepAliveDue } from "../../core/keep-alive-rule.js";
import type { KvChanges } from "../../core/step-plan.js";
import { backendBody } from "../backends/forward.js";
import type { ReplyTap } from "../reply-tap.js";
import { API_PATHS, type ForwardRequest, type GatewayTurn, requestFor } from "../turn.js";
import { type MutableStats, NO_RETENTION_STATS, programKey, type Retention } from "./retention.js";

const KEEP_ALIVE_TIMEOUT_MS = 120_000;

interface LastTurn {
  readonly request: ForwardRequest;
  /** its prompt's tokens, as the backend counted them */
  readonly promptTokens: number;
  /** the allocation count when the backend last touched the prefix */
  touchedAt: number;
}

export interface KeepAliveBackend {
  readonly name: string;
  readonly url: string;
  readonly modelId: string;
  /** it answers the Messages API itself (else a Messages turn is sent again as its chat completion) */
  readonly messagesApi: boolean;
  /** KV tokens the backend holds beside its running requests now (the gateway's model) */
  idleTokens(): number;
}

export class KeepAliveRetention implements Retention {
  readonly stats: MutableStats = { ...NO_RETENTION_STATS };
  readonly turnsAhead = 0;
  /** KV tokens the backend allocated (computed prompt and output tokens) since the gateway started */
  private allocated = 0;
  private readonly lastTurns = new Map<string, LastTurn>();
  private readonly pinned = new Set<string>();
  private readonly inFlight = new Set<string>();
  private readonly controller = new AbortController();

  constructor(private readonly backend: KeepAliveBackend) {}

  async prepare(): Promise<Record<string, unknown>> {
    return {};
  }

  ended(turn: GatewayTurn, requestId: string, tap: ReplyTap, ok: boolean): void {
    const usage = tap.usage;
    if (usage !== null) {
      this.allocated += usage.promptTokens - (usage.cachedTokens ?? 0) + usage.completionTokens;
    } else {
      this.allocated += tap.outputTokens;
    }
    if (!ok || turn.programId === null) return;
    const program = programKey(turn, requestId);
    this.lastTurns.delete(program);
    this.lastTurns.set(program, {
      request: requestFor(turn.request, this.backend.messagesApi),
      promptTokens: usage?.promptTokens ?? 0,
      touchedAt: this.allocated,
    });
  }

  applyKvChanges(changes: KvChanges): void {
    for (const pin of changes.pinned) this.pinned.add(pin.programId);
    for (const release of changes.released) {
      if (release.holder !== "pin") continue;
      this.pinned.delete(release.programId);
      if (release.reason === "last_step") this.lastTurns.delete(release.programId);
    }
  }

  tick(): void {
    if (this.pinned.size === 0) return;
    const idle = this.backend.idleTokens();
    for (const program of this.pinned) {
      const last = this.lastTurns.get(program);
      if (last === undefined || this.inFlight.has(program)) continue;
      if (!keepAliveDue(this.allocated - last.touchedAt, idle, last.promptTokens)) continue;
      last.touchedAt = this.allocated;
      void this.keepAlive(program, last.request);
    }
  }

  /** The program's latest turn again, with one output token: its prefix is hit, so it becomes most recently used. */
  private async keepAlive(program: string, request: ForwardRequest): Promise<void> {
    this.inFlight.add(program);
    const startMs = performance.now();
    try {
      const oneToken = { ...request, stream: false, streamUsage: false };
      const body = backendBody(oneToken, this.backend.modelId, {
        stream: false,
        stream_options: undefined,
        max_tokens: 1,
        ...(request.api === "chat" ? { max_completion_tokens: 1 } : {}),
      });
      const response = await fetch(`${this.backend.url}${API_PATHS[request.api]}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
        signal: AbortSignal.any([this.controller.signal, AbortSignal.timeout(KEEP_ALIVE_TIMEOUT_MS)]),
      });
      const reply = (await response.json()) as Record<string, unknown>;
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const usage = reply["usage"] as Record<string, unknown> | undefined;
      const prompt = Number(usage?.["prompt_tokens"] ?? usage?.["input_tokens"] ?? 0);
      const details = usage?.["prompt_tokens_details"] as Record<string, unknown> | undefined;
      const reported = details?.["cached_tokens"] ?? usage?.["cache_read_input_tokens"];
      const output = Number(usage?.["completion_tokens"] ?? usage?.["output_tokens"] ?? 1);
      this.stats.keepAlives++;
      this.stats.keepAlivePromptTokens += prompt;
      if (typeof reported === "number") {
        const computed = Math.max(0, prompt - reported) + output;
        this.stats.keepAliveComputedTokens += computed;
        this.allocated += computed;
      } else {
        this.stats.keepAliveUnreported++;
        this.allocated += output;
      }
    } catch {
      if (!this.controller.signal.aborted) this.stats.keepAliveFailures++;
    } finally {
      this.stats.keepAliveSeconds += (performance.now() - startMs) / 1000;
      this.inFlight.delete(program);
    }
  }

  async close(): Promise<void> {
    this.controller.abort();
  }
}
