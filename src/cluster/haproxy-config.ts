/**
 * The HAProxy configuration `continuum cluster` runs: every turn of an agent program, and every call
 * naming a program in its path (`DELETE /v1/programs/{id}`), goes to the replica holding its KV
 * (consistent hashing on the program id, read where clients put it, then a stick table), requests
 * without a program id go to the least-loaded replica, a request naming a kept Responses API response (by
 * path or `previous_response_id`) goes to the replica that answered it, and one naming a conversation (by path
 * or a response's `conversation`) to the replica that keeps it, health checks take a dead replica out, a draining
 * replica (its agent says "drain") gets no new program but keeps its own, and a request that met a dead
 * or draining replica is retried on another one (it was never answered, so it is answered exactly once).
 * A replica the health check marks down (dead, or cut off by the network) has its requests ended at once:
 * those it had not started to answer are retried elsewhere, and a request that cannot be retried gets an
 * error both OpenAI's and Anthropic's clients read as their API's.
 * Replicas may be on other hosts. With a supervisor, the fleet view (/metrics, /dashboard, /replicas/)
 * and streamed requests go through it: it aggregates the replicas, and it ends a stream whose replica
 * died with an SSE error event before sending the request back to a second frontend that routes it as
 * any other.
 * Without a live supervisor (the file reused alone) those requests are routed directly.
 */

import {
  CONVERSATION_ID_HEADER,
  KEPT_STATE_FIELDS,
  KEPT_STATE_PATH_PREFIXES,
  PROGRAM_API_PATHS,
  PROGRAM_ID_SOURCES,
  PROGRAM_PATH_PREFIX,
  type ProgramApi,
  type ProgramIdForm,
  type ProgramIdLocation,
  RESPONSE_ID_HEADER,
} from "../server/programs/program-identity.js";

export interface HaproxyReplica {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  /** the replica's agent-check port (`serve --agent-port`): it says "drain" while draining */
  readonly agentPort?: number;
}

export interface HaproxyOptions {
  /** where the balancer listens */
  readonly host: string;
  readonly port: number;
  readonly replicas: readonly HaproxyReplica[];
  /** largest request HAProxy buffers whole (to read the body's program id and to retry it), bytes */
  readonly bufferBytes: number;
  /** connections HAProxy holds at once (keep-alive agents hold one through their tool calls) */
  readonly maxConnections: number;
  /** health-check interval, ms */
  readonly checkIntervalMs: number;
  /** the cluster's supervisor (fleet view, stream guard), on this host; absent: none */
  readonly supervisor?: {
    readonly port: number;
    /** where the supervisor sends streamed requests back: the second frontend's bind address */
    readonly streamsBind: string;
    /** HAProxy's stats socket, where the supervisor reads each replica's state, retries and errors */
    readonly statsBind: string;
  };
}

const ALL_APIS = Object.keys(PROGRAM_API_PATHS) as ProgramApi[];

/** An HAProxy condition: the request is posted to one of `apis` (none where that is every API). */
function postedTo(apis: readonly ProgramApi[]): string[] {
  return apis.length === ALL_APIS.length
    ? []
    : [`{ path ${apis.map((a) => PROGRAM_API_PATHS[a]).join(" ")} }`];
}

/** HAProxy's sample of what a request carries at `at`. */
function sampleAt(at: ProgramIdLocation): string {
  return "header" in at ? `req.hdr(${at.header})` : `req.body,json_query('$.${at.body.join(".")}')`;
}

function setVar(variable: string, sample: string, conditions: readonly string[]): string {
  return `    http-request set-var(${variable}) ${sample}${conditions.length > 0 ? ` if ${conditions.join(" ")}` : ""}`;
}

/** The lines setting `variable` to an id of `form` read at `at`, where `conditions` hold and it is not set yet. */
function readInto(
  variable: string,
  at: ProgramIdLocation,
  form: ProgramIdForm,
  conditions: readonly string[],
) {
  const unset = [...conditions, `!{ var(${variable}) -m found }`];
  const sample = sampleAt(at);
  switch (form) {
    case "id":
      return [setVar(variable, sample, unset)];
    case "conversation":
      // an id, or `{ id }`
      return "header" in at
        ? [setVar(variable, sample, unset)]
        : [setVar(variable, sample, unset), setVar(variable, sampleAt({ body: [...at.body, "id"] }), unset)];
    case "claude-user-id": {
      // a JSON object's session_id, else the plain string (json_query unescapes the string it returns)
      const raw = "var(txn.claude_user_id)";
      return [
        setVar("txn.claude_user_id", sample, conditions),
        setVar(variable, `${raw},json_query('$.session_id')`, [...unset, `{ ${raw} -m beg "{" }`]),
        setVar(variable, raw, [...unset, `!{ ${raw} -m beg "{" }`]),
      ];
    }
  }
}

/**
 * The frontend lines that name the program, in the order `continuum serve` reads it (program-identity.ts):
 * the path of a program's own endpoint, then each source on the APIs it is read on. The first one found is
 * the program: sources that name one must agree on a replica (it refuses them otherwise), and a stand-in
 * counts only where none of them is given.
 */
function programReads(): string[] {
  const path = `    http-request set-var(txn.program) path,field(4,/),url_dec if { path_beg ${PROGRAM_PATH_PREFIX} }`;
  return [
    path,
    ...PROGRAM_ID_SOURCES.flatMap((source) =>
      readInto("txn.program", source.at, source.form, postedTo(source.apis)),
    ),
  ];
}

/**
 * The frontend lines that name the kept state a request reads, a Responses API response or a conversation
 * (program-identity.ts): in its path, or as the response or conversation a response goes on from.
 */
const RESPONSE_READS = [
  ...KEPT_STATE_PATH_PREFIXES.map(
    (prefix) => `    http-request set-var(txn.response) path,field(4,/) if { path_beg ${prefix} }`,
  ),
  ...KEPT_STATE_FIELDS.flatMap((field) =>
    readInto("txn.response", { body: field.path }, field.form, postedTo(["responses"])),
  ),
];

/**
 * Every backend remembers which replica kept a response or a conversation it answered (the replica names
 * them in headers), in by_response's table.
 */
const REMEMBER_RESPONSE = [RESPONSE_ID_HEADER, CONVERSATION_ID_HEADER].map(
  (header) => `    stick store-response res.hdr(${header.toLowerCase()}) table by_response`,
);

const PROGRAM_BACKENDS = [
  "    use_backend by_response if { var(txn.response) -m found }",
  "    use_backend by_program if { var(txn.program) -m found }",
  "    default_backend least_loaded",
];

/**
 * The answers HAProxy makes itself (no replica up, a replica lost before it answered and the request not
 * retryable, no answer within `timeout server`): one JSON body read by OpenAI's clients (`error.message`,
 * `code`, `type`, `param`) and Anthropic's (`type: "error"`, `error.type`, `error.message`) alike.
 */
const BALANCER_ERRORS: readonly { status: number; code: string; message: string }[] = [
  {
    status: 502,
    code: "replica_lost",
    message: "the replica serving this request was lost before it answered; send the request again",
  },
  {
    status: 503,
    code: "no_replica",
    message: "no replica is up to serve this request; send it again shortly",
  },
  {
    status: 504,
    code: "replica_timeout",
    message: "the replica serving this request did not answer in time",
  },
];

/** What HAProxy does with the requests of a replica it marks down: ends them (see the header). */
const ON_DOWN = "on-marked-down shutdown-sessions";

function balancerErrors(): string[] {
  return BALANCER_ERRORS.map(({ status, code, message }) => {
    const body = JSON.stringify({ type: "error", error: { type: "api_error", message, code, param: null } });
    const quoted = `"${body.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;
    return `    http-error status ${status} content-type application/json${status === 503 ? " hdr retry-after 1" : ""} string ${quoted}`;
  });
}

function bindAddress(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

export function haproxyConfig(o: HaproxyOptions): string {
  if (o.replicas.length === 0) throw new Error("a cluster needs at least one replica");
  const fast = Math.ceil(o.checkIntervalMs / 2);
  const supervisor = o.supervisor;
  const throughSupervisor = supervisor
    ? [
        "    http-request set-var(txn.stream) req.body,json_query('$.stream')",
        "    acl fleet_view path /metrics /dashboard",
        "    acl fleet_view path_beg /dashboard/ /replicas/",
        "    acl supervisor_up nbsrv(supervisor) gt 0",
        "    use_backend supervisor if fleet_view supervisor_up",
        "    use_backend supervisor if { var(txn.stream) -m bool } supervisor_up",
      ]
    : [];
  const supervisorSections = supervisor
    ? [
        "# Streamed requests come back from the supervisor, which watches their responses.",
        "frontend streams",
        `    bind ${supervisor.streamsBind}`,
        ...programReads(),
        ...RESPONSE_READS,
        ...PROGRAM_BACKENDS,
        "",
        "# The supervisor: the fleet's /metrics and /dashboard, and the streams' guard.",
        "backend supervisor",
        // a request that met a connection the supervisor had just closed is sent again (it took none:
        // it answers every request it reads)
        "    retry-on conn-failure empty-response",
        `    server supervisor 127.0.0.1:${supervisor.port} check inter ${o.checkIntervalMs}`,
        "",
      ]
    : [];
  // the same id for a replica in every backend: stick tables hold server ids, and by_response's table is
  // written by all of them
  const servers = o.replicas.map(
    (r, i) =>
      `    server ${r.name} ${bindAddress(r.host, r.port)} id ${i + 1}` +
      (r.agentPort === undefined ? "" : ` agent-check agent-addr ${r.host} agent-port ${r.agentPort}`),
  );
  const tracked = o.replicas.map(
    (r, i) =>
      `    server ${r.name} ${bindAddress(r.host, r.port)} id ${i + 1} track by_program/${r.name} ${ON_DOWN}`,
  );
  return [
    "# Generated by `continuum cluster`; reusable as it is (haproxy -f haproxy.cfg).",
    "global",
    `    maxconn ${o.maxConnections}`,
    // the body's job_id is read from the buffered request, and only a whole request can be retried
    `    tune.bufsize ${o.bufferBytes}`,
    ...(supervisor ? [`    stats socket ${supervisor.statsBind} level user`] : []),
    "",
    "defaults",
    "    mode http",
    "    timeout connect 2s",
    "    timeout client 15m",
    "    timeout server 15m",
    "    timeout http-request 60s",
    "    option http-buffer-request",
    // a replica that died before answering: try again, elsewhere
    "    retries 3",
    "    option redispatch 1",
    "    retry-on conn-failure empty-response response-timeout 503",
    // one request per connection, on both sides: HAProxy answers a request that failed on a kept-alive
    // connection with no answer at all (for the client to retry by itself), so that one HAProxy cannot
    // retry gets the error below only as the first request of its connection
    "    option httpclose",
    ...balancerErrors(),
    "",
    "frontend continuum",
    `    bind ${bindAddress(o.host, o.port)}`,
    ...programReads(),
    ...RESPONSE_READS,
    ...throughSupervisor,
    ...PROGRAM_BACKENDS,
    "",
    ...supervisorSections,
    "# One program, one replica: its KV is there. Consistent hashing moves only the programs of a",
    "# replica that leaves (they are re-prefilled on another one).",
    "backend by_program",
    "    balance hash var(txn.program)",
    "    hash-type consistent",
    // a program placed on a replica stays there, also while that replica drains (weight 0)
    "    stick-table type string len 256 size 1m expire 2h",
    "    stick on var(txn.program)",
    ...REMEMBER_RESPONSE,
    "    option httpchk GET /health",
    // 503 is a draining replica: alive, serving its programs; its agent says drain
    "    http-check expect rstatus ^(200|503)$",
    // a server changing state (and a dead one) is checked twice as often: it leaves and rejoins sooner;
    // one marked down has its requests ended at once (those it had not answered are retried elsewhere)
    // rather than hang until `timeout server` when its host is cut off
    `    default-server check inter ${o.checkIntervalMs} fastinter ${fast} downinter ${fast} fall 2 rise 2 agent-inter ${o.checkIntervalMs} ${ON_DOWN}`,
    ...servers,
    "",
    "backend least_loaded",
    "    balance leastconn",
    ...REMEMBER_RESPONSE,
    ...tracked,
    "",
    "# A kept response (Responses API) or conversation is on the replica that answered it: a request naming",
    "# one goes there.",
    "backend by_response",
    "    balance leastconn",
    "    stick-table type string len 64 size 1m expire 24h",
    "    stick match var(txn.response)",
    ...REMEMBER_RESPONSE,
    ...tracked,
    "",
  ].join("\n");
}
