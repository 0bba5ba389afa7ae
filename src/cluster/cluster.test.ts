import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { kvEventsEndpointOf, parseReplicaUrl, replicaServeArgs } from "./cluster.js";

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

describe("replicaServeArgs (one KV events endpoint per started replica)", () => {
  test("a bound tcp endpoint gets port + replica index, as vLLM's data-parallel ranks; other flags stay", () => {
    const flags = ["--builtin-model", "tiny", "--kv-events-endpoint", "tcp://*:5557", "--threads", "1"];
    const endpoints = [0, 1, 2].map((i) => kvEventsEndpointOf(replicaServeArgs(flags, i)));
    assert.deepEqual(endpoints, ["tcp://*:5557", "tcp://*:5558", "tcp://*:5559"]);
    assert.deepEqual(replicaServeArgs(flags, 2), [
      "--builtin-model",
      "tiny",
      "--kv-events-endpoint",
      "tcp://*:5559",
      "--threads",
      "1",
    ]);
    assert.deepEqual(replicaServeArgs(["--kv-events-endpoint=tcp://[::]:6000"], 1), [
      "--kv-events-endpoint=tcp://[::]:6001",
    ]);
  });

  test("each replica's disk KV tier has a directory of its own, the same after a restart", () => {
    assert.deepEqual(replicaServeArgs(["--disk-offload-dir", "/var/kv", "--disk-offload-persist"], 1), [
      "--disk-offload-dir",
      "/var/kv/r2",
      "--disk-offload-persist",
    ]);
    assert.deepEqual(replicaServeArgs(["--disk-offload-dir=/var/kv"], 0), ["--disk-offload-dir=/var/kv/r1"]);
    assert.deepEqual(replicaServeArgs(["--kv-events-endpoint", "ipc:///tmp/kv"], 1), [
      "--kv-events-endpoint",
      "ipc:///tmp/kv_dp1",
    ]);
  });

  test("an endpoint connected to, a free port and no endpoint at all stay as given", () => {
    for (const endpoint of ["tcp://epp.llm-d:5557", "tcp://*:*"]) {
      assert.deepEqual(replicaServeArgs(["--kv-events-endpoint", endpoint], 2), [
        "--kv-events-endpoint",
        endpoint,
      ]);
    }
    assert.equal(kvEventsEndpointOf(replicaServeArgs(["--threads", "1"], 1)), null);
    assert.throws(
      () => replicaServeArgs(["--kv-events-endpoint", "tcp://*:65535"], 1),
      /r2 would bind port 65536/,
    );
  });
});
