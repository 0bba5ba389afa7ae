import { basename } from "node:path";
import { z } from "zod";
import { isRecord } from "../../tool-calls/json-objects.js";
import type { ImportOptions } from "./conversation.js";
import {
  type LogLine,
  laterMs,
  type ResponseUsage,
  responsesToProgram,
  type SessionImport,
  type SessionResponse,
  stringOr,
  timestampMs,
} from "./session-log.js";

/**
 * A line of a Claude Code session log (`~/.claude/projects/<project>/<session-id>.jsonl`): a user or
 * assistant line carries its session id and an Anthropic Messages API message. Other agents' logs that
 * look alike (Qwen Code's, with Gemini `parts`) do not match.
 */
export function isClaudeCodeLine(line: LogLine): boolean {
  const { type, message } = line;
  if ((type !== "user" && type !== "assistant") || typeof line.sessionId !== "string") return false;
  return (
    isRecord(message) &&
    message.role === type &&
    (typeof message.content === "string" || Array.isArray(message.content))
  );
}

const count = z.number().int().nonnegative();
const usageSchema = z.looseObject({
  input_tokens: count,
  output_tokens: count,
  cache_creation_input_tokens: count.nullish(),
  cache_read_input_tokens: count.nullish(),
});

/** The usage of an assistant line; null when it has none that is whole. */
function lineUsage(message: Record<string, unknown>): ResponseUsage | null {
  const parsed = usageSchema.safeParse(message.usage);
  if (!parsed.success) return null;
  const u = parsed.data;
  const cacheRead = u.cache_read_input_tokens ?? 0;
  return {
    input: u.input_tokens + (u.cache_creation_input_tokens ?? 0) + cacheRead,
    cacheRead,
    output: u.output_tokens,
  };
}

/** Lines of one conversation: the main one, or a subagent's sidechain. */
interface Stream {
  /** "" for the main conversation, else the sidechain's name */
  name: string;
  lines: { index: number; line: LogLine }[];
}

/**
 * The file's conversations. Main: lines not marked `isSidechain`. A sidechain (a subagent the Task tool
 * ran) is named by its `agentId` where lines carry one (newer versions, which write each subagent to
 * `<session-id>/subagents/agent-<id>.jsonl`); else (older versions, inline in the session file) by
 * following `parentUuid` back to the sidechain's first line.
 */
function streamsOf(lines: readonly LogLine[]): Stream[] {
  const streams = new Map<string, Stream>();
  const sidechainOf = new Map<string, string>();
  let unnamed = 0;
  lines.forEach((line, index) => {
    if (line.type !== "user" && line.type !== "assistant" && line.type !== "attachment") return;
    let name = "";
    if (line.isSidechain === true) {
      const agentId = stringOr(line.agentId);
      const parent = stringOr(line.parentUuid);
      if (agentId !== undefined) name = `agent-${agentId}`;
      else if (parent !== undefined && sidechainOf.has(parent)) name = sidechainOf.get(parent)!;
      else name = `sidechain-${++unnamed}`;
      const uuid = stringOr(line.uuid);
      if (uuid !== undefined) sidechainOf.set(uuid, name);
    }
    let stream = streams.get(name);
    if (stream === undefined) {
      stream = { name, lines: [] };
      streams.set(name, stream);
    }
    stream.lines.push({ index, line });
  });
  return [...streams.values()];
}

interface Response {
  firstIndex: number;
  endMs: number;
  usage: ResponseUsage | null;
  tools: string[];
  requestRef: string | undefined;
}

/**
 * A conversation's API responses. Claude Code writes one line per content block of a response, all
 * sharing `message.id`: they are grouped (by `requestId`, then the line's `uuid`, where there is no id),
 * even when tool results come between them; the response ends at its last line's timestamp, its usage is
 * the largest each count reaches over its lines (earlier lines may carry a partial output count).
 * Client-made messages (model `<synthetic>`: interruptions, API errors) are no responses. A request
 * starts at the `api-request` line the response names (`requestRef`) where the log has one, else at the
 * latest user or attachment line (prompt, tool result) between the previous response and this one.
 */
function responsesOf(stream: Stream, requestsAt: ReadonlyMap<string, number>): SessionResponse[] {
  const responses: Response[] = [];
  const byKey = new Map<string, Response>();
  const inputs: { index: number; ms: number }[] = [];
  for (const { index, line } of stream.lines) {
    const ms = timestampMs(line.timestamp);
    if (line.type !== "assistant") {
      inputs.push({ index, ms });
      continue;
    }
    const message = line.message;
    if (!isRecord(message) || message.model === "<synthetic>") continue;
    const key = stringOr(message.id) ?? stringOr(line.requestId) ?? stringOr(line.uuid) ?? `line ${index}`;
    let response = byKey.get(key);
    if (response === undefined) {
      response = {
        firstIndex: index,
        endMs: Number.NaN,
        usage: null,
        tools: [],
        requestRef: stringOr(line.requestRef),
      };
      byKey.set(key, response);
      responses.push(response);
    }
    response.endMs = laterMs(response.endMs, ms);
    const usage = lineUsage(message);
    if (usage !== null) {
      const was = response.usage;
      response.usage =
        was === null
          ? usage
          : {
              input: Math.max(was.input, usage.input),
              cacheRead: Math.max(was.cacheRead, usage.cacheRead),
              output: Math.max(was.output, usage.output),
            };
    }
    if (Array.isArray(message.content)) {
      for (const block of message.content) {
        if (isRecord(block) && block.type === "tool_use" && typeof block.name === "string")
          response.tools.push(block.name);
      }
    }
  }
  return responses.map((r, i) => {
    const prev = responses[i - 1];
    let startMs = r.requestRef === undefined ? Number.NaN : (requestsAt.get(r.requestRef) ?? Number.NaN);
    if (Number.isNaN(startMs) && prev !== undefined) {
      for (const input of inputs)
        if (input.index > prev.firstIndex && input.index < r.firstIndex) startMs = laterMs(startMs, input.ms);
    }
    return { usage: r.usage, tool: r.tools[0] ?? null, startMs, endMs: r.endMs };
  });
}

/**
 * A Claude Code session log as trace programs: the main conversation as one program (id: the session
 * id), each subagent sidechain as a program of its own (`<session id>/agent-<id>`, or
 * `<session id>/sidechain-<n>`); one turn per API response with usage (see `responsesToProgram`).
 */
export function importClaudeCodeSession(
  path: string,
  lines: readonly LogLine[],
  options: ImportOptions = {},
): SessionImport {
  const requestsAt = new Map<string, number>();
  let sessionId: string | undefined;
  let version: string | undefined;
  for (const line of lines) {
    if (line.type === "api-request" && typeof line.id === "string")
      requestsAt.set(line.id, timestampMs(line.timestamp));
    sessionId ??= isClaudeCodeLine(line) ? stringOr(line.sessionId) : undefined;
    version ??= isClaudeCodeLine(line) ? stringOr(line.version) : undefined;
  }
  const baseId = options.id ?? sessionId ?? basename(path).replace(/\.jsonl$/, "");
  const source = options.source ?? (version ? `claude-code ${version}` : "claude-code");
  const result: SessionImport = { programs: [], responsesWithoutUsage: 0, sessionsWithoutResponse: 0 };
  for (const stream of streamsOf(lines)) {
    const id = stream.name === "" ? baseId : `${baseId}/${stream.name}`;
    const { program, withoutUsage } = responsesToProgram(id, source, responsesOf(stream, requestsAt));
    result.responsesWithoutUsage += withoutUsage;
    if (program === null) result.sessionsWithoutResponse++;
    else result.programs.push(program);
  }
  if (result.programs.length === 0 && result.sessionsWithoutResponse === 0)
    result.sessionsWithoutResponse = 1;
  return result;
}
