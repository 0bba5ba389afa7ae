import assert from "node:assert/strict";
import { hostname } from "node:os";
import { describe, test } from "node:test";
import { kvEventsEndpointOf, kvEventsPodOf, parseReplicaUrl, replicaServeArgs } from "./cluster.js";

describe("parseReplicaUrl (--replica)", () => {
  test("host and port, an optional agent port, IPv6 in brackets, port 80 by default", () => {
    assert.deepEqual(parseReplicaUrl("http://10.0.0.2:8001"), { host: "10.0.0.2", port: 8001 });
    assert.deepEqual(parseReplicaUrl("http://gpu-3.internal:8001/?agent-port=9001"), {
      host: "gpu-3.internal",
      port: 8001,
      agentPort: 9001,
    });
    assert.deepEqual(parseReplicaUrl("http://[fd00::3]:8001"), { host: "fd00::3", port: 8001 });
    assert.deepEqual(parseReplicaUrl("http://10.0.0.2"), { host: "10.0.0.2", port: 80 });
  });

  test("says what is wrong", () => {
    assert.throws(
      () => parseReplicaUrl("10.0.0.2:8001"),
      /--replica 10\.0\.0\.2:8001: expected http:\/\/host:port/,
    );
    assert.throws(() => parseReplicaUrl("gpu-3"), /expected http:\/\/host:port/);
    assert.throws(() => parseReplicaUrl("https://10.0.0.2:8001"), /only http:\/\//);
    assert.throws(() => parseReplicaUrl("http://10.0.0.2:8001/v1"), /no path/);
    assert.throws(() => parseReplicaUrl("http://10.0.0.2:8001?agent=1"), /unknown parameter agent/);
    assert.throws(() => parseReplicaUrl("http://10.0.0.2:8001?agent-port=x"), /agent-port x is not a port/);
  });
});

describe("replicaServeArgs (KV events endpoints, topic and rank of each started replica)", () => {
  const env = { POD_IP: "10.0.0.7" };
  const own = (i: number) => [
    "--kv-events-pod",
    `10.0.0.7-r${i + 1}`,
    "--kv-events-data-parallel-rank",
    `${i}`,
  ];

  test("a bound tcp endpoint gets port + replica index, as vLLM's data-parallel ranks; other flags stay", () => {
    const flags = ["--builtin-model", "tiny", "--kv-events-endpoint", "tcp://*:5557", "--threads", "1"];
    const endpoints = [0, 1, 2].map((i) => kvEventsEndpointOf(replicaServeArgs(flags, i, env)));
    assert.deepEqual(endpoints, ["tcp://*:5557", "tcp://*:5558", "tcp://*:5559"]);
    assert.deepEqual(replicaServeArgs(flags, 2, env), [
      "--builtin-model",
      "tiny",
      "--kv-events-endpoint",
      "tcp://*:5559",
      "--threads",
      "1",
      ...own(2),
    ]);
    assert.deepEqual(replicaServeArgs(["--kv-events-endpoint=tcp://[::]:6000"], 1, env), [
      "--kv-events-endpoint=tcp://[::]:6001",
      ...own(1),
    ]);
  });

  test("each replica names a pod of its own in its topic (host and replica) and has its own data-parallel rank", () => {
    const flags = ["--kv-events-endpoint", "tcp://*:5557"];
    const pods = [0, 1].map((i) => kvEventsPodOf(replicaServeArgs(flags, i, env)));
    assert.deepEqual(pods, ["10.0.0.7-r1", "10.0.0.7-r2"]);
    assert.equal(kvEventsPodOf(replicaServeArgs(flags, 0, {})), `${hostname()}-r1`);
    // a pod or rank given is the base of each replica's
    assert.deepEqual(
      replicaServeArgs(
        [
          "--kv-events-endpoint",
          "tcp://*:5557",
          "--kv-events-pod",
          "gpu-a",
          "--kv-events-data-parallel-rank=4",
        ],
        2,
        env,
      ),
      [
        "--kv-events-endpoint",
        "tcp://*:5559",
        "--kv-events-pod",
        "gpu-a-r3",
        "--kv-events-data-parallel-rank=6",
      ],
    );
    // without KV events, nothing is added
    assert.deepEqual(replicaServeArgs(["--threads", "1"], 1, env), ["--threads", "1"]);
  });

  test("the replay endpoint is always bound, so each replica's moves with its index", () => {
    const flags = [
      "--kv-events-endpoint",
      "tcp://epp:5557",
      "--kv-events-replay-endpoint",
      "tcp://10.0.0.7:5600",
    ];
    assert.deepEqual(replicaServeArgs(flags, 1, env), [
      "--kv-events-endpoint",
      "tcp://epp:5557",
      "--kv-events-replay-endpoint",
      "tcp://10.0.0.7:5601",
      ...own(1),
    ]);
  });

  test("each replica's disk KV tier has a directory of its own, the same after a restart", () => {
    assert.deepEqual(replicaServeArgs(["--disk-offload-dir", "/var/kv", "--disk-offload-persist"], 1, env), [
      "--disk-offload-dir",
      "/var/kv/r2",
      "--disk-offload-persist",
    ]);
    assert.deepEqual(replicaServeArgs(["--disk-offload-dir=/var/kv"], 0, env), [
      "--disk-offload-dir=/var/kv/r1",
    ]);
    assert.deepEqual(replicaServeArgs(["--kv-events-endpoint", "ipc:///tmp/kv"], 1, env), [
      "--kv-events-endpoint",
      "ipc:///tmp/kv_dp1",
      ...own(1),
    ]);
  });

  test("an endpoint connected to, a free port and no endpoint at all stay as given", () => {
    for (const endpoint of ["tcp://epp.llm-d:5557", "tcp://*:*"]) {
      assert.deepEqual(replicaServeArgs(["--kv-events-endpoint", endpoint], 2, env), [
        "--kv-events-endpoint",
        endpoint,
        ...own(2),
      ]);
    }
    assert.equal(kvEventsEndpointOf(replicaServeArgs(["--threads", "1"], 1, env)), null);
    assert.throws(
      () => replicaServeArgs(["--kv-events-endpoint", "tcp://*:65535"], 1, env),
      /r2 would bind port 65536/,
    );
  });
});
