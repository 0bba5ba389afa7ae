import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { parseReplicaUrl } from "./cluster.js";

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
