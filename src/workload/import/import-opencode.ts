import { isRecord } from "../../tool-calls/json-objects.js";
import type { ImportOptions } from "./conversation.js";
import {
  laterMs,
  type ResponseUsage,
  type SessionImport,
  type SessionResponse,
  singleSessionImport,
  stringOr,
} from "./session-log.js";

/**
 * An opencode session as `opencode export <session-id>` writes it: `{ info, messages: [{ info, parts }] }`.
 * opencode keeps its sessions in a SQLite database (`~/.local/share/opencode/opencode.db`, in WAL mode while
 * it runs); its own export is the stable way out of it, and needs no SQLite reader here.
 */
export function isOpencodeExport(
  data: unknown,
): data is { info: Record<string, unknown>; messages: unknown[] } {
  if (!isRecord(data) || !isRecord(data.info) || typeof data.info.id !== "string") return false;
  const { messages } = data;
  return (
    Array.isArray(messages) &&
    messages.every((m) => isRecord(m) && isRecord(m.info) && Array.isArray(m.parts))
  );
}

const numberOr = (v: unknown, fallback: number): number => (typeof v === "number" ? v : fallback);

/**
 * A `step-finish` part's tokens: opencode counts the prompt's cached tokens apart from `input`
 * (`cache.read`, `cache.write`) and reasoning apart from `output`. Null when it has none.
 */
function usageOf(tokens: unknown): ResponseUsage | null {
  if (!isRecord(tokens) || typeof tokens.input !== "number" || typeof tokens.output !== "number") return null;
  const cache = isRecord(tokens.cache) ? tokens.cache : {};
  const cacheRead = numberOr(cache.read, 0);
  return {
    input: tokens.input + cacheRead + numberOr(cache.write, 0),
    cacheRead,
    output: tokens.output + numberOr(tokens.reasoning, 0),
  };
}

/** A part's time span: a tool's execution (`state.time`), else the part's own `time` (text, reasoning). */
function spanOf(part: Record<string, unknown>): { start: number; end: number } {
  const time = part.type === "tool" && isRecord(part.state) ? part.state.time : part.time;
  if (!isRecord(time)) return { start: Number.NaN, end: Number.NaN };
  return { start: numberOr(time.start, Number.NaN), end: numberOr(time.end, Number.NaN) };
}

/**
 * The responses of one assistant message: one per step (`step-start` ... `step-finish`, one model call
 * each; a message goes on with another step after the calls of the one before). A step's request starts
 * when the message was created (its first step) or when the previous step's tools ended; its response ends
 * when its last text or reasoning part ended or its first tool started running, whichever is later, and
 * the last step no earlier than the message's completion.
 */
function stepResponses(info: Record<string, unknown>, parts: readonly unknown[]): SessionResponse[] {
  const time = isRecord(info.time) ? info.time : {};
  const responses: SessionResponse[] = [];
  let startMs = numberOr(time.created, Number.NaN);
  let tool: string | null = null;
  let endMs = Number.NaN;
  let toolsEndMs = Number.NaN;
  for (const part of parts) {
    if (!isRecord(part)) continue;
    const span = spanOf(part);
    if (part.type === "tool") {
      tool ??= stringOr(part.tool) ?? null;
      endMs = laterMs(endMs, span.start);
      toolsEndMs = laterMs(toolsEndMs, span.end);
    } else if (part.type !== "step-finish") {
      endMs = laterMs(endMs, span.end);
    } else {
      responses.push({ usage: usageOf(part.tokens), tool, startMs, endMs });
      startMs = toolsEndMs;
      tool = null;
      endMs = Number.NaN;
      toolsEndMs = Number.NaN;
    }
  }
  const last = responses.at(-1);
  if (last)
    responses[responses.length - 1] = {
      ...last,
      endMs: laterMs(last.endMs, numberOr(time.completed, Number.NaN)),
    };
  return responses;
}

/**
 * An opencode export as a trace program (id: its session id; source: `opencode <version>`). One turn per
 * step of an assistant message (see `stepResponses`), its tool the step's first `tool` part (`bash`,
 * `read`, `edit`, `task`, an MCP server's `<server>_<tool>`...). A subagent's session (`task`) is exported
 * on its own (its `info.parentID` names the parent) and imports as a program of its own.
 */
export function importOpencodeExport(
  path: string,
  data: { info: Record<string, unknown>; messages: unknown[] },
  options: ImportOptions = {},
): SessionImport {
  const responses: SessionResponse[] = [];
  for (const message of data.messages) {
    if (!isRecord(message) || !isRecord(message.info) || !Array.isArray(message.parts)) continue;
    if (message.info.role !== "assistant") continue;
    responses.push(...stepResponses(message.info, message.parts));
  }
  const session = { id: stringOr(data.info.id), agent: "opencode", version: stringOr(data.info.version) };
  return singleSessionImport(path, options, session, responses);
}
