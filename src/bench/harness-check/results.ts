/**
 * What a harness run amounts to, from what the recording proxy saw (every request and response), the
 * server's recorder export (which program each request landed on) and the harness's own exit and output:
 * requests by endpoint and status, protocol errors, the programs its turns landed on, cached prompt
 * tokens on later turns, and a verdict. Pure functions, so the parsing is tested without a harness.
 */
import { isAnonymousProgramId } from "../../core/program.js";
import type { Exchange } from "./recording-proxy.js";

/** Generation endpoints: a request here is a model call (a turn, or a side request such as a title). */
const GENERATION_ENDPOINTS = new Set([
  "/v1/messages",
  "/v1/responses",
  "/v1/chat/completions",
  "/v1/completions",
]);

export function endpointOf(path: string): string {
  const q = path.indexOf("?");
  return q < 0 ? path : path.slice(0, q);
}

export interface Usage {
  promptTokens: number | null;
  cachedTokens: number | null;
  outputTokens: number | null;
  /** finish_reason / stop_reason / status as the API names it */
  stop: string | null;
}

/** An error the response itself carries: an SSE `error` event, a failed response, a non-JSON body. */
export interface ParsedResponse {
  usage: Usage;
  error: string | null;
}

type Json = Record<string, unknown>;
const obj = (v: unknown): Json | null =>
  typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Json) : null;
const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);
const str = (v: unknown): string | null => (typeof v === "string" ? v : null);

/** The `data:` payloads of an SSE body, in order (`[DONE]` left out). */
export function sseData(body: string): { event: string | null; data: string }[] {
  const out: { event: string | null; data: string }[] = [];
  for (const block of body.split(/\r?\n\r?\n/)) {
    let event: string | null = null;
    const data: string[] = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (data.length > 0 && data.join("\n").trim() !== "[DONE]") out.push({ event, data: data.join("\n") });
  }
  return out;
}

const emptyUsage = (): Usage => ({ promptTokens: null, cachedTokens: null, outputTokens: null, stop: null });

/** Usage of one response object of any of the three APIs (a chunk, a message, a response). */
function absorb(usage: Usage, payload: Json): void {
  const u = obj(payload["usage"]);
  if (u) {
    // chat completions
    if (num(u["prompt_tokens"]) !== null) {
      usage.promptTokens = num(u["prompt_tokens"]);
      usage.outputTokens = num(u["completion_tokens"]);
      usage.cachedTokens = num(obj(u["prompt_tokens_details"])?.["cached_tokens"]) ?? usage.cachedTokens;
    }
    // Anthropic Messages: input_tokens excludes the cache reads
    if (num(u["cache_read_input_tokens"]) !== null) {
      const cached = num(u["cache_read_input_tokens"]) ?? 0;
      usage.cachedTokens = cached;
      usage.promptTokens =
        (num(u["input_tokens"]) ?? 0) + cached + (num(u["cache_creation_input_tokens"]) ?? 0);
      usage.outputTokens = num(u["output_tokens"]) ?? usage.outputTokens;
    } else if (num(u["input_tokens"]) !== null) {
      // Responses
      usage.promptTokens = num(u["input_tokens"]);
      usage.cachedTokens = num(obj(u["input_tokens_details"])?.["cached_tokens"]) ?? usage.cachedTokens;
      usage.outputTokens = num(u["output_tokens"]) ?? usage.outputTokens;
    }
  }
  const choice = obj((payload["choices"] as unknown[] | undefined)?.[0]);
  const finish = str(choice?.["finish_reason"]);
  if (finish) usage.stop = finish;
  const stop = str(payload["stop_reason"]) ?? str(obj(payload["delta"])?.["stop_reason"]);
  if (stop) usage.stop = stop;
  if (payload["object"] === "response" && str(payload["status"]) && payload["status"] !== "in_progress") {
    const reason = str(obj(payload["incomplete_details"])?.["reason"]);
    usage.stop = reason ? `${String(payload["status"])}:${reason}` : String(payload["status"]);
  }
}

/** Usage and any in-body error of a response (JSON or SSE). */
export function parseResponse(
  exchange: Pick<Exchange, "responseBody" | "responseContentType">,
): ParsedResponse {
  const usage = emptyUsage();
  const body = exchange.responseBody;
  if (exchange.responseContentType.includes("text/event-stream")) {
    let error: string | null = null;
    for (const { event, data } of sseData(body)) {
      let payload: Json | null;
      try {
        payload = obj(JSON.parse(data));
      } catch {
        error ??= `unparseable SSE data: ${data.slice(0, 200)}`;
        continue;
      }
      if (!payload) continue;
      const type = str(payload["type"]) ?? event;
      if (type === "error" || event === "error" || (payload["error"] && !type?.startsWith("response."))) {
        error ??= `stream error event: ${JSON.stringify(payload["error"] ?? payload).slice(0, 300)}`;
      }
      if (type === "response.failed") error ??= `response.failed: ${JSON.stringify(payload).slice(0, 300)}`;
      absorb(usage, payload);
      const nested = obj(payload["response"]) ?? obj(payload["message"]);
      if (nested) absorb(usage, nested);
    }
    return { usage, error };
  }
  if (body.trim() === "") return { usage, error: null };
  try {
    const payload = obj(JSON.parse(body));
    if (payload) absorb(usage, payload);
    return { usage, error: null };
  } catch {
    return { usage, error: exchange.responseContentType.includes("json") ? "unparseable JSON body" : null };
  }
}

/** One request's entry in the server's recorder export. */
export interface RecordedRequest {
  program: string;
  promptLength: number | null;
  hitLength: number | null;
  outputLength: number | null;
}

/** The recorder export (JSONL of events) by request id: its program and first admission's prompt and hit. */
export function recordedRequests(jsonl: string): Map<string, RecordedRequest> {
  const out = new Map<string, RecordedRequest>();
  for (const line of jsonl.split("\n")) {
    if (line.trim() === "") continue;
    let e: Json | null;
    try {
      e = obj(JSON.parse(line));
    } catch {
      continue;
    }
    const request = str(e?.["request"]);
    const program = str(e?.["program"]);
    if (!e || request === null || program === null) continue;
    const entry = out.get(request) ?? { program, promptLength: null, hitLength: null, outputLength: null };
    if (e["event"] === "waiting_to_running" && entry.promptLength === null) {
      entry.promptLength = num(e["prompt_length"]);
      entry.hitLength = num(e["hit_length"]);
    }
    if (e["event"] === "departure") entry.outputLength = num(e["output_length"]);
    out.set(request, entry);
  }
  return out;
}

export interface RequestRow {
  seq: number;
  method: string;
  endpoint: string;
  status: number | null;
  /**
   * "turn": a model call of the agent's own conversation (with tools, the system prompt of its first such
   * call); "side": any other model call (titles, probes, subagents, memory extraction); "other": the rest
   */
  kind: "turn" | "side" | "other";
  /** which invocation of the harness sent it (0-based), by time */
  invocation: number | null;
  program: string | null;
  promptTokens: number | null;
  cachedTokens: number | null;
  outputTokens: number | null;
  stop: string | null;
  durationMs: number;
  /** the client closed the connection before the response's last event (its own timeout, or it was killed) */
  aborted: boolean;
  /** why this exchange is a protocol error; null: it is not */
  protocolError: string | null;
}

export interface InvocationResult {
  argv: readonly string[];
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  durationS: number;
  startMs: number;
  endMs: number;
  clientErrors: string[];
  notes: string[];
  sessionId: string | null;
  exitFromOutputCap: boolean;
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content.map((part) => str(obj(part)?.["text"]) ?? "").join("\n");
}

/**
 * Which conversation a model call belongs to, by its system prompt (Messages `system`, the chat's first
 * system or developer message, Responses `instructions` or first developer/system item): a harness's
 * subagents and side tasks (Qwen Code's memory extraction, titles) have prompts of their own.
 */
export function conversationKey(body: Json): string {
  let system = "";
  if (body["system"] !== undefined) system = textOf(body["system"]);
  else if (Array.isArray(body["messages"])) {
    const first = obj(
      body["messages"].find((m) => ["system", "developer"].includes(str(obj(m)?.["role"]) ?? "")),
    );
    system = textOf(first?.["content"]);
  } else if (body["input"] !== undefined) {
    const items = Array.isArray(body["input"]) ? body["input"] : [];
    const first = obj(items.find((m) => ["system", "developer"].includes(str(obj(m)?.["role"]) ?? "")));
    system = str(body["instructions"]) ?? textOf(first?.["content"]);
  }
  return system.slice(0, 4000);
}

/** A model call's body (null: not a model call), its conversation and whether it offers tools. */
function modelCall(exchange: Exchange): { key: string; tools: boolean } | null {
  if (exchange.method !== "POST" || !GENERATION_ENDPOINTS.has(endpointOf(exchange.path))) return null;
  try {
    const body = obj(JSON.parse(exchange.requestBody)) ?? {};
    const tools = body["tools"];
    return { key: conversationKey(body), tools: Array.isArray(tools) && tools.length > 0 };
  } catch {
    return { key: "", tools: false };
  }
}

export function requestRows(
  exchanges: readonly Exchange[],
  recorded: ReadonlyMap<string, RecordedRequest>,
  invocations: readonly Pick<InvocationResult, "startMs" | "endMs">[],
): RequestRow[] {
  const sorted = [...exchanges].sort((a, b) => a.seq - b.seq);
  // the agent's own conversation: that of its first model call with tools
  const main = sorted.map(modelCall).find((c) => c?.tools)?.key ?? null;
  return sorted.map((exchange) => {
    const call = modelCall(exchange);
    const kind: RequestRow["kind"] =
      call === null ? "other" : call.tools && call.key === main ? "turn" : "side";
    const parsed = parseResponse(exchange);
    const rec = recorded.get(exchange.requestId);
    const status = exchange.status;
    let protocolError: string | null = null;
    if (exchange.error !== null && status === null) protocolError = exchange.error;
    else if (status !== null && status >= 400) {
      protocolError = `HTTP ${status}: ${exchange.responseBody.slice(0, 300)}`;
    } else if (parsed.error !== null) protocolError = parsed.error;
    const invocation = invocations.findIndex(
      (r) => exchange.startMs >= r.startMs && exchange.startMs <= r.endMs,
    );
    return {
      seq: exchange.seq,
      method: exchange.method,
      endpoint: endpointOf(exchange.path),
      status,
      kind,
      invocation: invocation < 0 ? null : invocation,
      program: rec?.program ?? null,
      promptTokens: parsed.usage.promptTokens ?? rec?.promptLength ?? null,
      cachedTokens: parsed.usage.cachedTokens ?? rec?.hitLength ?? null,
      outputTokens: parsed.usage.outputTokens ?? rec?.outputLength ?? null,
      stop: parsed.usage.stop,
      durationMs: exchange.durationMs,
      // a client that drops the connection once it read the final event (Codex) did not abort anything
      aborted: exchange.error !== null && status !== null && parsed.usage.stop === null,
      protocolError,
    };
  });
}

export type Verdict = "pass" | "fail" | "skipped";

export interface HarnessResult {
  name: string;
  pkg: string;
  version: string;
  api: string;
  verdict: Verdict;
  /** why it failed or was skipped; empty on a pass */
  reasons: string[];
  invocations: InvocationResult[];
  /** `METHOD endpoint status` -> count */
  requests: Record<string, number>;
  protocolErrors: string[];
  /**
   * programs of the agent turns, in order of first use, with their turn counts: as seen here, and as the
   * server's /dashboard/state counts them at the end (side requests on the same program included)
   */
  turnPrograms: { program: string; turns: number; dashboardTurns: number | null }[];
  /** programs of side requests (no tools) */
  sidePrograms: { program: string; requests: number }[];
  turns: number;
  /**
   * per agent turn after the first: cached and prompt tokens, and the previous turn's prompt + output
   * (what a server that keeps the model's own output could have had cached)
   */
  laterTurns: { prompt: number | null; cached: number | null; previous: number | null }[];
  /** the output cap given to the harness (null: its default) and how */
  outputCap: string;
  rows: RequestRow[];
}

function countBy<T>(items: readonly T[], key: (t: T) => string): Map<string, number> {
  const out = new Map<string, number>();
  for (const item of items) out.set(key(item), (out.get(key(item)) ?? 0) + 1);
  return out;
}

export interface SummaryInput {
  name: string;
  pkg: string;
  version: string;
  api: string;
  outputCap: string;
  invocations: InvocationResult[];
  rows: RequestRow[];
  /** `/dashboard/state`'s programs at the end (id and turns), when it was read */
  dashboardPrograms?: readonly { id: string; turns: number }[] | null;
}

/**
 * The verdict: a pass needs every invocation to end by itself with exit 0 (a harness that gave up on a
 * reply cut at the output cap did not complete its run), no protocol error (a 4xx/5xx, an error
 * in a response, a client-side API or parse error), at least two agent turns, and all of them on one
 * program that is not anonymous.
 */
export function summarize(input: SummaryInput): HarnessResult {
  const { rows, invocations } = input;
  const reasons: string[] = [];
  const protocolErrors = [
    ...rows
      .filter((r) => r.protocolError !== null)
      .map((r) => `#${r.seq} ${r.method} ${r.endpoint}: ${r.protocolError}`),
    ...invocations.flatMap((inv, i) => inv.clientErrors.map((e) => `run ${i + 1} (client): ${e}`)),
  ];
  for (const [i, inv] of invocations.entries()) {
    if (inv.timedOut) reasons.push(`run ${i + 1} timed out after ${inv.durationS.toFixed(0)} s`);
    else if (inv.exitCode !== 0) {
      const cause = inv.exitFromOutputCap
        ? " (a reply cut at the output cap: run it without --max-output-tokens)"
        : "";
      reasons.push(`run ${i + 1} exited ${inv.signal ?? inv.exitCode}${cause}`);
    }
  }
  if (protocolErrors.length > 0) reasons.push(`${protocolErrors.length} protocol error(s)`);
  const turns = rows.filter((r) => r.kind === "turn");
  const turnPrograms = [...countBy(turns, (r) => r.program ?? "(not recorded)")].map(([program, n]) => ({
    program,
    turns: n,
    dashboardTurns: input.dashboardPrograms?.find((p) => p.id === program)?.turns ?? null,
  }));
  const sidePrograms = [
    ...countBy(
      rows.filter((r) => r.kind === "side"),
      (r) => r.program ?? "(not recorded)",
    ),
  ].map(([program, n]) => ({ program, requests: n }));
  if (turns.length < 2) reasons.push(`${turns.length} agent turn(s), 2 or more needed`);
  else if (turnPrograms.length !== 1) reasons.push(`turns landed on ${turnPrograms.length} programs`);
  else if (isAnonymousProgramId(turnPrograms[0]!.program) || turnPrograms[0]!.program === "(not recorded)") {
    reasons.push("turns landed on no program");
  }
  const requests = Object.fromEntries(
    countBy(
      rows,
      (r) => `${r.method} ${r.endpoint} ${r.status ?? "-"}${r.aborted ? " (aborted by client)" : ""}`,
    ),
  );
  return {
    name: input.name,
    pkg: input.pkg,
    version: input.version,
    api: input.api,
    verdict: reasons.length === 0 ? "pass" : "fail",
    reasons,
    invocations,
    requests,
    protocolErrors,
    turnPrograms,
    sidePrograms,
    turns: turns.length,
    laterTurns: turns.slice(1).map((r, i) => {
      const prev = turns[i] as RequestRow;
      const previous =
        prev.promptTokens !== null && prev.outputTokens !== null
          ? prev.promptTokens + prev.outputTokens
          : null;
      return { prompt: r.promptTokens, cached: r.cachedTokens, previous };
    }),
    outputCap: input.outputCap,
    rows,
  };
}

/** A harness that could not be installed (no network, no disk). */
export function skipped(
  h: Pick<HarnessResult, "name" | "pkg" | "version" | "api" | "outputCap">,
  reason: string,
): HarnessResult {
  return {
    ...h,
    verdict: "skipped",
    reasons: [reason],
    invocations: [],
    requests: {},
    protocolErrors: [],
    turnPrograms: [],
    sidePrograms: [],
    turns: 0,
    laterTurns: [],
    rows: [],
  };
}

const shortId = (id: string) => (id.length > 14 ? `${id.slice(0, 13)}…` : id);

function exitsCell(r: HarnessResult): string {
  return (
    r.invocations
      .map((inv) => {
        const code = inv.timedOut ? "timeout" : String(inv.signal ?? inv.exitCode);
        return inv.exitCode !== 0 && inv.exitFromOutputCap ? `${code} (cap)` : code;
      })
      .join(", ") || "-"
  );
}

function requestsCell(r: HarnessResult): string {
  return (
    Object.entries(r.requests)
      .map(([k, n]) => `${n}x ${k.replace(/^POST /, "")}`)
      .join("; ") || "-"
  );
}

function programsCell(r: HarnessResult): string {
  const turns = r.turnPrograms
    .map((p) => {
      const dashboard =
        p.dashboardTurns !== null && p.dashboardTurns !== p.turns ? `; dashboard ${p.dashboardTurns}` : "";
      return `${shortId(p.program)} (${p.turns}${dashboard})`;
    })
    .join(", ");
  const side = r.sidePrograms.length
    ? ` + side: ${r.sidePrograms.map((p) => `${shortId(p.program)} (${p.requests})`).join(", ")}`
    : "";
  return (turns || "-") + side;
}

function cachedCell(r: HarnessResult): string {
  return (
    r.laterTurns.map((t) => (t.prompt === null ? "?" : `${t.cached ?? "?"}/${t.prompt}`)).join(", ") || "-"
  );
}

/** KV blocks are 16 tokens: a prompt's last partial block is never cached. */
const BLOCK_TOKENS = 16;

/** Later turns whose cached tokens fall short of the previous turn's prompt + output by more than a block. */
function reuseNote(r: HarnessResult): string[] {
  const known = r.laterTurns.filter((t) => t.cached !== null && t.previous !== null);
  if (known.length === 0) return [];
  const short = known
    .map((t) => (t.previous as number) - (t.cached as number))
    .filter((missing) => missing > BLOCK_TOKENS);
  const detail = short.length > 0 ? ` (short by ${short.join(", ")} tokens)` : "";
  return [
    `${r.name}: turns 2+: cached tokens cover the previous turn's prompt and output on ${known.length - short.length} of ${known.length} turns${detail}`,
  ];
}

/** The table `npm run harness-check` prints (and docs/bench.md quotes): one row per harness. */
export function formatTable(results: readonly HarnessResult[]): string {
  const header = [
    "harness",
    "version",
    "verdict",
    "exit codes",
    "requests (endpoint status)",
    "protocol errors",
    "turn programs (turns)",
    "cached/prompt, turns 2+",
  ];
  const body = results.map((r) => [
    r.name,
    r.version,
    r.verdict,
    exitsCell(r),
    requestsCell(r),
    String(r.protocolErrors.length),
    programsCell(r),
    cachedCell(r),
  ]);
  const lines = [header, header.map(() => "---"), ...body].map((cells) => `| ${cells.join(" | ")} |`);
  const notes = results.flatMap((r) => [
    ...(r.verdict === "pass"
      ? []
      : r.reasons.map((reason) => `${r.name}: ${r.verdict === "skipped" ? `skipped: ${reason}` : reason}`)),
    ...r.protocolErrors.slice(0, 5).map((e) => `${r.name}: ${e}`),
    ...r.invocations.flatMap((inv, i) => inv.notes.map((n) => `${r.name}: run ${i + 1}: ${n}`)),
    ...reuseNote(r),
  ]);
  return [...lines, ...(notes.length ? ["", ...notes] : [])].join("\n");
}
