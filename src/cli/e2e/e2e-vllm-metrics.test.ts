/**
 * The vLLM families llm-d's endpoint picker scrapes and vLLM's Grafana dashboard plots, on the real engine:
 * scraped while agent programs run more turns at once than there are run slots, then checked against what
 * the responses and the scheduler say happened.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import type OpenAI from "openai";
import { llamaSkip } from "../../engine/test-support/llama-skip.js";
import { parsePrometheus, type Sample } from "../../server/test-support/prometheus-text.js";
import { startLlamaServer } from "../test-support/llama-server.js";

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;

const PROGRAMS = 4;
const TURNS = 3;
const MAX_NUM_SEQS = 2;

describe("vLLM's metric families under load (real engine, tiny model)", { skip: llamaSkip }, () => {
  test("every family is there, and its values agree with the responses and the scheduler", async () => {
    const s = await startLlamaServer([
      "--scheduling-policy",
      "cachettl",
      "--max-num-seqs",
      String(MAX_NUM_SEQS),
    ]);
    try {
      const scrape = async () => parsePrometheus(await (await fetch(`${s.server.url}/metrics`)).text());
      const peak = { running: 0, waiting: 0, usage: 0 };
      let polling = true;
      const poller = (async () => {
        while (polling) {
          const { samples } = await scrape();
          const read = (name: string) => samples.find((x) => x.name === name)?.value ?? Number.NaN;
          const usage = read("vllm:kv_cache_usage_perc");
          assert.ok(usage >= 0 && usage <= 1, `kv_cache_usage_perc ${usage}`);
          assert.ok(read("vllm:num_requests_running") <= MAX_NUM_SEQS);
          peak.running = Math.max(peak.running, read("vllm:num_requests_running"));
          peak.waiting = Math.max(peak.waiting, read("vllm:num_requests_waiting"));
          peak.usage = Math.max(peak.usage, usage);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      })();

      const usages: OpenAI.CompletionUsage[] = [];
      await Promise.all(
        Array.from({ length: PROGRAMS }, async (_, p) => {
          const messages: Message[] = [
            {
              role: "system",
              content: `You are agent ${p}, working through a repository one tool at a time.`,
            },
            { role: "user", content: `Task ${p}: find the failing test and explain why it fails.` },
          ];
          for (let turn = 0; turn < TURNS; turn++) {
            const response = await s.openai.chat.completions.create(
              { model: s.model, messages, max_tokens: 24, temperature: 0 },
              {
                headers: { "x-program-id": `metrics-agent-${p}`, "x-last-step": String(turn === TURNS - 1) },
              },
            );
            usages.push(response.usage!);
            messages.push({ role: "assistant", content: response.choices[0]!.message.content ?? "" });
            messages.push({ role: "user", content: `Observation ${turn}: 2 files listed.` });
          }
        }),
      );
      polling = false;
      await poller;

      assert.ok(peak.running >= 1, "requests ran");
      assert.ok(peak.waiting >= 1, `${PROGRAMS} programs on ${MAX_NUM_SEQS} run slots queue`);
      assert.ok(peak.usage > 0, "the KV pool was in use");

      const { types, samples } = await scrape();
      const of = (name: string) => samples.filter((x) => x.name === name);
      const value = (name: string) => {
        const found = of(name);
        assert.equal(found.length, 1, name);
        return (found[0] as Sample).value;
      };
      for (const family of [
        "vllm:num_requests_waiting",
        "vllm:num_requests_running",
        "vllm:kv_cache_usage_perc",
        "vllm:cache_config_info",
        "vllm:lora_requests_info",
        "vllm:time_to_first_token_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:request_success_total",
        "vllm:num_preemptions_total",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:request_prompt_tokens",
        "vllm:request_generation_tokens",
        "vllm:request_max_num_generation_tokens",
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
        "vllm:request_inference_time_seconds",
      ]) {
        assert.ok(types.has(family), `${family} is exported`);
      }

      const requests = PROGRAMS * TURNS;
      const sum = (f: (u: OpenAI.CompletionUsage) => number) => usages.reduce((a, u) => a + f(u), 0);
      assert.equal(
        value("vllm:prompt_tokens_total"),
        sum((u) => u.prompt_tokens),
      );
      assert.equal(
        value("vllm:generation_tokens_total"),
        sum((u) => u.completion_tokens),
      );
      assert.equal(
        of("vllm:request_success_total").reduce((a, x) => a + x.value, 0),
        requests,
        "every request finished once",
      );
      assert.equal(value("vllm:time_to_first_token_seconds_count"), requests);
      assert.equal(value("vllm:e2e_request_latency_seconds_count"), requests);
      assert.ok(
        value("vllm:e2e_request_latency_seconds_sum") >= value("vllm:time_to_first_token_seconds_sum"),
        "a request ends after its first token",
      );

      assert.equal(value("vllm:request_prompt_tokens_sum"), value("vllm:prompt_tokens_total"));
      assert.equal(value("vllm:request_generation_tokens_sum"), value("vllm:generation_tokens_total"));
      assert.equal(value("vllm:request_max_num_generation_tokens_count"), requests, "one choice each");
      assert.equal(
        value("vllm:request_max_num_generation_tokens_sum"),
        value("vllm:generation_tokens_total"),
      );
      for (const phase of ["queue", "prefill", "decode", "inference"]) {
        assert.equal(value(`vllm:request_${phase}_time_seconds_count`), requests, phase);
      }
      assert.ok(
        value("vllm:request_queue_time_seconds_sum") > 0,
        `${PROGRAMS} programs on ${MAX_NUM_SEQS} run slots: some waited to be admitted`,
      );
      const phases =
        value("vllm:request_queue_time_seconds_sum") + value("vllm:request_inference_time_seconds_sum");
      assert.ok(
        Math.abs(phases - value("vllm:e2e_request_latency_seconds_sum")) < 1e-6,
        "queued + inference = end to end",
      );

      const stats = s.engine.scheduler.stats;
      const queries = value("vllm:prefix_cache_queries_total");
      const hits = value("vllm:prefix_cache_hits_total");
      assert.equal(queries, stats.prefixQueryTokens);
      assert.equal(hits, stats.prefixHitTokens);
      assert.ok(hits <= queries);
      assert.ok(hits > 0, "later turns hit their earlier turns' prefix");
      assert.ok(
        usages.some((u) => (u.prompt_tokens_details?.cached_tokens ?? 0) > 0),
        "and the responses say so",
      );
      assert.equal(value("vllm:num_preemptions_total"), stats.preemptions);
      assert.equal(value("vllm:num_requests_running"), 0);
      assert.equal(value("vllm:num_requests_waiting"), 0);

      const [info] = of("vllm:cache_config_info");
      assert.equal(info?.labels["block_size"], "16");
      assert.equal(info?.labels["num_gpu_blocks"], String(s.engine.scheduler.numKvBlocks));
      assert.equal(info?.labels["model_name"], s.model);
    } finally {
      await s.close();
    }
  });
});
