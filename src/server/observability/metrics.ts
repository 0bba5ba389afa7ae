/**
 * Prometheus metrics named in parallel to vLLM's (`vllm:*` -> `continuum:*`). Gauges and the engine's
 * cumulative counters are read from `engine.metrics()` at scrape time; latency histograms are observed
 * as requests finish. One registry per server, so several servers (tests) never collide.
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { EngineService, FinishReason, GenerateEvent } from "../../engine/engine-api.js";
import { registerMemoryMetrics } from "./memory-metrics.js";
import { scrapedCounter, scrapedGauge } from "./scraped-metrics.js";
import {
  registerVllmGauges,
  registerVllmTokenLatency,
  TOKEN_INTERVAL_BUCKETS,
  type VllmTokenLatency,
} from "./vllm-metrics.js";
import { registerVllmRequestMetrics, type VllmRequestMetrics } from "./vllm-request-metrics.js";

type DoneEvent = Extract<GenerateEvent, { type: "done" }>;

const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640,
];
const LATENCY_BUCKETS = [
  0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920,
];

export class ServerMetrics {
  readonly registry = new Registry();
  private readonly ttft: Histogram;
  private readonly tpot: Histogram;
  private readonly interToken: Histogram;
  private readonly vllmTokenLatency: VllmTokenLatency;
  private readonly vllmRequests: VllmRequestMetrics;
  private readonly e2e: Histogram;
  private readonly queue: Histogram;
  private readonly promptTokens: Counter;
  private readonly generationTokens: Counter;
  private readonly cachedTokens: Counter;
  private readonly finished: Counter<"finished_reason">;
  private readonly rejected: Counter<"code">;

  constructor(engine: EngineService) {
    const registers = [this.registry];
    this.registry.setDefaultLabels({ model_name: engine.modelId });
    const gauge = (name: string, help: string, read: () => number) =>
      scrapedGauge(registers, name, help, read);
    const total = (name: string, help: string, read: () => number) =>
      scrapedCounter(registers, name, help, read);
    const m = () => engine.metrics();
    gauge("continuum:num_requests_running", "Requests in model execution batches.", () => m().running);
    gauge("continuum:num_requests_waiting", "Requests waiting to be processed.", () => m().waiting);
    gauge(
      "continuum:longest_queue_wait_seconds",
      "Seconds the request waiting longest to start has waited so far (0 when none waits).",
      () => m().longestWaitS,
    );
    gauge(
      "continuum:num_pinned_programs",
      "Agent programs whose KV cache is pinned (TTL).",
      () => m().pinnedPrograms,
    );
    gauge("continuum:kv_cache_usage_perc", "KV-cache usage (running + pinned), 1 = 100%.", () => m().kvUsage);
    total(
      "continuum:prefix_cache_queries_total",
      "Prefix-cache queries, in tokens.",
      () => m().prefixQueryTokens,
    );
    total("continuum:prefix_cache_hits_total", "Prefix-cache hits, in tokens.", () => m().prefixHitTokens);
    total(
      "continuum:num_preemptions_total",
      "Cumulative preemptions by the scheduler.",
      () => m().preemptions,
    );
    total(
      "continuum:pins_created_total",
      "KV pins created when a turn ended in a tool call.",
      () => m().pinsCreated,
    );
    total(
      "continuum:pins_expired_total",
      "KV pins released because their TTL passed.",
      () => m().pinsExpired,
    );
    total(
      "continuum:model_compute_seconds_total",
      "Seconds the model's steps took: the decode and the host's sampling after it.",
      () => m().modelComputeS,
    );
    total(
      "continuum:sampling_seconds_total",
      "Of the model's time, seconds the host spent sampling tokens from the logits.",
      () => m().samplingS,
    );

    // what the TTL cost model charges for 1024 tokens: --profile's prices, else measured by the engine
    const ttlPrices = [
      ["continuum:ttl_prefill_1k_tokens_seconds", "re-prefilling 1024 tokens", () => m().prefill1kTokensS],
      [
        "continuum:ttl_ram_reload_1k_tokens_seconds",
        "bringing 1024 tokens back from the RAM tier",
        () => m().ramReload1kTokensS,
      ],
    ] as const;
    for (const [name, what, read] of ttlPrices) {
      gauge(
        name,
        `What the TTL cost model prices ${what} at (--profile, else measured by the engine).`,
        read,
      );
    }

    const device = engine.device;
    new Gauge({
      name: "continuum:device_info",
      help: "Where the model runs (value 1, the device in labels): its backend and memory, repeating layers on the GPU, where the KV cache is.",
      labelNames: ["backend", "device", "memory_bytes", "layers_offloaded", "layers_total", "kv_cache"],
      registers,
    }).set(
      {
        backend: device.backend,
        device: device.device,
        memory_bytes: String(device.memoryBytes),
        layers_offloaded: String(device.layersOffloaded),
        layers_total: String(device.layersTotal),
        kv_cache: device.kvCache,
      },
      1,
    );

    registerMemoryMetrics(registers, () => m().memory);
    registerVllmGauges(registers, m);
    this.vllmTokenLatency = registerVllmTokenLatency(registers);
    this.vllmRequests = registerVllmRequestMetrics(registers, engine.maxContextTokens);

    this.ttft = new Histogram({
      name: "continuum:time_to_first_token_seconds",
      help: "Time to first token, from arrival.",
      buckets: TTFT_BUCKETS,
      registers,
    });
    this.tpot = new Histogram({
      name: "continuum:request_time_per_output_token_seconds",
      help: "Per request: time from the first output token to the last, over the tokens after the first (TPOT).",
      buckets: TOKEN_INTERVAL_BUCKETS,
      registers,
    });
    this.interToken = new Histogram({
      name: "continuum:inter_token_latency_seconds",
      help: "Time between consecutive streamed output pieces of a request.",
      buckets: TOKEN_INTERVAL_BUCKETS,
      registers,
    });
    this.e2e = new Histogram({
      name: "continuum:e2e_request_latency_seconds",
      help: "End-to-end request latency.",
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.queue = new Histogram({
      name: "continuum:request_queue_time_seconds",
      help: "Time from arrival to admission (WAITING phase).",
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.promptTokens = new Counter({
      name: "continuum:prompt_tokens_total",
      help: "Prefill tokens processed.",
      registers,
    });
    this.generationTokens = new Counter({
      name: "continuum:generation_tokens_total",
      help: "Generation tokens produced.",
      registers,
    });
    this.cachedTokens = new Counter({
      name: "continuum:prompt_tokens_cached_total",
      help: "Prompt tokens whose KV was reused (prefix, pin or offload tier).",
      registers,
    });
    this.finished = new Counter({
      name: "continuum:request_success_total",
      help: "Finished requests, by finish reason.",
      labelNames: ["finished_reason"],
      registers,
    });
    this.rejected = new Counter({
      name: "continuum:request_rejected_total",
      help: "Requests refused before generation, by error code.",
      labelNames: ["code"],
      registers,
    });
  }

  /** called with every finished request, after the metrics saw it (the dashboard's history) */
  readonly doneListeners: ((done: DoneEvent) => void)[] = [];

  observeDone(done: DoneEvent): void {
    for (const listener of this.doneListeners) listener(done);
    if (done.ttftS !== null) this.ttft.observe(done.ttftS);
    if (done.ttftS !== null && done.usage.completionTokens > 1) {
      const tpot = (done.e2eS - done.ttftS) / (done.usage.completionTokens - 1);
      this.tpot.observe(tpot);
      this.vllmTokenLatency.observeRequestTpot(tpot);
    }
    this.e2e.observe(done.e2eS);
    this.queue.observe(done.queueS);
    this.promptTokens.inc(done.usage.promptTokens);
    this.generationTokens.inc(done.usage.completionTokens);
    this.cachedTokens.inc(done.usage.cachedTokens);
    this.finished.inc({ finished_reason: done.finishReason satisfies FinishReason });
    this.vllmRequests.observeDone(done);
  }

  observeInterToken(seconds: number): void {
    this.interToken.observe(seconds);
    this.vllmTokenLatency.observeInterToken(seconds);
  }

  /** A request whose client left before its end was read (a stream closed while queued or generating). */
  observeAbandoned(): void {
    this.finished.inc({ finished_reason: "abort" satisfies FinishReason });
    this.vllmRequests.observeAbandoned();
  }

  /** A request's choices (`n`, one for most) all ended: the most tokens one of them generated. */
  observeMaxGenerationTokens(tokens: number): void {
    this.vllmRequests.observeMaxGenerationTokens(tokens);
  }

  observeRejected(code: string): void {
    this.rejected.inc({ code });
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  exposition(): Promise<string> {
    return this.registry.metrics();
  }
}
