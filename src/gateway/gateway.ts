/**
 * `continuum gateway`: the core scheduler as an executor over engines it does not own. Each backend is a
 * BackendLane (its scheduler over a model of its KV). A program's turns go to the backend that holds its
 * prefix (the one that served its previous turn), new programs to the least loaded backend; a backend that
 * does not answer is taken out (its queued turns move on at once, its programs re-prefill elsewhere) and
 * probed again until it is back. No backend up: requests are answered 503, and the gateway keeps probing.
 */
import type { CostModel } from "../core/cost/cost-model.js";
import type { SchedulingPolicy } from "../core/policy.js";
import { BackendKvIndex } from "./backends/backend-kv-index.js";
import { BackendLane } from "./backends/backend-lane.js";
import { type BackendInfo, probeBackend } from "./backends/backend-probe.js";
import type { BackendSpec, EngineKind } from "./backends/backend-spec.js";
import { type BackendReply, BackendUnreachable } from "./backends/forward.js";
import { KvEventFeed } from "./backends/kv-event-feed.js";
import { KeepAliveRetention } from "./retention/keep-alive.js";
import { NativeRetention } from "./retention/native-retention.js";
import type { Retention } from "./retention/retention.js";
import { SlotRetention } from "./retention/slot-retention.js";
import type { GatewayTurn } from "./turn.js";

export interface GatewayOptions {
  readonly backends: readonly BackendSpec[];
  /** the engine of every backend; null: each one detected */
  readonly engine: EngineKind | null;
  /** a fresh policy instance per backend (each backend's scheduler keeps its own) */
  readonly policy: () => SchedulingPolicy;
  /** requests forwarded to one backend at once at most, where the backend does not say (default 256) */
  readonly maxNumSeqs?: number;
  readonly costs?: CostModel;
  /** how often a backend's /health is asked (default 1 s); HEALTH_FAILURES failures in a row take it out */
  readonly healthIntervalMs?: number;
  /** how often a backend that is out is probed again (default 2 s) */
  readonly probeIntervalMs?: number;
  readonly log?: (line: string) => void;
}

export type BackendState = "starting" | "up" | "down";

/** A backend as the gateway holds it. */
export interface GatewayBackend {
  readonly spec: BackendSpec;
  state: BackendState;
  info: BackendInfo | null;
  lane: BackendLane | null;
  kvIndex: BackendKvIndex | null;
  feed: KvEventFeed | null;
  /** why it is down (the last probe's or health check's failure) */
  lastError: string | null;
  /** times it went down, and turns moved from it to another backend */
  failovers: number;
  /** consecutive failed health checks */
  healthFailures: number;
}

/** No backend can take the turn now: the client is answered 503. */
export class NoBackendAvailable extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NoBackendAvailable";
  }
}

const DEFAULT_MAX_NUM_SEQS = 256;
/** A backend busy with a long step may answer /health late: this long, this many times in a row, and it is out. */
const HEALTH_TIMEOUT_MS = 3000;
const HEALTH_FAILURES = 3;
/** Programs whose backend the gateway remembers (least recently used forgotten first). */
const AFFINITY_KEPT = 65536;
/** Tries of one turn on successive backends that could not be reached. */
const MAX_TRIES = 4;

export class Gateway {
  readonly backends: GatewayBackend[];
  /** program -> the backend that served its latest turn */
  private readonly affinity = new Map<string, string>();
  private readonly log: (line: string) => void;
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;
  /** turns that went to another backend than their program's previous one because that one was down */
  movedTurns = 0;

  constructor(private readonly options: GatewayOptions) {
    if (options.backends.length === 0) throw new Error("give at least one --backend");
    this.log = options.log ?? ((line) => process.stderr.write(`${line}\n`));
    this.backends = options.backends.map((spec) => ({
      spec,
      state: "starting",
      info: null,
      lane: null,
      kvIndex: null,
      feed: null,
      lastError: null,
      failovers: 0,
      healthFailures: 0,
    }));
  }

  /** Probes every backend once (reporting each), then keeps checking them; never fails for a backend that is down. */
  async start(): Promise<void> {
    await Promise.all(this.backends.map((backend) => this.probe(backend)));
    this.every(this.options.healthIntervalMs ?? 1000, () => this.checkHealth());
    this.every(this.options.probeIntervalMs ?? 2000, () => this.reprobe());
  }

  /** Runs `task` every `ms`, the next run timed from the end of the last (checks never pile up on a slow backend). */
  private every(ms: number, task: () => Promise<void>): void {
    const schedule = () => {
      const timer = setTimeout(async () => {
        this.timers.delete(timer);
        await task();
        if (!this.closed) schedule();
      }, ms);
      timer.unref();
      this.timers.add(timer);
    };
    schedule();
  }

  get upBackends(): GatewayBackend[] {
    return this.backends.filter((backend) => backend.state === "up" && backend.lane !== null);
  }

  /** The model id clients see: the first backend's that is or was up, else null (none answered yet). */
  get modelId(): string | null {
    return this.backends.find((backend) => backend.info !== null)?.info?.modelId ?? null;
  }

  private async probe(backend: GatewayBackend): Promise<void> {
    let info: BackendInfo;
    try {
      info = await probeBackend(backend.spec, this.options.engine);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (backend.state === "starting" || backend.lastError !== message) {
        this.log(
          `gateway: backend ${backend.spec.name} ${backend.spec.url} is not available: ${message} (probed again every ${((this.options.probeIntervalMs ?? 2000) / 1000).toFixed(0)} s)`,
        );
      }
      backend.state = "down";
      backend.lastError = message;
      return;
    }
    if (this.closed) return;
    const model = this.modelId;
    if (model !== null && backend.info === null && info.modelId !== model) {
      this.log(
        `gateway: backend ${backend.spec.name} serves ${info.modelId}, the others ${model}: its turns are sent as ${info.modelId}`,
      );
    }
    backend.info = info;
    if (backend.spec.kvEventsEndpoint !== null && backend.feed === null) {
      const blocks = Math.ceil(info.capacityTokens / info.blockSizeTokens);
      backend.kvIndex = new BackendKvIndex(info.blockSizeTokens, Math.max(65536, 4 * blocks));
      backend.feed = new KvEventFeed(backend.spec.kvEventsEndpoint, backend.kvIndex);
    }
    backend.lane = this.laneFor(backend, info);
    backend.state = "up";
    backend.lastError = null;
    backend.healthFailures = 0;
    this.log(
      `gateway: backend ${backend.spec.name} ${backend.spec.url}: ${info.engine}, model ${info.modelId}, ` +
        `${info.capacityTokens} KV tokens${info.slots === null ? "" : ` in ${info.slots} slots of ${info.contextTokens}`}, ` +
        `context ${info.contextTokens}${backend.feed ? `, KV events from ${backend.feed.endpoint}` : ""}`,
    );
  }

  private laneFor(backend: GatewayBackend, info: BackendInfo): BackendLane {
    const target = { name: backend.spec.name, url: backend.spec.url, modelId: info.modelId };
    let lane: BackendLane | null = null;
    const retention = this.retentionFor(backend, info, () => lane);
    const maxNumSeqs =
      (info.maxRunning ?? this.options.maxNumSeqs ?? DEFAULT_MAX_NUM_SEQS) + retention.turnsAhead;
    lane = new BackendLane({
      target,
      info,
      policy: this.options.policy(),
      retention,
      kvIndex: backend.kvIndex,
      maxNumSeqs,
      ...(this.options.costs ? { costs: this.options.costs } : {}),
      onUnreachable: (error) => this.markDown(backend, error.message),
    });
    return lane;
  }

  private retentionFor(
    backend: GatewayBackend,
    info: BackendInfo,
    lane: () => BackendLane | null,
  ): Retention {
    if (info.engine === "llama-server") return new SlotRetention(backend.spec.url, info.slots ?? 1, this.log);
    if (info.engine === "continuum") return new NativeRetention();
    return new KeepAliveRetention({
      name: backend.spec.name,
      url: backend.spec.url,
      modelId: info.modelId,
      messagesApi: info.messagesApi,
      idleTokens: () => lane()?.idleTokens() ?? 0,
    });
  }

  private markDown(backend: GatewayBackend, why: string): void {
    if (backend.state !== "up") return;
    backend.state = "down";
    backend.lastError = why;
    backend.failovers++;
    this.log(
      `gateway: backend ${backend.spec.name} ${backend.spec.url} is down (${why}): its programs move to the others`,
    );
    const lane = backend.lane;
    backend.lane = null;
    if (lane) void lane.retire(why);
  }

  private async checkHealth(): Promise<void> {
    await Promise.all(
      this.upBackends.map(async (backend) => {
        let ok = false;
        try {
          const response = await fetch(`${backend.spec.url}/health`, {
            signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS),
          });
          await response.arrayBuffer();
          ok = response.ok;
        } catch {
          ok = false;
        }
        if (ok) backend.healthFailures = 0;
        else if (++backend.healthFailures >= HEALTH_FAILURES) {
          this.markDown(backend, `its /health failed ${HEALTH_FAILURES} times in a row`);
        }
      }),
    );
  }

  private async reprobe(): Promise<void> {
    await Promise.all(this.backends.filter((b) => b.state === "down").map((b) => this.probe(b)));
  }

  /** The backend for a turn: its program's, while that one is up; else the least loaded (not in `tried`). */
  private pick(turn: GatewayTurn, tried: ReadonlySet<string>): GatewayBackend {
    const up = this.upBackends.filter((backend) => !tried.has(backend.spec.name));
    if (up.length === 0) {
      const down = this.backends
        .map((b) => `${b.spec.name} ${b.spec.url}: ${b.lastError ?? b.state}`)
        .join("; ");
      throw new NoBackendAvailable(`no backend is available (${down})`);
    }
    const program = turn.programId;
    const previous = program === null ? undefined : this.affinity.get(program);
    const own = previous === undefined ? undefined : up.find((backend) => backend.spec.name === previous);
    if (own) return own;
    if (previous !== undefined) this.movedTurns++;
    return up.reduce((best, backend) =>
      (backend.lane as BackendLane).load() < (best.lane as BackendLane).load() ? backend : best,
    );
  }

  private remember(program: string, backend: string): void {
    this.affinity.delete(program);
    this.affinity.set(program, backend);
    if (this.affinity.size > AFFINITY_KEPT) this.affinity.delete(this.affinity.keys().next().value as string);
  }

  /**
   * Forwards a turn where it belongs, when its backend's scheduler admits it; resolves with the backend's answer.
   * A backend that cannot be reached is taken out and the turn tried on another. Rejects with NoBackendAvailable.
   */
  async submit(turn: GatewayTurn, signal: AbortSignal): Promise<BackendReply> {
    const tried = new Set<string>();
    for (let attempt = 1; ; attempt++) {
      const backend = this.pick(turn, tried);
      if (turn.programId !== null) this.remember(turn.programId, backend.spec.name);
      try {
        return await (backend.lane as BackendLane).submit(turn, signal);
      } catch (error) {
        if (!(error instanceof BackendUnreachable) || signal.aborted || attempt >= MAX_TRIES) throw error;
        tried.add(backend.spec.name);
      }
    }
  }

  /**
   * Ends a program (`DELETE /v1/programs/{id}`): its pin in the gateway goes now, and a Continuum replica that
   * holds it is told too. False when no backend holds a live program of that id.
   */
  async endProgram(programId: string): Promise<boolean> {
    const name = this.affinity.get(programId);
    const backend = this.upBackends.find((b) => b.spec.name === name);
    if (!backend?.lane) return false;
    const ended = backend.lane.endProgram(programId);
    if (backend.info?.engine === "continuum") {
      try {
        await fetch(`${backend.spec.url}/v1/programs/${encodeURIComponent(programId)}`, {
          method: "DELETE",
          signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS),
        });
      } catch {
        // the replica's own TTL ends its pin
      }
    }
    return ended;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const timer of this.timers) clearTimeout(timer);
    await Promise.all(
      this.backends.map(async (backend) => {
        await backend.lane?.close();
        await backend.feed?.close();
      }),
    );
  }
}
