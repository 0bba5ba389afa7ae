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

/** Two replicas started here, two on other hosts (one without an agent check), and the supervisor. */
const fleet = haproxyConfig({
  host: "0.0.0.0",
  port: 8000,
  replicas: [
    { name: "r1", host: "127.0.0.1", port: 8001, agentPort: 8003 },
    { name: "r2", host: "127.0.0.1", port: 8002, agentPort: 8004 },
    { name: "r3", host: "10.0.0.2", port: 8001, agentPort: 9001 },
    { name: "r4", host: "fd00::3", port: 8001 },
  ],
  bufferBytes: 1 << 20,
  maxConnections: 4096,
  checkIntervalMs: 1000,
  supervisor: {
    port: 41234,
    streamsBind: "abns@continuum-cluster-8000-1",
    statsBind: "abns@continuum-cluster-8000-1-stats",
  },
});

/** The lines of one section (`frontend continuum`, `backend by_program`...). */
function section(text: string, header: string): string[] {
  const lines = text.split("\n");
  const start = lines.indexOf(header);
  assert.ok(start >= 0, `no section ${header}`);
  const end = lines.findIndex((line, i) => i > start && line === "");
  return lines.slice(start + 1, end);
}

function programSources(lines: readonly string[]): string[] {
  return lines.flatMap((line) => /set-var\(txn\.program\) (.+)$/.exec(line)?.[1] ?? []);
}

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
          `^ {4}server r${i} 127\\.0\\.0\\.1:800${i} id ${i} agent-check agent-addr 127\\.0\\.0\\.1 agent-port ${8003 + i}$`,
          "m",
        ),
      );
      assert.match(
        config,
        new RegExp(
          `^ {4}server r${i} 127\\.0\\.0\\.1:800${i} id ${i} track by_program/r${i} on-marked-down shutdown-sessions$`,
          "m",
        ),
      );
    }
  });

  test("a request naming a kept response or conversation goes to the replica that keeps it, whichever backend answered", () => {
    for (const text of [config, fleet]) {
      const front = section(text, "frontend continuum");
      for (const prefix of ["/v1/responses/", "/v1/conversations/"]) {
        assert.ok(
          front.includes(`    http-request set-var(txn.response) path,field(4,/) if { path_beg ${prefix} }`),
          prefix,
        );
      }
      for (const field of ["$.previous_response_id", "$.conversation", "$.conversation.id"]) {
        assert.ok(
          front.includes(
            `    http-request set-var(txn.response) req.body,json_query('${field}') if { path /v1/responses } !{ var(txn.response) -m found }`,
          ),
          field,
        );
      }
      const uses = front.filter((l) => l.includes("by_response") || l.includes("by_program"));
      assert.match(uses[0] ?? "", /use_backend by_response/, "before program affinity");
      const byResponse = section(text, "backend by_response");
      assert.ok(byResponse.includes("    stick match var(txn.response)"));
      for (const backend of ["by_program", "least_loaded", "by_response"]) {
        for (const header of ["x-continuum-response-id", "x-continuum-conversation-id"]) {
          assert.ok(
            section(text, `backend ${backend}`).includes(
              `    stick store-response res.hdr(${header}) table by_response`,
            ),
            `${backend} ${header}`,
          );
        }
      }
    }
    const streams = section(fleet, "frontend streams");
    assert.ok(streams.some((l) => l.startsWith("    http-request set-var(txn.response)")));
  });

  test("a replica marked down has its requests ended at once, in every backend (they are retried elsewhere when they can be)", () => {
    for (const text of [config, fleet]) {
      const defaults = section(text, "backend by_program").filter((l) => l.startsWith("    default-server "));
      assert.equal(defaults.length, 1);
      assert.match(defaults[0] ?? "", / on-marked-down shutdown-sessions$/);
      for (const backend of ["least_loaded", "by_response"]) {
        const servers = section(text, `backend ${backend}`).filter((l) => l.startsWith("    server "));
        assert.ok(servers.length > 0);
        for (const server of servers)
          assert.match(server, / track by_program\/r\d on-marked-down shutdown-sessions$/);
      }
    }
  });

  test("the errors HAProxy makes itself are JSON that OpenAI's and Anthropic's clients read", () => {
    const errors = section(config, "defaults").flatMap((line) => {
      const m =
        /^ {4}http-error status (\d+) content-type application\/json (?:hdr retry-after 1 )?string "(.*)"$/.exec(
          line,
        );
      return m ? [{ status: Number(m[1]), body: JSON.parse((m[2] as string).replace(/\\(.)/g, "$1")) }] : [];
    });
    assert.deepEqual(
      errors.map((e) => [e.status, e.body.error.code]),
      [
        [502, "replica_lost"],
        [503, "no_replica"],
        [504, "replica_timeout"],
      ],
    );
    for (const { body } of errors) {
      // OpenAI's: error.{message, type, param, code}; Anthropic's: type "error", error.{type, message}
      assert.equal(body.type, "error");
      assert.equal(typeof body.error.message, "string");
      assert.equal(body.error.type, "api_error");
      assert.ok("param" in body.error);
    }
  });

  test("holds as many connections as asked", () => {
    assert.match(config, /^ {4}maxconn 20000$/m);
  });

  test("a program stays on its replica (stick table), also while that replica drains", () => {
    assert.match(config, /^ {4}stick on var\(txn\.program\)$/m);
    assert.match(config, /^ {4}http-check expect rstatus \^\(200\|503\)\$$/m);
    assert.match(config, /^ {4}retry-on conn-failure empty-response response-timeout 503$/m);
    assert.match(config, /^ {4}option httpclose$/m);
  });

  test("the program id is read from a program's path, then each source on the APIs serve reads it on, in its order", () => {
    const openAi = "{ path /v1/chat/completions /v1/completions /v1/responses }";
    const unset = "!{ var(txn.program) -m found }";
    const user = "var(txn.claude_user_id)";
    assert.deepEqual(programSources(section(config, "frontend continuum")), [
      "path,field(4,/),url_dec if { path_beg /v1/programs/ }",
      `req.body,json_query('$.job_id') if ${openAi} ${unset}`,
      `req.body,json_query('$.program_id') if ${openAi} ${unset}`,
      `req.body,json_query('$.session_id') if ${openAi} ${unset}`,
      `req.body,json_query('$.session_params.session_id') if ${openAi} ${unset}`,
      // Claude Code's session: its header, else the session_id of its metadata.user_id, or that plain id
      `req.hdr(x-claude-code-session-id) if { path /v1/messages } ${unset}`,
      `${user},json_query('$.session_id') if { path /v1/messages } ${unset} { ${user} -m beg "{" }`,
      `${user} if { path /v1/messages } ${unset} !{ ${user} -m beg "{" }`,
      `req.hdr(x-program-id) if ${unset}`,
      `req.hdr(x-session-id) if ${unset}`,
      // a conversation and Codex's ids stand in on /v1/responses only, as on the replica
      `req.body,json_query('$.conversation') if { path /v1/responses } ${unset}`,
      `req.body,json_query('$.conversation.id') if { path /v1/responses } ${unset}`,
      `req.hdr(session-id) if { path /v1/responses } ${unset}`,
      `req.hdr(thread-id) if { path /v1/responses } ${unset}`,
      `req.body,json_query('$.client_metadata.session_id') if { path /v1/responses } ${unset}`,
      `req.body,json_query('$.prompt_cache_key') if { path /v1/responses } ${unset}`,
    ]);
    assert.ok(
      section(config, "frontend continuum").includes(
        "    http-request set-var(txn.claude_user_id) req.body,json_query('$.metadata.user_id') if { path /v1/messages }",
      ),
    );
  });

  test("no supervisor: no fleet view, no stream frontend, no stats socket", () => {
    assert.doesNotMatch(config, /supervisor|frontend streams|stats socket/);
    assert.ok(
      section(fleet, "global").includes("    stats socket abns@continuum-cluster-8000-1-stats level user"),
    );
  });

  test("replicas on other hosts are checked and hashed as the local ones", () => {
    const servers = section(fleet, "backend by_program").filter((l) => l.startsWith("    server "));
    assert.deepEqual(servers, [
      "    server r1 127.0.0.1:8001 id 1 agent-check agent-addr 127.0.0.1 agent-port 8003",
      "    server r2 127.0.0.1:8002 id 2 agent-check agent-addr 127.0.0.1 agent-port 8004",
      "    server r3 10.0.0.2:8001 id 3 agent-check agent-addr 10.0.0.2 agent-port 9001",
      "    server r4 [fd00::3]:8001 id 4",
    ]);
    assert.match(fleet, /^ {4}bind 0\.0\.0\.0:8000$/m);
    assert.match(
      fleet,
      /^ {4}server r4 \[fd00::3\]:8001 id 4 track by_program\/r4 on-marked-down shutdown-sessions$/m,
    );
  });

  test("the fleet view and streamed requests go to a live supervisor, which sends streams back to a frontend routing as the first", () => {
    const front = section(fleet, "frontend continuum");
    const uses = front.filter((l) => l.includes("use_backend") || l.includes("default_backend"));
    assert.deepEqual(uses, [
      "    use_backend supervisor if fleet_view supervisor_up",
      "    use_backend supervisor if { var(txn.stream) -m bool } supervisor_up",
      "    use_backend by_response if { var(txn.response) -m found }",
      "    use_backend by_program if { var(txn.program) -m found }",
      "    default_backend least_loaded",
    ]);
    assert.ok(front.includes("    acl fleet_view path /metrics /dashboard"));
    assert.ok(front.includes("    acl fleet_view path_beg /dashboard/ /replicas/"));
    assert.ok(front.includes("    acl supervisor_up nbsrv(supervisor) gt 0"));
    const streams = section(fleet, "frontend streams");
    assert.equal(streams[0], "    bind abns@continuum-cluster-8000-1");
    assert.deepEqual(programSources(streams), programSources(front));
    assert.ok(!streams.some((l) => l.includes("supervisor")), "a guarded stream is not guarded again");
    assert.deepEqual(section(fleet, "backend supervisor"), [
      "    retry-on conn-failure empty-response",
      "    server supervisor 127.0.0.1:41234 check inter 1000",
    ]);
  });

  test("HAProxy accepts both, without warnings", {
    skip: HAPROXY ? false : "haproxy is not installed",
  }, () => {
    const dir = mkdtempSync(join(tmpdir(), "continuum-haproxy-"));
    try {
      for (const [name, text] of [
        ["local.cfg", config],
        ["fleet.cfg", fleet],
      ] as const) {
        const path = join(dir, name);
        writeFileSync(path, text);
        const check = spawnSync("haproxy", ["-c", "-f", path], { encoding: "utf8" });
        assert.equal(check.status, 0, check.stderr + check.stdout);
        assert.doesNotMatch(check.stderr + check.stdout, /WARNING/, `${name}: ${check.stderr}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
