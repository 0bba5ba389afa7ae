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
 * A line of a Qwen Code chat log (`~/.qwen/projects/<project>/chats/<session-id>.jsonl`): a user or
 * assistant line carries its session id and a Gemini-style message (`parts`; the model's role is
 * `model`). Claude Code's logs, which look alike, carry Anthropic messages (`content`) instead.
 */
export function isQwenCodeLine(line: LogLine): boolean {
  const { type, message } = line;
  if ((type !== "user" && type !== "assistant") || typeof line.sessionId !== "string") return false;
  return isRecord(message) && Array.isArray(message.parts);
}

const count = z.number().int().nonnegative();
const usageSchema = z.looseObject({
  promptTokenCount: count,
  candidatesTokenCount: count,
  thoughtsTokenCount: count.nullish(),
  cachedContentTokenCount: count.nullish(),
});

/**
 * An assistant line's `usageMetadata` (thinking is output: Gemini counts it apart) and its candidate
 * tokens alone, as the telemetry counts output; null when it is not whole.
 */
function usageOf(value: unknown): { usage: ResponseUsage; candidates: number } | null {
  const parsed = usageSchema.safeParse(value);
  if (!parsed.success) return null;
  const u = parsed.data;
  const usage = {
    input: u.promptTokenCount,
    cacheRead: u.cachedContentTokenCount ?? 0,
    output: u.candidatesTokenCount + (u.thoughtsTokenCount ?? 0),
  };
  return { usage, candidates: u.candidatesTokenCount };
}

/** The name of the first function the parts call, if any. */
function firstCall(parts: readonly unknown[]): string | null {
  for (const part of parts) {
    if (isRecord(part) && isRecord(part.functionCall)) return stringOr(part.functionCall.name) ?? null;
  }
  return null;
}

/** An `api_response` telemetry event: when its request started and ended, and its token counts. */
interface ApiResponse {
  startMs: number;
  endMs: number;
  input: number;
  output: number;
}

function apiResponseOf(line: LogLine): ApiResponse | null {
  const payload = line.systemPayload;
  if (line.subtype !== "ui_telemetry" || !isRecord(payload) || !isRecord(payload.uiEvent)) return null;
  const event = payload.uiEvent;
  if (event["event.name"] !== "qwen-code.api_response") return null;
  const endMs = timestampMs(event["event.timestamp"]);
  const { duration_ms: durationMs, input_token_count: input, output_token_count: output } = event;
  if (typeof durationMs !== "number" || typeof input !== "number" || typeof output !== "number") return null;
  return { startMs: endMs - durationMs, endMs, input, output };
}

/**
 * A Qwen Code chat log as a trace program (id: its session id): one turn per assistant line with usage
 * (see `responsesToProgram`), its tool the first `functionCall` among its parts. Its request's start and
 * end come from the `api_response` telemetry event with the same token counts logged since the previous
 * assistant line (its duration counts back from its end); without one, the request starts at the latest
 * user line before it (a message, or a tool's `functionResponse`) and ends at the assistant line. The
 * telemetry of requests no assistant line answers (Qwen Code's memory-extraction subagent) is left out.
 */
export function importQwenCodeSession(
  path: string,
  lines: readonly LogLine[],
  options: ImportOptions = {},
): SessionImport {
  let sessionId: string | undefined;
  let version: string | undefined;
  const responses: SessionResponse[] = [];
  let telemetry: ApiResponse[] = [];
  let inputMs = Number.NaN;
  for (const line of lines) {
    const api = apiResponseOf(line);
    if (api !== null) telemetry.push(api);
    if (!isQwenCodeLine(line)) continue;
    sessionId ??= stringOr(line.sessionId);
    version ??= stringOr(line.version);
    const ms = timestampMs(line.timestamp);
    if (line.type === "user") {
      inputMs = laterMs(inputMs, ms);
      continue;
    }
    const counted = usageOf(line.usageMetadata);
    const event = telemetry.find((t) => t.input === counted?.usage.input && t.output === counted.candidates);
    responses.push({
      usage: counted?.usage ?? null,
      tool: firstCall((line.message as { parts: unknown[] }).parts),
      startMs: event?.startMs ?? inputMs,
      endMs: event?.endMs ?? ms,
    });
    telemetry = [];
    inputMs = Number.NaN;
  }
  return singleSessionImport(path, options, { id: sessionId, agent: "qwen-code", version }, responses);
}
