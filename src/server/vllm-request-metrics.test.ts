/**
 * The vLLM families llm-d's endpoint picker scrapes and vLLM's Grafana dashboard plots: vLLM's names, types,
 * labels and buckets, with values that follow the requests served (fake engine).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parsePrometheus, type Sample } from "./test-support/prometheus-text.js";
import { type Json, withServer } from "./test-support/test-server.js";
import { VLLM_REQUEST_LATENCY_BUCKETS, VLLM_TTFT_BUCKETS } from "./vllm-request-metrics.js";

const chat = (content: string) => ({
  model: "fake-model",
  messages: [{ role: "user", content }],
});

describe("vLLM's metric families", () => {
  test("names, types, labels and buckets as vLLM's; values follow the requests", async () => {
    await withServer(
      {
        reply: () => ["one ", "two ", "three"],
        metrics: { prefixQueryTokens: 300, prefixHitTokens: 120, preemptions: 2, kvBlockSizeTokens: 16 },
      },
      {},
      async (t) => {
        const usages: Json[] = [];
        for (const content of ["first question here", "a second and longer question here"]) {
          usages.push(((await (await t.post("/v1/chat/completions", chat(content))).json()) as Json).usage);
        }
        const { types, samples } = parsePrometheus(await (await fetch(`${t.url}/metrics`)).text());
        const of = (name: string) => samples.filter((s) => s.name === name);
        const value = (name: string) => {
          const found = of(name);
          assert.equal(found.length, 1, name);
          return (found[0] as Sample).value;
        };

        for (const [family, type] of [
          ["vllm:num_requests_waiting", "gauge"],
          ["vllm:num_requests_running", "gauge"],
          ["vllm:kv_cache_usage_perc", "gauge"],
          ["vllm:cache_config_info", "gauge"],
          ["vllm:lora_requests_info", "gauge"],
          ["vllm:time_to_first_token_seconds", "histogram"],
          ["vllm:e2e_request_latency_seconds", "histogram"],
          ["vllm:prompt_tokens_total", "counter"],
          ["vllm:generation_tokens_total", "counter"],
          ["vllm:request_success_total", "counter"],
          ["vllm:num_preemptions_total", "counter"],
          ["vllm:prefix_cache_queries_total", "counter"],
          ["vllm:prefix_cache_hits_total", "counter"],
        ] as const) {
          assert.equal(types.get(family), type, family);
          const own = samples.filter((s) => s.name === family || s.name.startsWith(`${family}_`));
          assert.ok(own.length > 0, `${family} has samples`);
          if (family !== "vllm:lora_requests_info") {
            for (const s of own) assert.equal(s.labels["model_name"], "fake-model", s.name);
          }
        }

        const buckets = (family: string) =>
          of(`${family}_bucket`)
            .map((s) => s.labels["le"])
            .filter((le) => le !== "+Inf")
            .map(Number);
        assert.deepEqual(buckets("vllm:time_to_first_token_seconds"), VLLM_TTFT_BUCKETS);
        assert.deepEqual(buckets("vllm:e2e_request_latency_seconds"), VLLM_REQUEST_LATENCY_BUCKETS);
        assert.equal(VLLM_TTFT_BUCKETS.at(-1), 2560);
        assert.equal(VLLM_REQUEST_LATENCY_BUCKETS.at(-1), 7680);
        assert.equal(value("vllm:time_to_first_token_seconds_count"), 2);
        assert.equal(value("vllm:e2e_request_latency_seconds_count"), 2);

        const sum = (field: string) => usages.reduce((a, u) => a + (u[field] as number), 0);
        assert.equal(value("vllm:prompt_tokens_total"), sum("prompt_tokens"));
        assert.equal(value("vllm:generation_tokens_total"), sum("completion_tokens"));
        const byReason = Object.fromEntries(
          of("vllm:request_success_total").map((s) => [s.labels["finished_reason"], s.value]),
        );
        assert.deepEqual(byReason, { stop: 2, length: 0, abort: 0 });

        assert.equal(value("vllm:prefix_cache_queries_total"), 300);
        assert.equal(value("vllm:prefix_cache_hits_total"), 120);
        assert.equal(value("vllm:num_preemptions_total"), 2);

        const [lora] = of("vllm:lora_requests_info");
        assert.deepEqual(
          [
            lora?.labels["max_lora"],
            lora?.labels["running_lora_adapters"],
            lora?.labels["waiting_lora_adapters"],
          ],
          ["0", "", ""],
        );
        assert.ok(Math.abs((lora?.value ?? 0) - Date.now() / 1000) < 60, "the time of the scrape, as vLLM's");
        const [info] = of("vllm:cache_config_info");
        assert.equal(info?.labels["block_size"], "16");
      },
    );
  });
});
