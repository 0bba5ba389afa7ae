import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { mergeExpositions } from "./fleet.js";

const replica = (running: number, hits: number) => `# HELP vllm:num_requests_running Requests running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} ${running}
# HELP continuum:ttft_seconds Time to first token.
# TYPE continuum:ttft_seconds histogram
continuum:ttft_seconds_bucket{le="0.1",model_name="m"} 1
continuum:ttft_seconds_bucket{le="+Inf",model_name="m"} 2
continuum:ttft_seconds_sum{model_name="m"} 0.3
continuum:ttft_seconds_count{model_name="m"} 2
# HELP process_start_time_seconds Start time.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1700000000
# HELP vllm:prefix_cache_hits_total Hits.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{} ${hits}
`;

describe("mergeExpositions", () => {
  test("each family once, its samples from every replica labelled by replica", () => {
    const merged = mergeExpositions([
      { replica: "r1", text: replica(2, 10) },
      { replica: "r2", text: replica(0, 7) },
    ]);
    assert.equal(
      merged,
      `# HELP vllm:num_requests_running Requests running.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{replica="r1",model_name="m"} 2
vllm:num_requests_running{replica="r2",model_name="m"} 0
# HELP continuum:ttft_seconds Time to first token.
# TYPE continuum:ttft_seconds histogram
continuum:ttft_seconds_bucket{replica="r1",le="0.1",model_name="m"} 1
continuum:ttft_seconds_bucket{replica="r1",le="+Inf",model_name="m"} 2
continuum:ttft_seconds_sum{replica="r1",model_name="m"} 0.3
continuum:ttft_seconds_count{replica="r1",model_name="m"} 2
continuum:ttft_seconds_bucket{replica="r2",le="0.1",model_name="m"} 1
continuum:ttft_seconds_bucket{replica="r2",le="+Inf",model_name="m"} 2
continuum:ttft_seconds_sum{replica="r2",model_name="m"} 0.3
continuum:ttft_seconds_count{replica="r2",model_name="m"} 2
# HELP process_start_time_seconds Start time.
# TYPE process_start_time_seconds gauge
process_start_time_seconds{replica="r1"} 1700000000
process_start_time_seconds{replica="r2"} 1700000000
# HELP vllm:prefix_cache_hits_total Hits.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{replica="r1"} 10
vllm:prefix_cache_hits_total{replica="r2"} 7
`,
    );
  });

  test("a family only one replica exports is kept; no replica, no text", () => {
    const merged = mergeExpositions([
      { replica: "r1", text: "# TYPE a gauge\na 1\n" },
      { replica: "r2", text: "# TYPE b counter\nb_total 3\n" },
    ]);
    assert.equal(merged, '# TYPE a gauge\na{replica="r1"} 1\n# TYPE b counter\nb_total{replica="r2"} 3\n');
    assert.equal(mergeExpositions([]), "");
  });
});
