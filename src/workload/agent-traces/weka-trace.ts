import { z } from "zod";
import { formatIssues } from "../format-issues.js";
import type { AgentCall, AgentNode, AgentSpawn, AgentStep, AgentTrace } from "./agent-trace.js";
import { recordedNodeEndS } from "./agent-trace.js";

/**
 * The Weka capture format (AgentX's `cc-traces-weka-*` corpora, AIPerf's `weka_trace` loader): one JSON
 * object per session tree. Fields as AIPerf's schema has them; fields it does not name are kept (and
 * counted by `unknownFields`), not refused, so a newer corpus still imports.
 */
const finiteNonNegative = z.number().nonnegative().refine(Number.isFinite, "must be finite");

const callSchema = z.looseObject({
  t: finiteNonNegative,
  type: z.enum(["n", "s"]),
  model: z.string().optional(),
  in: z.int().nonnegative(),
  out: z.int().nonnegative(),
  hash_ids: z.array(z.int().nonnegative()).optional(),
  input_types: z.array(z.string()).optional(),
  output_types: z.array(z.string()).optional(),
  stop: z.string().nullable().optional(),
  api_time: finiteNonNegative.nullable().optional(),
  think_time: finiteNonNegative.nullable().optional(),
  ttft: finiteNonNegative.nullable().optional(),
});

type RawCall = z.infer<typeof callSchema>;

const subagentSchema = z.looseObject({
  t: finiteNonNegative,
  type: z.literal("subagent"),
  agent_id: z.string().min(1),
  subagent_type: z.string().optional(),
  status: z.string().optional(),
  duration_ms: z.int().nonnegative().nullable().optional(),
  total_tokens: z.int().nonnegative().nullable().optional(),
  tool_use_count: z.int().nonnegative().nullable().optional(),
  models: z.array(z.string()).optional(),
  tool_tokens: z.int().nonnegative().optional(),
  system_tokens: z.int().nonnegative().optional(),
  get requests(): z.ZodArray<z.ZodDiscriminatedUnion<[typeof callSchema, typeof subagentSchema]>> {
    return z.array(entrySchema);
  },
});

const entrySchema = z.discriminatedUnion("type", [callSchema, subagentSchema]);

type RawSubagent = z.infer<typeof subagentSchema>;

const traceSchema = z.looseObject({
  id: z.string().min(1),
  models: z.array(z.string()).optional(),
  block_size: z.int().positive(),
  hash_id_scope: z.enum(["local", "global"]),
  tool_tokens: z.int().nonnegative().optional(),
  system_tokens: z.int().nonnegative().optional(),
  requests: z.array(entrySchema),
  totals: z.record(z.string(), z.unknown()).nullable().optional(),
});

const CALL_FIELDS = new Set([
  "t",
  "type",
  "model",
  "in",
  "out",
  "hash_ids",
  "input_types",
  "output_types",
  "stop",
  "api_time",
  "think_time",
  "ttft",
]);
const SUBAGENT_FIELDS = new Set([
  "t",
  "type",
  "agent_id",
  "subagent_type",
  "status",
  "duration_ms",
  "total_tokens",
  "tool_use_count",
  "models",
  "tool_tokens",
  "system_tokens",
  "requests",
]);
const TRACE_FIELDS = new Set([
  "id",
  "models",
  "block_size",
  "hash_id_scope",
  "tool_tokens",
  "system_tokens",
  "requests",
]);
/** Fields kept in `extra` but understood (written back as they were). */
const CALL_KEPT = ["input_types", "output_types", "ttft"] as const;

/** Is this parsed JSON a Weka trace (by its keys)? */
export function looksLikeWekaTrace(json: unknown): boolean {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return false;
  const o = json as Record<string, unknown>;
  return Array.isArray(o.requests) && "block_size" in o && "id" in o;
}

function extraOf(o: Record<string, unknown>, known: ReadonlySet<string>): Record<string, unknown> {
  const extra: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(o)) if (!known.has(key)) extra[key] = value;
  return extra;
}

function callOf(raw: RawCall): AgentCall {
  const extra = extraOf(raw, CALL_FIELDS);
  for (const key of CALL_KEPT) if (raw[key] !== undefined) extra[key] = raw[key];
  return {
    kind: "call",
    t: raw.t,
    input: raw.in,
    output: raw.out,
    hashIds: raw.hash_ids ?? [],
    apiTimeS: raw.api_time ?? null,
    thinkTimeS: raw.think_time ?? 0,
    stop: raw.stop ?? "",
    model: raw.model ?? null,
    streaming: raw.type === "s",
    extra,
  };
}

function stepsOf(entries: readonly (RawCall | RawSubagent)[], parentId: string): AgentStep[] {
  return entries.map((entry): AgentStep => {
    if (entry.type !== "subagent") return callOf(entry as RawCall);
    return spawnOf(entry as RawSubagent, parentId);
  });
}

function spawnOf(raw: RawSubagent, parentId: string): AgentSpawn {
  const id = `${parentId}/${raw.agent_id}`;
  const agent: AgentNode = {
    id,
    agentId: raw.agent_id,
    subagentType: raw.subagent_type ?? null,
    status: raw.status ?? null,
    t: raw.t,
    models: raw.models ?? [],
    toolTokens: raw.tool_tokens ?? 0,
    systemTokens: raw.system_tokens ?? 0,
    steps: stepsOf(raw.requests, id),
    extra: extraOf(raw, SUBAGENT_FIELDS),
  };
  const recorded: Record<string, unknown> = {};
  for (const key of ["duration_ms", "total_tokens", "tool_use_count"] as const) {
    if (raw[key] !== undefined) recorded[key] = raw[key];
  }
  const durationMs = raw.duration_ms;
  return {
    kind: "subagent",
    agent,
    background: raw.status === "async_launched",
    recordedEndS:
      typeof durationMs === "number" ? raw.t + durationMs / 1000 : Math.max(raw.t, recordedNodeEndS(agent)),
    recorded,
  };
}

export type WekaParse = { ok: true; trace: AgentTrace } | { ok: false; id: string | null; problem: string };

/** A Weka trace object, or the problem that stops it (named by field path: `requests[3].in: ...`). */
export function parseWekaTrace(json: unknown): WekaParse {
  const parsed = traceSchema.safeParse(json);
  const rawId = (json as { id?: unknown } | null)?.id;
  const id = typeof rawId === "string" ? rawId : null;
  if (!parsed.success) return { ok: false, id, problem: formatIssues(parsed.error.issues) };
  const raw = parsed.data;
  if (raw.requests.length === 0) return { ok: false, id, problem: "requests: empty (no call to replay)" };
  const extra = extraOf(raw, TRACE_FIELDS);
  if (raw.totals !== undefined) extra.totals = raw.totals;
  const root: AgentNode = {
    id: raw.id,
    agentId: null,
    subagentType: null,
    status: null,
    t: 0,
    models: raw.models ?? [],
    toolTokens: raw.tool_tokens ?? 0,
    systemTokens: raw.system_tokens ?? 0,
    steps: stepsOf(raw.requests, raw.id),
    extra: {},
  };
  return {
    ok: true,
    trace: {
      id: raw.id,
      format: "weka",
      blockSize: raw.block_size,
      hashScope: raw.hash_id_scope,
      root,
      extra,
    },
  };
}

function callJson(call: AgentCall): Record<string, unknown> {
  return {
    t: call.t,
    type: call.streaming ? "s" : "n",
    ...(call.model === null ? {} : { model: call.model }),
    in: call.input,
    out: call.output,
    hash_ids: call.hashIds,
    stop: call.stop,
    api_time: call.apiTimeS,
    think_time: call.thinkTimeS,
    ...call.extra,
  };
}

function nodeRequestsJson(node: AgentNode): Record<string, unknown>[] {
  return node.steps.map((step) => {
    if (step.kind === "call") return callJson(step);
    const agent = step.agent;
    return {
      t: agent.t,
      type: "subagent",
      agent_id: agent.agentId,
      ...(agent.subagentType === null ? {} : { subagent_type: agent.subagentType }),
      ...(agent.status === null ? {} : { status: agent.status }),
      ...step.recorded,
      models: agent.models,
      tool_tokens: agent.toolTokens,
      system_tokens: agent.systemTokens,
      requests: nodeRequestsJson(agent),
      ...agent.extra,
    };
  });
}

/** A trace as a Weka object; `parseWekaTrace` reads it back to an equal trace. */
export function wekaTraceJson(trace: AgentTrace): Record<string, unknown> {
  return {
    id: trace.id,
    models: trace.root.models,
    block_size: trace.blockSize,
    hash_id_scope: trace.hashScope,
    tool_tokens: trace.root.toolTokens,
    system_tokens: trace.root.systemTokens,
    requests: nodeRequestsJson(trace.root),
    ...trace.extra,
  };
}

/** The names of fields the reader does not know, with how often each occurs, over a trace tree. */
export function unknownFields(trace: AgentTrace): Map<string, number> {
  const counts = new Map<string, number>();
  const add = (extra: Readonly<Record<string, unknown>>, kept: readonly string[] = []) => {
    for (const key of Object.keys(extra)) {
      if (key === "totals" || kept.includes(key)) continue;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
  };
  add(trace.extra);
  const visit = (node: AgentNode) => {
    add(node.extra);
    for (const step of node.steps) {
      if (step.kind === "call") add(step.extra, CALL_KEPT);
      else visit(step.agent);
    }
  };
  visit(trace.root);
  return counts;
}
