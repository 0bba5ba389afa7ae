/**
 * The vLLM families llm-d's endpoint picker scrapes and vLLM's Grafana dashboard plots: vLLM's names, types,
 * labels and buckets, with values that follow the requests served (fake engine).
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parsePrometheus, type Sample } from "../test-support/prometheus-text.js";
import { type Json, withServer } from "../test-support/test-server.js";
import {
  oneTwoFiveBuckets,
  VLLM_REQUEST_LATENCY_BUCKETS,
  VLLM_TTFT_BUCKETS,
} from "./vllm-request-metrics.js";

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

  test("per-request token histograms and phase times: what each request generated and how long each phase took", async () => {
    // the second choice of a request (`n`) writes five words, every other generation two
    const reply = (request: { requestId: string }) =>
      request.requestId.endsWith("-1") ? ["a ", "b ", "c ", "d ", "e"] : ["x ", "y"];
    await withServer({ reply, delayMs: 15, maxContextTokens: 600 }, {}, async (t) => {
      const usages: Json[] = [];
      for (const body of [chat("one two three"), { ...chat("four five"), n: 2 }]) {
        usages.push(((await (await t.post("/v1/chat/completions", body)).json()) as Json).usage);
      }
      const { types, samples } = parsePrometheus(await (await fetch(`${t.url}/metrics`)).text());
      const value = (name: string) => {
        const found = samples.filter((s) => s.name === name);
        assert.equal(found.length, 1, name);
        assert.equal(found[0]?.labels["model_name"], "fake-model", name);
        return (found[0] as Sample).value;
      };
      const buckets = (family: string) =>
        samples
          .filter((s) => s.name === `${family}_bucket` && s.labels["le"] !== "+Inf")
          .map((s) => Number(s.labels["le"]));

      for (const family of ["vllm:request_prompt_tokens", "vllm:request_generation_tokens"]) {
        assert.equal(types.get(family), "histogram", family);
        assert.deepEqual(buckets(family), [1, 2, 5, 10, 20, 50, 100, 200, 500], "1-2-5 up to the context");
      }
      assert.deepEqual(oneTwoFiveBuckets(600), [1, 2, 5, 10, 20, 50, 100, 200, 500]);
      // three generations: the single request's, and the two choices of the second
      assert.equal(value("vllm:request_prompt_tokens_count"), 3);
      assert.equal(value("vllm:request_generation_tokens_count"), 3);
      // a response with `n` choices counts its prompt once per choice in its usage, as the histogram does
      assert.equal(
        value("vllm:request_prompt_tokens_sum"),
        usages[0].prompt_tokens + usages[1].prompt_tokens,
      );
      assert.equal(value("vllm:request_generation_tokens_sum"), 2 + 2 + 5);
      assert.equal(
        value("vllm:request_generation_tokens_sum"),
        usages[0].completion_tokens + usages[1].completion_tokens,
      );
      // one observation per request, its most generated tokens over its choices
      assert.equal(value("vllm:request_max_num_generation_tokens_count"), 2);
      assert.equal(value("vllm:request_max_num_generation_tokens_sum"), 2 + 5);

      for (const family of [
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
        "vllm:request_inference_time_seconds",
      ]) {
        assert.equal(types.get(family), "histogram", family);
        assert.deepEqual(buckets(family), VLLM_REQUEST_LATENCY_BUCKETS, family);
        assert.equal(value(`${family}_count`), 3, family);
      }
      const sum = (family: string) => value(`${family}_sum`);
      const near = (a: number, b: number, what: string) =>
        assert.ok(Math.abs(a - b) < 1e-6, `${what}: ${a} vs ${b}`);
      near(
        sum("vllm:request_queue_time_seconds") + sum("vllm:request_prefill_time_seconds"),
        sum("vllm:time_to_first_token_seconds"),
        "queued + prefill = time to first token",
      );
      near(
        sum("vllm:request_prefill_time_seconds") + sum("vllm:request_decode_time_seconds"),
        sum("vllm:request_inference_time_seconds"),
        "prefill + decode = inference",
      );
      near(
        sum("vllm:request_queue_time_seconds") + sum("vllm:request_inference_time_seconds"),
        sum("vllm:e2e_request_latency_seconds"),
        "queued + inference = end to end",
      );
      // each generation waits 15 ms before its first piece and between pieces: 1 + 1 + 4 gaps in decode
      assert.ok(sum("vllm:request_prefill_time_seconds") >= 3 * 0.012, "prefill took the first piece's wait");
      assert.ok(sum("vllm:request_decode_time_seconds") >= 6 * 0.012, "decode took the later pieces' waits");
    });
  });
});
