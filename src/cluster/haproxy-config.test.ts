import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, test } from "node:test";
import { haproxyConfig } from "./haproxy-config.js";

const HAPROXY = spawnSync("haproxy", ["-v"]).status === 0;

const config = haproxyConfig({
  host: "127.0.0.1",
  port: 8000,
  replicas: [1, 2, 3].map((i) => ({ name: `r${i}`, host: "127.0.0.1", port: 8000 + i, agentPort: 8003 + i })),
  bufferBytes: 1 << 20,
  maxConnections: 20_000,
  checkIntervalMs: 1000,
});

describe("haproxyConfig", () => {
  test("programs hash consistently to a replica; requests without one go to the least loaded", () => {
    assert.match(
      config,
      /^backend by_program\n {4}balance hash var\(txn\.program\)\n {4}hash-type consistent$/m,
    );
    assert.match(config, /^ {4}use_backend by_program if \{ var\(txn\.program\) -m found \}$/m);
    assert.match(config, /^backend least_loaded\n {4}balance leastconn$/m);
    for (const i of [1, 2, 3]) {
      assert.match(
        config,
        new RegExp(
          `^ {4}server r${i} 127\\.0\\.0\\.1:800${i} agent-check agent-addr 127\\.0\\.0\\.1 agent-port ${8003 + i}$`,
          "m",
        ),
      );
      assert.match(
        config,
        new RegExp(`^ {4}server r${i} 127\\.0\\.0\\.1:800${i} track by_program/r${i}$`, "m"),
      );
    }
  });

  test("holds as many connections as asked", () => {
    assert.match(config, /^ {4}maxconn 20000$/m);
  });

  test("a program stays on its replica (stick table), also while that replica drains", () => {
    assert.match(config, /^ {4}stick on var\(txn\.program\)$/m);
    assert.match(config, /^ {4}http-check expect rstatus \^\(200\|503\)\$$/m);
    assert.match(config, /^ {4}retry-on conn-failure empty-response response-timeout 503$/m);
  });

  test("the program id is read body first, then headers, as the server reads it", () => {
    const sources = [...config.matchAll(/set-var\(txn\.program\) (\S+)/g)].map((m) => m[1]);
    assert.deepEqual(sources, [
      "req.body,json_query('$.job_id')",
      "req.body,json_query('$.program_id')",
      "req.body,json_query('$.session_id')",
      "req.body,json_query('$.session_params.session_id')",
      "req.hdr(x-program-id)",
      "req.hdr(x-session-id)",
    ]);
  });

  test("HAProxy accepts it", { skip: HAPROXY ? false : "haproxy is not installed" }, () => {
    const dir = mkdtempSync(join(tmpdir(), "continuum-haproxy-"));
    try {
      const path = join(dir, "haproxy.cfg");
      writeFileSync(path, config);
      const check = spawnSync("haproxy", ["-c", "-f", path], { encoding: "utf8" });
      assert.equal(check.status, 0, check.stderr + check.stdout);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
