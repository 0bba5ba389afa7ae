/**
 * The `vllm:` series that inference routers scrape to place requests, exported beside our own
 * `continuum:` names so an unmodified router treats a Continuum replica like a vLLM one:
 * - the Gateway API Inference Extension endpoint picker (llm-d): `vllm:num_requests_waiting`,
 *   `vllm:num_requests_running`, `vllm:kv_cache_usage_perc` (older builds `vllm:gpu_cache_usage_perc`),
 *   `vllm:cache_config_info{block_size,num_gpu_blocks}`, `vllm:lora_requests_info` (no adapters here)
 *   (kubernetes-sigs/gateway-api-inference-extension, docs/proposals/003-model-server-protocol);
 * - the vLLM production-stack router: the gauges above plus `vllm:gpu_prefix_cache_hits_total`,
 *   `vllm:gpu_prefix_cache_queries_total`, `vllm:gpu_prefix_cache_hit_rate`
 *   (vllm-project/production-stack, src/vllm_router/stats/engine_stats.py).
 * - vLLM's Grafana dashboard: its current counters `vllm:prefix_cache_queries_total`,
 *   `vllm:prefix_cache_hits_total` (tokens) and `vllm:num_preemptions_total`, besides the per-token latency
 *   histograms (registerVllmTokenLatency) and the per-request series (vllm-request-metrics.ts).
 * KV usage counts pinned blocks as used: a pinned program's KV is not free for a new program.
 */
import { Gauge, Histogram, type Registry } from "prom-client";
import type { EngineMetrics } from "../../engine/engine-api.js";
import { scrapedCounter, scrapedGauge } from "./scraped-metrics.js";

export function registerVllmGauges(registers: Registry[], read: () => EngineMetrics): void {
  const gauge = (name: string, help: string, value: (m: EngineMetrics) => number) =>
    scrapedGauge(registers, name, help, () => value(read()));
  const total = (name: string, help: string, value: (m: EngineMetrics) => number) =>
    scrapedCounter(registers, name, help, () => value(read()));
  gauge("vllm:num_requests_running", "Requests in model execution batches.", (m) => m.running);
  gauge("vllm:num_requests_waiting", "Requests waiting to be processed.", (m) => m.waiting);
  gauge("vllm:kv_cache_usage_perc", "KV-cache usage, pinned blocks included (1 = 100%).", (m) => m.kvUsage);
  gauge(
    "vllm:gpu_cache_usage_perc",
    "KV-cache usage (older name of vllm:kv_cache_usage_perc).",
    (m) => m.kvUsage,
  );
  gauge("vllm:gpu_prefix_cache_hit_rate", "Prefix-cache hit rate over all queries (tokens).", (m) =>
    m.prefixQueryTokens > 0 ? m.prefixHitTokens / m.prefixQueryTokens : 0,
  );
  total(
    "vllm:gpu_prefix_cache_queries_total",
    "Prefix-cache queries, in tokens.",
    (m) => m.prefixQueryTokens,
  );
  total("vllm:gpu_prefix_cache_hits_total", "Prefix-cache hits, in tokens.", (m) => m.prefixHitTokens);
  total(
    "vllm:prefix_cache_queries_total",
    "Prefix cache queries, in terms of number of queried tokens.",
    (m) => m.prefixQueryTokens,
  );
  total(
    "vllm:prefix_cache_hits_total",
    "Prefix cache hits, in terms of number of cached tokens.",
    (m) => m.prefixHitTokens,
  );
  total(
    "vllm:num_preemptions_total",
    "Cumulative number of preemption from the engine.",
    (m) => m.preemptions,
  );
  new Gauge({
    name: "vllm:cache_config_info",
    help: "Information of the KV cache configuration (value 1, the configuration in labels).",
    labelNames: ["block_size", "num_gpu_blocks"],
    registers,
    collect() {
      const m = read();
      this.reset();
      this.set({ block_size: String(m.kvBlockSizeTokens), num_gpu_blocks: String(m.kvBlocks) }, 1);
    },
  });
  // vLLM sets it to the time of its last step, and pickers read the sample with the latest value
  new Gauge({
    name: "vllm:lora_requests_info",
    help: "Running stats on lora requests.",
    labelNames: ["max_lora", "waiting_lora_adapters", "running_lora_adapters"],
    registers,
    collect() {
      this.set({ max_lora: "0", waiting_lora_adapters: "", running_lora_adapters: "" }, Date.now() / 1000);
    },
  });
}

/** vLLM's buckets for time per output token and inter-token latency (seconds). */
export const TOKEN_INTERVAL_BUCKETS = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
];

export interface VllmTokenLatency {
  /** the time between two consecutive output pieces of one request */
  observeInterToken(seconds: number): void;
  /** one finished request's mean time per output token after the first */
  observeRequestTpot(seconds: number): void;
}

/**
 * vLLM's token latency histograms, with its names and buckets: `vllm:inter_token_latency_seconds` and
 * its older name `vllm:time_per_output_token_seconds` (vLLM observes both at every output token after
 * the first, so they agree), and `vllm:request_time_per_output_token_seconds` once per request.
 */
export function registerVllmTokenLatency(registers: Registry[]): VllmTokenLatency {
  const histogram = (name: string, help: string) =>
    new Histogram({ name, help, buckets: TOKEN_INTERVAL_BUCKETS, registers });
  const interToken = histogram(
    "vllm:inter_token_latency_seconds",
    "Histogram of inter-token latency in seconds.",
  );
  const perOutputToken = histogram(
    "vllm:time_per_output_token_seconds",
    "Histogram of time per output token in seconds (older name of vllm:inter_token_latency_seconds).",
  );
  const requestTpot = histogram(
    "vllm:request_time_per_output_token_seconds",
    "Histogram of time_per_output_token_seconds per request.",
  );
  return {
    observeInterToken(seconds) {
      interToken.observe(seconds);
      perOutputToken.observe(seconds);
    },
    observeRequestTpot(seconds) {
      requestTpot.observe(seconds);
    },
  };
}
