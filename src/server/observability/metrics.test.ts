/** Prometheus /metrics: continuum: and vllm: series, latency histograms. */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { chat } from "../test-support/openai-requests.js";
import { withServer } from "../test-support/test-server.js";

describe("robustness", () => {
  test("time per output token and inter-token latency histograms", async () => {
    await withServer({ reply: () => ["a ", "b ", "c ", "d"], delayMs: 20 }, {}, async (t) => {
      const response = await t.post("/v1/chat/completions", chat());
      await response.json();
      const text = await (await fetch(`${t.url}/metrics`)).text();
      const count = (name: string) =>
        Number(new RegExp(`^${name}_count(?:\\{[^}]*\\})? (\\d+)`, "m").exec(text)?.[1] ?? -1);
      assert.equal(count("continuum:request_time_per_output_token_seconds"), 1);
      assert.equal(count("continuum:inter_token_latency_seconds"), 3);
    });
  });

  test("vLLM's token latency histograms: vllm:inter_token_latency_seconds and vllm:time_per_output_token_seconds per token, the request TPOT per request", async () => {
    await withServer({ reply: () => ["a ", "b ", "c ", "d"], delayMs: 30 }, {}, async (t) => {
      for (let i = 0; i < 2; i++) await (await t.post("/v1/chat/completions", chat())).json();
      const text = await (await fetch(`${t.url}/metrics`)).text();
      const series = (name: string, suffix: string) =>
        Number(new RegExp(`^${name}_${suffix}(?:\\{[^}]*\\})? ([0-9.e+-]+)`, "m").exec(text)?.[1] ?? -1);
      const buckets = (name: string) =>
        [...text.matchAll(new RegExp(`^${name}_bucket\\{le="([^"]+)"`, "gm"))].map((m) => m[1]);
      const vllmBuckets = [
        "0.01",
        "0.025",
        "0.05",
        "0.075",
        "0.1",
        "0.15",
        "0.2",
        "0.3",
        "0.4",
        "0.5",
        "0.75",
        "1",
        "2.5",
        "5",
        "7.5",
        "10",
        "20",
        "40",
        "80",
        "+Inf",
      ];
      // Two requests of four pieces each: three intervals per request.
      for (const name of ["vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"]) {
        assert.equal(series(name, "count"), 6, name);
        assert.ok(series(name, "sum") >= 6 * 0.025, `${name}: six intervals of about 30 ms`);
        assert.deepEqual(buckets(name), vllmBuckets, name);
      }
      assert.equal(series("vllm:request_time_per_output_token_seconds", "count"), 2);
      assert.ok(series("vllm:request_time_per_output_token_seconds", "sum") >= 2 * 0.025);
      assert.deepEqual(buckets("vllm:request_time_per_output_token_seconds"), vllmBuckets);
      assert.match(text, /^vllm:inter_token_latency_seconds_count\{model_name="fake-model"\} 6$/m);
    });
  });
});

/** Prometheus text format: `# HELP`/`# TYPE` lines, then `name{label="v",...} value` samples. */
function parseExposition(text: string): Map<string, { labels: string; value: number }[]> {
  const samples = new Map<string, { labels: string; value: number }[]>();
  const types = new Set<string>();
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) {
      types.add(type[1] as string);
      continue;
    }
    if (line.startsWith("# HELP ")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? (\S+)$/.exec(
      line,
    );
    assert.ok(m, `not a Prometheus sample line: ${line}`);
    const name = m[1] as string;
    const family = name.replace(/_(bucket|sum|count)$/, "");
    assert.ok(types.has(name) || types.has(family), `sample before its # TYPE: ${line}`);
    const value = Number(m[3]);
    assert.ok(!Number.isNaN(value), line);
    samples.set(name, [...(samples.get(name) ?? []), { labels: m[2] ?? "", value }]);
  }
  return samples;
}

describe("metrics", () => {
  test("the vllm: series routers scrape exist, parse, and agree with the continuum: ones", async () => {
    await withServer(
      {
        metrics: {
          running: 3,
          waiting: 5,
          longestWaitS: 12.5,
          kvUsage: 0.375,
          prefixQueryTokens: 200,
          prefixHitTokens: 50,
        },
      },
      {},
      async (t) => {
        const samples = parseExposition(await (await fetch(`${t.url}/metrics`)).text());
        const one = (name: string) => {
          const found = samples.get(name);
          assert.ok(found && found.length === 1, `${name}: ${JSON.stringify(found)}`);
          return found[0] as { labels: string; value: number };
        };
        for (const [vllm, ours] of [
          ["vllm:num_requests_running", "continuum:num_requests_running"],
          ["vllm:num_requests_waiting", "continuum:num_requests_waiting"],
          ["vllm:kv_cache_usage_perc", "continuum:kv_cache_usage_perc"],
          ["vllm:gpu_cache_usage_perc", "continuum:kv_cache_usage_perc"],
          ["vllm:gpu_prefix_cache_queries_total", "continuum:prefix_cache_queries_total"],
          ["vllm:gpu_prefix_cache_hits_total", "continuum:prefix_cache_hits_total"],
        ] as const) {
          assert.equal(one(vllm).value, one(ours).value, vllm);
        }
        assert.equal(one("vllm:num_requests_waiting").value, 5);
        assert.equal(one("continuum:longest_queue_wait_seconds").value, 12.5);
        assert.equal(one("vllm:gpu_prefix_cache_hit_rate").value, 0.25);
        const info = one("vllm:cache_config_info");
        assert.equal(info.value, 1);
        assert.match(info.labels, /block_size="16"/);
        assert.match(info.labels, /num_gpu_blocks="1024"/);
      },
    );
  });

  test("Prometheus exposition with vLLM-parallel names", async () => {
    await withServer(
      {
        metrics: {
          pinnedPrograms: 2,
          kvUsage: 0.25,
          prefixQueryTokens: 100,
          prefixHitTokens: 40,
          preemptions: 3,
          modelComputeS: 12.5,
          samplingS: 0.75,
        },
      },
      {},
      async (t) => {
        await (await t.post("/v1/chat/completions", chat())).json();
        const response = await fetch(`${t.url}/metrics`);
        assert.match(response.headers.get("content-type") ?? "", /^text\/plain/);
        const text = await response.text();
        for (const name of [
          "continuum:num_requests_running",
          "continuum:num_requests_waiting",
          "continuum:num_pinned_programs",
          "continuum:kv_cache_usage_perc",
          "continuum:prefix_cache_queries_total",
          "continuum:prefix_cache_hits_total",
          "continuum:num_preemptions_total",
        ]) {
          assert.match(text, new RegExp(`^# TYPE ${name} `, "m"), name);
        }
        for (const name of [
          "continuum:time_to_first_token_seconds",
          "continuum:e2e_request_latency_seconds",
          "continuum:request_queue_time_seconds",
        ]) {
          assert.match(text, new RegExp(`^# TYPE ${name} histogram$`, "m"), name);
          assert.match(text, new RegExp(`^${name}_count\\{model_name="fake-model"\\} 1$`, "m"), name);
        }
        assert.match(text, /^continuum:num_pinned_programs\{model_name="fake-model"\} 2$/m);
        assert.match(text, /^continuum:kv_cache_usage_perc\{model_name="fake-model"\} 0.25$/m);
        assert.match(text, /^continuum:prefix_cache_hits_total\{model_name="fake-model"\} 40$/m);
        // what share of the model's time the host spends sampling: rate(sampling) / rate(model compute)
        assert.match(text, /^continuum:model_compute_seconds_total\{model_name="fake-model"\} 12.5$/m);
        assert.match(text, /^continuum:sampling_seconds_total\{model_name="fake-model"\} 0.75$/m);
        // counters do not double on a second scrape
        const again = await (await fetch(`${t.url}/metrics`)).text();
        assert.match(again, /^continuum:prefix_cache_queries_total\{model_name="fake-model"\} 100$/m);
        assert.match(
          again,
          /^continuum:request_success_total\{finished_reason="stop",model_name="fake-model"\} 1$/m,
        );
      },
    );
  });
});
