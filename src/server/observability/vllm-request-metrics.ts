/**
 * vLLM's per-request series, with its names, types, labels and buckets (vllm/v1/metrics/loggers.py), observed
 * as requests finish: the time to first token, end-to-end latency, prompt and generation tokens (counters and
 * per-request histograms), the time in each phase and finished requests by reason that vLLM's Grafana
 * dashboard (examples/observability/prometheus_grafana) plots. Prompt tokens count every prompt token, cached
 * ones included, as vLLM's do. The phases are vLLM's: queued from arrival to admission, prefill from admission
 * to the first token, decode from the first token to the last, inference from admission to the last.
 */
import { Counter, Histogram, type Registry } from "prom-client";
import type { FinishReason, GenerateEvent } from "../../engine/engine-api.js";

type DoneEvent = Extract<GenerateEvent, { type: "done" }>;

/** vLLM's buckets for vllm:time_to_first_token_seconds. */
export const VLLM_TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640,
  2560,
];
/** vLLM's request_latency_buckets (end-to-end, queue, prefill, decode times). */
export const VLLM_REQUEST_LATENCY_BUCKETS = [
  0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680,
];

/**
 * vLLM's `build_1_2_5_buckets(max_model_len)`: 1, 2, 5, 10, 20, 50... up to the context length, for token
 * counts per request.
 */
export function oneTwoFiveBuckets(max: number): number[] {
  const buckets: number[] = [];
  for (let scale = 1; ; scale *= 10) {
    for (const mantissa of [1, 2, 5]) {
      if (mantissa * scale > max) return buckets;
      buckets.push(mantissa * scale);
    }
  }
}

type VllmFinishReason = "stop" | "length" | "abort";
/** vLLM's finish reasons this engine produces; vLLM creates each series at start, so they read 0 until used. */
const VLLM_FINISH_REASONS: readonly VllmFinishReason[] = ["stop", "length", "abort"];

/** A turn cut because the KV pool could not grow it is vLLM's `length` (it ran out of room). */
function vllmFinishReason(reason: FinishReason): VllmFinishReason {
  return reason === "kv_capacity" ? "length" : reason;
}

export interface VllmRequestMetrics {
  observeDone(done: DoneEvent): void;
  /** a request whose client left before its end (vLLM counts it as finished with reason abort) */
  observeAbandoned(): void;
  /** a request's choices (`n`) all ended: the most tokens one of them generated */
  observeMaxGenerationTokens(tokens: number): void;
}

/** `maxModelLen`: the context length, the top of the token-count buckets. */
export function registerVllmRequestMetrics(registers: Registry[], maxModelLen: number): VllmRequestMetrics {
  const ttft = new Histogram({
    name: "vllm:time_to_first_token_seconds",
    help: "Histogram of time to first token in seconds.",
    buckets: VLLM_TTFT_BUCKETS,
    registers,
  });
  const e2e = new Histogram({
    name: "vllm:e2e_request_latency_seconds",
    help: "Histogram of e2e request latency in seconds.",
    buckets: VLLM_REQUEST_LATENCY_BUCKETS,
    registers,
  });
  const promptTokens = new Counter({
    name: "vllm:prompt_tokens_total",
    help: "Number of prefill tokens processed.",
    registers,
  });
  const generationTokens = new Counter({
    name: "vllm:generation_tokens_total",
    help: "Number of generation tokens processed.",
    registers,
  });
  const success = new Counter({
    name: "vllm:request_success_total",
    help: "Count of successfully processed requests.",
    labelNames: ["finished_reason"],
    registers,
  });
  for (const reason of VLLM_FINISH_REASONS) success.inc({ finished_reason: reason }, 0);
  const tokenCounts = (name: string, help: string) =>
    new Histogram({ name, help, buckets: oneTwoFiveBuckets(maxModelLen), registers });
  const requestPromptTokens = tokenCounts(
    "vllm:request_prompt_tokens",
    "Number of prefill tokens processed.",
  );
  const requestGenerationTokens = tokenCounts(
    "vllm:request_generation_tokens",
    "Number of generation tokens processed.",
  );
  const maxGenerationTokens = tokenCounts(
    "vllm:request_max_num_generation_tokens",
    "Histogram of maximum number of requested generation tokens.",
  );
  const phase = (name: string, help: string) =>
    new Histogram({ name, help, buckets: VLLM_REQUEST_LATENCY_BUCKETS, registers });
  const queueTime = phase(
    "vllm:request_queue_time_seconds",
    "Histogram of time spent in WAITING phase for request.",
  );
  const prefillTime = phase(
    "vllm:request_prefill_time_seconds",
    "Histogram of time spent in PREFILL phase for request.",
  );
  const decodeTime = phase(
    "vllm:request_decode_time_seconds",
    "Histogram of time spent in DECODE phase for request.",
  );
  const inferenceTime = phase(
    "vllm:request_inference_time_seconds",
    "Histogram of time spent in RUNNING phase for request.",
  );
  return {
    observeDone(done) {
      if (done.ttftS !== null) ttft.observe(done.ttftS);
      e2e.observe(done.e2eS);
      promptTokens.inc(done.usage.promptTokens);
      generationTokens.inc(done.usage.completionTokens);
      requestPromptTokens.observe(done.usage.promptTokens);
      requestGenerationTokens.observe(done.usage.completionTokens);
      queueTime.observe(done.queueS);
      inferenceTime.observe(Math.max(0, done.e2eS - done.queueS));
      if (done.ttftS !== null) {
        prefillTime.observe(Math.max(0, done.ttftS - done.queueS));
        decodeTime.observe(Math.max(0, done.e2eS - done.ttftS));
      }
      success.inc({ finished_reason: vllmFinishReason(done.finishReason) });
    },
    observeAbandoned() {
      success.inc({ finished_reason: "abort" });
    },
    observeMaxGenerationTokens(tokens) {
      maxGenerationTokens.observe(tokens);
    },
  };
}
