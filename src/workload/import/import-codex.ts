import { z } from "zod";
import { isRecord } from "../../tool-calls/json-objects.js";
import type { ImportOptions } from "./conversation.js";
import {
  type LogLine,
  laterMs,
  type ResponseUsage,
  type SessionImport,
  type SessionResponse,
  singleSessionImport,
  stringOr,
  timestampMs,
} from "./session-log.js";

/**
 * A line of a Codex rollout (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) that tells the file is one:
 * `{timestamp, type, payload}` with the session's metadata, or a token count.
 */
export function isCodexMarkerLine(line: LogLine): boolean {
  const { type, payload } = line;
  if (typeof line.timestamp !== "string" || !isRecord(payload)) return false;
  return type === "session_meta" || (type === "event_msg" && payload.type === "token_count");
}

const count = z.number().int().nonnegative();
const usageSchema = z.looseObject({
  input_tokens: count,
  cached_input_tokens: count.nullish(),
  output_tokens: count,
  reasoning_output_tokens: count.nullish(),
  total_tokens: count.nullish(),
});

/**
 * A `last_token_usage`; null when it is not whole. `input_tokens` counts the cached ones too (OpenAI's
 * convention). `output_tokens` already counts reasoning (Codex's `total_tokens` is input + output); a
 * count whose total shows reasoning outside the output gets it added.
 */
function usageOf(value: unknown): ResponseUsage | null {
  const parsed = usageSchema.safeParse(value);
  if (!parsed.success) return null;
  const u = parsed.data;
  const reasoning = u.reasoning_output_tokens ?? 0;
  const reasoningApart = reasoning > 0 && u.total_tokens === u.input_tokens + u.output_tokens + reasoning;
  return {
    input: u.input_tokens,
    cacheRead: u.cached_input_tokens ?? 0,
    output: u.output_tokens + (reasoningApart ? reasoning : 0),
  };
}

/** Response items the model produces; the rest (tool outputs, user and developer messages) are input. */
const TOOL_CALLS: Readonly<Record<string, (p: Record<string, unknown>) => string | undefined>> = {
  // a tool of a namespace (an MCP server's) as the model saw it: `<namespace>__<name>`
  function_call: (p) => {
    const name = stringOr(p.name);
    return name !== undefined && typeof p.namespace === "string" && p.namespace.length > 0
      ? `${p.namespace}__${name}`
      : name;
  },
  custom_tool_call: (p) => stringOr(p.name),
  local_shell_call: () => "local_shell",
};

function isModelOutput(payload: Record<string, unknown>): boolean {
  const type = payload.type;
  if (typeof type === "string" && type in TOOL_CALLS) return true;
  return (
    type === "reasoning" || type === "web_search_call" || (type === "message" && payload.role === "assistant")
  );
}

/**
 * A Codex rollout as a trace program (id: the session id of `session_meta`). One turn per response:
 * each `token_count` event that carries usage and whose running total moved (Codex repeats a count with
 * rate-limit updates) ends one, its `last_token_usage` the response's. Its tool: the first
 * function_call, custom_tool_call or local_shell_call recorded since the previous count. Its request
 * starts at the latest input item (a tool's output, a user message) recorded between the previous count
 * and the response's first output item.
 */
export function importCodexRollout(
  path: string,
  lines: readonly LogLine[],
  options: ImportOptions = {},
): SessionImport {
  let sessionId: string | undefined;
  let version: string | undefined;
  const responses: SessionResponse[] = [];
  let tools: string[] = [];
  let inputMs = Number.NaN;
  let answering = false;
  let lastTotal: string | undefined;
  for (const line of lines) {
    const { type, payload } = line;
    if (!isRecord(payload)) continue;
    const ms = timestampMs(line.timestamp);
    if (type === "session_meta") {
      sessionId ??= stringOr(payload.id);
      version ??= stringOr(payload.cli_version);
    } else if (type === "response_item") {
      const name = typeof payload.type === "string" ? TOOL_CALLS[payload.type]?.(payload) : undefined;
      if (name !== undefined) tools.push(name);
      if (isModelOutput(payload)) answering = true;
      else if (!answering) inputMs = laterMs(inputMs, ms);
    } else if (type === "event_msg" && payload.type === "token_count" && isRecord(payload.info)) {
      const { info } = payload;
      const total = info.total_token_usage === undefined ? undefined : JSON.stringify(info.total_token_usage);
      if (total !== undefined && total === lastTotal) continue;
      lastTotal = total;
      responses.push({
        usage: usageOf(info.last_token_usage),
        tool: tools[0] ?? null,
        startMs: inputMs,
        endMs: ms,
      });
      tools = [];
      inputMs = Number.NaN;
      answering = false;
    }
  }
  return singleSessionImport(path, options, { id: sessionId, agent: "codex", version }, responses);
}
